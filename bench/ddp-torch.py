"""PyTorch DDP on the gloo backend: the MLP 784-1024-1024-10 (ReLU), batch 128 per rank,
SGD, on N processes with one thread each, timed as bench/bench-ddp times ksdist (3
warm-up steps, best of 3 rounds of 20, the slowest rank's). Prints ms/step.

    /usr/bin/python3 bench/ddp-torch.py [N]
    /usr/bin/python3 bench/ddp-torch.py --rank R N STORE_FILE [IN,HIDDEN,...,OUT] [tanh]
        (one rank, rank 0 prints ms/step; bench/run-cluster.sh starts one per host, all
        meeting at STORE_FILE, with its MLP: 2,1024,1024,2 tanh)
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


def run_rank(rank, n, store_file, queue, widths=(IN, HIDDEN, HIDDEN, CLASSES), act=nn.ReLU):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank, world_size=n)
    torch.manual_seed(1)
    layers = []
    for i in range(len(widths) - 1):
        layers += [nn.Linear(widths[i], widths[i + 1])] + ([act()] if i < len(widths) - 2 else [])
    model = nn.Sequential(*layers)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.rand(BATCH, widths[0], generator=gen)
    y = torch.randint(0, widths[-1], (BATCH,), generator=gen)

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
    if rank == 0 and queue is None:
        print("%.2f" % worst.item())
    elif rank == 0:
        queue.put(worst.item())


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        widths = tuple(int(w) for w in sys.argv[5].split(",")) if len(sys.argv) > 5 else None
        act = nn.Tanh if len(sys.argv) > 6 and sys.argv[6] == "tanh" else nn.ReLU
        run_rank(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], None,
                 *((widths, act) if widths else ()))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    store_file = os.path.join(tempfile.mkdtemp(prefix="ksdist-ddp-torch-"), "store")
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run_rank, args=(n, store_file, queue), nprocs=n)
    print("%.2f" % queue.get())


if __name__ == "__main__":
    main()
