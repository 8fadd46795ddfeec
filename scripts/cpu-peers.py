"""The CPU peers of the device host, timed like `gemm --backend cpu`: numpy's float32 matmul
(OpenBLAS) and PyTorch's (MKL), n x n x n, at the given thread counts, the median of 5 runs
after a warm-up, printed as GFLOP/s. Run beside `gemm --backend cpu --threads T --m N` in the
same session for ratios (scripts/on-device.sh's `cpu` step does both).

    python3 scripts/cpu-peers.py --sizes 1024,2048,4096 --threads 1,16
"""

import argparse
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

try:
    import torch
except ImportError:
    torch = None


def median_seconds(f, runs=5):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1024,2048,4096")
    p.add_argument("--threads", default="1,16")
    args = p.parse_args()
    for threads in map(int, args.threads.split(",")):
        for n in map(int, args.sizes.split(",")):
            rng = np.random.default_rng(n)
            a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
            b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
            flops = 2 * n**3
            with threadpool_limits(limits=threads):
                numpy_s = median_seconds(lambda: a @ b)
            line = f"threads {threads:2} n {n:5}  numpy {flops / numpy_s / 1e9:8.1f} GFLOP/s"
            if torch is not None:
                torch.set_num_threads(threads)
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                torch_s = median_seconds(lambda: ta @ tb)
                line += f"  torch {flops / torch_s / 1e9:8.1f} GFLOP/s"
            print(line, flush=True)


if __name__ == "__main__":
    main()
