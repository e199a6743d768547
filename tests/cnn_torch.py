"""The CNN of tests/test-cnn-torch.sh (conv2d, batch_norm, max and average pools, a
flatten, two linear layers) in PyTorch, to check that weights cross both ways:
  cnn_torch.py load FILE FOLDER   loads `ksdist export --torch`'s FILE strictly
  cnn_torch.py make FILE FOLDER   writes a fresh nn.Module's state_dict (random weights and
                                  running statistics, num_batches_tracked as int64) to FILE
and prints the model's logits (eval mode) for the t10k images of the IDX FOLDER, scaled
to [0, 1] as ksdist reads them, one line a row, as `ksdist infer` prints them."""
import json
import os
import struct
import sys

import torch
from torch import nn

mode, path, folder = sys.argv[1:4]
model = nn.Sequential()
model.add_module("conv1", nn.Conv2d(1, 4, 3, padding=1))
model.add_module("bn1", nn.BatchNorm2d(4, eps=1e-5))
model.add_module("relu1", nn.ReLU())
model.add_module("pool1", nn.MaxPool2d(2))
model.add_module("conv2", nn.Conv2d(4, 6, 5, padding=2))
model.add_module("relu2", nn.ReLU())
model.add_module("pool2", nn.AvgPool2d(2))
model.add_module("flat", nn.Flatten())
model.add_module("hidden", nn.Linear(6 * 7 * 7, 16))
model.add_module("relu3", nn.ReLU())
model.add_module("out", nn.Linear(16, 10))

dtypes = {"F32": torch.float32, "I64": torch.int64}
names = {torch.float32: "F32", torch.int64: "I64"}
if mode == "load":
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    state = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        state[name] = torch.frombuffer(bytearray(raw[8 + n + begin:8 + n + end]),
                                       dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    model.load_state_dict(state, strict=True)
else:
    torch.manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.3, 0.3)
        model.bn1.running_mean.uniform_(-0.2, 0.2)
        model.bn1.running_var.uniform_(0.5, 1.5)
        model.bn1.num_batches_tracked.fill_(3)
    header, blobs, offset = {}, [], 0
    for name, t in model.state_dict().items():
        b = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

data = open(os.path.join(folder, "t10k-images-idx3-ubyte"), "rb").read()
count, h, w = struct.unpack(">III", data[4:16])
x = torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).reshape(count, 1, h, w)
model.eval()
with torch.no_grad():
    for row in model(x.float() / 255):
        print(" ".join("%.9g" % v for v in row.tolist()))
