"""The same step as bench-mlp.c in PyTorch: prints ms/step (best of rounds) and peak RSS
in MiB. Run with Debian's /usr/bin/python3 (python3-torch) and OPENBLAS_NUM_THREADS set."""
import sys

import torch

from torch_step_timing import time_steps

BATCH, IN, HIDDEN, CLASSES, WARMUP, STEPS, ROUNDS = 128, 784, 1024, 10, 3, 20, 3

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(1)
model = torch.nn.Sequential(
    torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, CLASSES))
sgd = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.rand(BATCH, IN)
y = torch.randint(0, CLASSES, (BATCH,))


def step():
    sgd.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    sgd.step()


time_steps(step, WARMUP, STEPS, ROUNDS)
