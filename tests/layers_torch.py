"""The CNN of examples/cnn-idx.ini (or, with `binary`, of examples/cnn-binary.ini: average
pools, one padded and overlapping, and the binary logistic loss) in PyTorch, from the
weights ksdist started with (W0, written by `ksdist export --torch`), on every training
image of the IDX folder: prints the loss and checks it and every gradient against
ksdist's, whose gradient is (W0 - W1) / LR for W1 the weights after one plain SGD step of
learning rate LR on the same images. Exits 1 naming the first tensor that differs.
  layers_torch.py FOLDER W0 W1 LR KSDIST_LOSS [binary]"""
import json
import os
import struct
import sys

import torch
from torch import nn

folder, w0_path, w1_path, lr, ks_loss = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
binary = len(sys.argv) > 6 and sys.argv[6] == "binary"


def safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(t["shape"])
    return out


def idx(name):
    data = open(os.path.join(folder, name), "rb").read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


# export --torch writes PyTorch's layouts: conv [f, c, ky, kx], the layer after the
# flatten in NCHW's (c, h, w) order
w0 = safetensors(w0_path)
w1 = safetensors(w1_path)
model = nn.Sequential()
if binary:  # examples/cnn-binary.ini
    model.add_module("conv1", nn.Conv2d(1, 8, 5, padding=2))
    model.add_module("relu1", nn.ReLU())
    model.add_module("pool1", nn.AvgPool2d(2))
    model.add_module("conv2", nn.Conv2d(8, 16, 3, padding=1))
    model.add_module("relu2", nn.ReLU())
    model.add_module("pool2", nn.AvgPool2d(3, stride=2, padding=1))  # count_include_pad
    model.add_module("flat", nn.Flatten())
    model.add_module("out", nn.Linear(16 * 7 * 7, 1))
else:
    model.add_module("conv1", nn.Conv2d(1, 16, 5, padding=2))
    model.add_module("relu1", nn.ReLU())
    model.add_module("pool1", nn.MaxPool2d(2))
    model.add_module("conv2", nn.Conv2d(16, 32, 5, padding=2))
    model.add_module("relu2", nn.ReLU())
    model.add_module("pool2", nn.MaxPool2d(2))
    model.add_module("flat", nn.Flatten())
    model.add_module("hidden", nn.Linear(32 * 7 * 7, 128))
    model.add_module("relu3", nn.ReLU())
    model.add_module("out", nn.Linear(128, 10))
model.load_state_dict(w0, strict=True)

x = idx("train-images-idx3-ubyte").float().div(255).unsqueeze(1)
y = idx("train-labels-idx1-ubyte").long()
if binary:
    loss = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y.float())
else:
    loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
print(f"loss: PyTorch {loss.item():.6f}, ksdist {ks_loss:.4f}")
if abs(loss.item() - ks_loss) > 1e-4:
    print("the losses differ")
    sys.exit(1)
for name, p in model.named_parameters():
    ks_grad = (w0[name] - w1[name]) / lr
    scale = p.grad.abs().max().item()
    worst = (p.grad - ks_grad).abs().max().item()
    print(f"{name}: |grad| max {scale:.3g}, largest difference {worst:.3g}")
    if worst > 1e-3 * max(scale, 1e-3):
        print(f"{name}: the gradients differ")
        sys.exit(1)
