"""Timing of a PyTorch training step for bench/run-vs-torch.sh: prints one line,
ms/step (best of rounds) and peak RSS in MiB, as the C bench programs do."""
import resource
import time


def time_steps(step, warmup, steps, rounds):
    for _ in range(warmup):
        step()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t0) * 1e3 / steps)
    print(f"{best:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}")
