"""Timing of a PyTorch training step for bench/run-vs-torch.sh: prints one line,
ms/step (best of rounds) and peak RSS in MiB, as the C bench programs do. The scripts
take THREADS and DEVICE (cpu or cuda) as arguments."""
import resource
import sys
import time

import torch

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
DEVICE = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cpu")
torch.set_num_threads(THREADS)


def sync():
    """Waits for the GPU's queued work, so a round's time includes it."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def time_steps(step, warmup, steps, rounds):
    for _ in range(warmup):
        step()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) * 1e3 / steps)
    print(f"{best:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}")
