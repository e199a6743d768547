"""PyTorch's gloo backend: allreduce of float32 sums, 4 KiB to 64 MiB, between N
processes on this machine, timed as `ksdist bench allreduce` times it (two warm-up
calls, a barrier, about 256 MiB moved in 5 to 200 calls, the slowest rank's time).

    /usr/bin/python3 bench/allreduce-torch.py [N] [--json]
    /usr/bin/python3 bench/allreduce-torch.py --rank R N STORE_FILE   (one rank, JSON;
        bench/run-cluster.sh starts one per host, all meeting at STORE_FILE)
"""
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iterations(nbytes):
    return max(5, min(200, (256 << 20) // nbytes))


def run_rank(rank, n, store_file, as_json, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank, world_size=n)
    results = []
    nbytes = 4096
    while nbytes <= 64 << 20:
        buf = torch.zeros(nbytes // 4, dtype=torch.float32)
        for _ in range(2):
            dist.all_reduce(buf)
        dist.barrier()
        iters = iterations(nbytes)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        seconds = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        t = seconds.item()
        busbw = nbytes / t / 1e9 * 2 * (n - 1) / n
        results.append({"bytes": nbytes, "time_us": round(t * 1e6, 2), "busbw": round(busbw, 4)})
        nbytes *= 4
    dist.destroy_process_group()
    if rank == 0 and queue is None:
        print(json.dumps({"what": "allreduce", "comm": "torch gloo " + torch.__version__,
                          "ranks": n, "results": results}))
    elif rank == 0:
        queue.put(results)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        run_rank(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], True, None)
        return
    args = [a for a in sys.argv[1:] if a != "--json"]
    as_json = "--json" in sys.argv
    n = int(args[0]) if args else 2
    store_file = os.path.join(tempfile.mkdtemp(prefix="ksdist-torch-"), "store")
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run_rank, args=(n, store_file, as_json, queue), nprocs=n)
    results = queue.get()
    if as_json:
        print(json.dumps({"what": "allreduce", "comm": "torch gloo " + torch.__version__,
                          "ranks": n, "results": results}))
        return
    print("# PyTorch %s gloo allreduce: %d ranks, float32 sum" % (torch.__version__, n))
    print("# %10s %10s %10s" % ("size (B)", "time (us)", "busbw GB/s"))
    for r in results:
        print("  %10d %10.1f %10.3f" % (r["bytes"], r["time_us"], r["busbw"]))


if __name__ == "__main__":
    main()
