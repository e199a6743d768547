"""The network of examples/cnn-idx.ini in PyTorch, one training step on 28 x 28 grey
images: conv 5x5/16/padding 2, ReLU, max pool 2, conv 5x5/32/padding 2, ReLU, max pool 2,
Linear 1568 -> 128, ReLU, Linear 128 -> 10, cross entropy, Adam lr 1e-3. Prints ms/step
(best of rounds) and peak RSS in MiB. Takes THREADS, DEVICE and BATCH (128)."""
import sys

import torch

from torch_step_timing import DEVICE, time_steps
from torch import nn

BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 128
torch.manual_seed(1)
model = nn.Sequential(
    nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).to(DEVICE)
adam = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.rand(BATCH, 1, 28, 28).to(DEVICE)
y = torch.randint(0, 10, (BATCH,)).to(DEVICE)


def step():
    adam.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    adam.step()


time_steps(step, 5, 20, 3)
