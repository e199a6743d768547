"""The same step as bench-conv.c in PyTorch: Reptile's Omniglot model on NCHW images
(4 x conv 3x3/64/stride 2/padding 1, BatchNorm2d in training mode, ReLU; Linear 256 -> 5),
cross entropy, Adam lr 1e-3. Prints ms/step (best of rounds) and peak RSS in MiB.
Run with Debian's /usr/bin/python3 and OPENBLAS_NUM_THREADS set; takes THREADS, DEVICE
and BATCH (5, Reptile's inner batch, by default)."""
import sys

import torch

from torch_step_timing import DEVICE, time_steps
from torch import nn

SIDE, FILTERS, LAYERS, CLASSES, WARMUP, STEPS, ROUNDS = 28, 64, 4, 5, 5, 20, 3
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 5

torch.manual_seed(1)
layers, channels = [], 1
for _ in range(LAYERS):
    layers += [nn.Conv2d(channels, FILTERS, 3, stride=2, padding=1),
               nn.BatchNorm2d(FILTERS), nn.ReLU()]
    channels = FILTERS
model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(FILTERS * 2 * 2, CLASSES)).to(DEVICE)
adam = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.rand(BATCH, 1, SIDE, SIDE).to(DEVICE)
y = torch.randint(0, CLASSES, (BATCH,)).to(DEVICE)


def step():
    adam.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    adam.step()


time_steps(step, WARMUP, STEPS, ROUNDS)
