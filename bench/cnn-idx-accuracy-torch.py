"""The network and training of examples/cnn-idx.ini in PyTorch on the same IDX folder:
conv 5x5/16/padding 2, ReLU, max pool 2, conv 5x5/32/padding 2, ReLU, max pool 2, Linear
1568 -> 128, ReLU, Linear 128 -> 10; Adam lr 1e-3, batch 64, STEPS steps of batches drawn
in epochs of a seeded order; prints the held-out accuracy on the t10k files. Takes
FOLDER, STEPS (600) and THREADS (1)."""
import gzip
import os
import struct
import sys

import torch
from torch import nn

folder = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 600
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 1)


def idx(name):
    path = os.path.join(folder, name)
    opener = open if os.path.exists(path) else gzip.open
    with opener(path if os.path.exists(path) else path + ".gz", "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


x = idx("train-images-idx3-ubyte").float().div(255).unsqueeze(1)
y = idx("train-labels-idx1-ubyte").long()
tx = idx("t10k-images-idx3-ubyte").float().div(255).unsqueeze(1)
ty = idx("t10k-labels-idx1-ubyte").long()
torch.manual_seed(1)
model = nn.Sequential(
    nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
adam = torch.optim.Adam(model.parameters(), lr=1e-3)
order = torch.randperm(len(x))
for step in range(steps):
    at = (step * 64) % len(x)
    if at + 64 > len(x):
        order, at = torch.randperm(len(x)), 0
    b = order[at:at + 64]
    adam.zero_grad()
    nn.functional.cross_entropy(model(x[b]), y[b]).backward()
    adam.step()
with torch.no_grad():
    right = (model(tx).argmax(1) == ty).float().mean().item()
print(f"{right:.4f}")
