"""The same step as bench-mlp.c in PyTorch: prints ms/step (best of rounds) and peak RSS
in MiB. Run with Debian's /usr/bin/python3 (python3-torch) and OPENBLAS_NUM_THREADS set."""
import torch

from torch_step_timing import DEVICE, time_steps

BATCH, IN, HIDDEN, CLASSES, WARMUP, STEPS, ROUNDS = 128, 784, 1024, 10, 3, 20, 3

torch.manual_seed(1)
model = torch.nn.Sequential(
    torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, CLASSES)).to(DEVICE)
sgd = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.rand(BATCH, IN).to(DEVICE)
y = torch.randint(0, CLASSES, (BATCH,)).to(DEVICE)


def step():
    sgd.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    sgd.step()


time_steps(step, WARMUP, STEPS, ROUNDS)
