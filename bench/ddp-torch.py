"""PyTorch DDP on the gloo backend: the MLP 784-1024-1024-10 (ReLU), batch 128 per rank,
SGD, on N processes with one thread each, timed as bench/bench-ddp times ksdist (3
warm-up steps, best of 3 rounds of 20, the slowest rank's). Prints ms/step.

    /usr/bin/python3 bench/ddp-torch.py [N]
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

BATCH, IN, HIDDEN, CLASSES, WARMUP, STEPS, ROUNDS = 128, 784, 1024, 10, 3, 20, 3


def run_rank(rank, n, store_file, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank, world_size=n)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, CLASSES))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.rand(BATCH, IN, generator=gen)
    y = torch.randint(0, CLASSES, (BATCH,), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()
        opt.step()

    for _ in range(WARMUP):
        step()
    best = float("inf")
    for _ in range(ROUNDS):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        best = min(best, (time.perf_counter() - t0) * 1e3 / STEPS)
    worst = torch.tensor([best], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    if rank == 0:
        queue.put(worst.item())


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    store_file = os.path.join(tempfile.mkdtemp(prefix="ksdist-ddp-torch-"), "store")
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run_rank, args=(n, store_file, queue), nprocs=n)
    print("%.2f" % queue.get())


if __name__ == "__main__":
    main()
