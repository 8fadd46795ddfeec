"""The CPU peers of the device host beside ours, in one process on the same buffers: numpy's
float32 matmul (OpenBLAS there), PyTorch's (MKL there) and, with --ours, this project's BLAS
drop-in (`cblas_sgemm` of libsgemm_blas.so, on the CPU); --before adds another build's drop-in
(a library of its own in the process), for a before/after in the same turns. Row-major
`C = A B` of each shape (`N` for a cube, or `MxNxK`), on one thread count per process (the
drop-in reads its thread count, SGEMM_CPU_THREADS, once). The contenders take turns, one timed
call each per round, after a warm-up call each, so that a neighbour's load on the shared host
falls on all of them alike; each figure is the median of the rounds, in GFLOP/s, and `ratio`
is ours over the fastest peer. On more than one thread each call is followed by an untimed
pause (--settle): OpenBLAS's workers spin for about 70 ms after a call and OpenMP's (MKL's)
for up to 200 ms, and whoever ran next would be timed against them. scripts/on-device.sh's
`cpu` step runs it at each thread count.

A single product is also timed through the peers' own `cblas_sgemm` called by ctypes, as ours
is (`openblas-c`: numpy's bundled OpenBLAS; `mkl-c`: PyTorch's MKL, where its library exports
the symbol): on small shapes the Python entries' costs differ by microseconds, a large share of
the call.

With --batch N each call is N products of the shape, members back to back: numpy's matmul of
stacked arrays (one BLAS call a member), PyTorch's `bmm`, and the drop-in's
`cblas_sgemm_batch_strided`.

With --transa (--transb) `A` (`B`) is stored transposed, `k x m` (`n x k`) row-major, and every
contender computes `C = op(A) op(B)` from that storage: numpy and PyTorch on transposed views,
the `cblas_sgemm` calls with `CblasTrans`.

    python3 scripts/cpu-peers.py --ours .devbuild/blas/libsgemm_blas.so --threads 16 \
        --shapes 512,1024,8x4096x4096
"""

import argparse
import ctypes
import os
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

try:
    import torch
except ImportError:
    torch = None

# CBLAS's enumerations.
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def load_ours(path, threads):
    """`cblas_sgemm` and `cblas_sgemm_batch_strided` of the drop-in at `path`, on the CPU with
    `threads` threads."""
    os.environ["SGEMM_BACKEND"] = "cpu"
    os.environ["SGEMM_CPU_THREADS"] = str(threads)
    lib = ctypes.CDLL(path)
    ptr = ctypes.POINTER(ctypes.c_float)
    i, s = ctypes.c_int, ctypes.c_float
    single, batched = lib.cblas_sgemm, lib.cblas_sgemm_batch_strided
    single.restype = batched.restype = None
    single.argtypes = [i, i, i, i, i, i, s, ptr, i, ptr, i, s, ptr, i]
    batched.argtypes = [i, i, i, i, i, i, s, ptr, i, i, ptr, i, i, s, ptr, i, i, i]
    return single, batched


def load_peer_cblas():
    """The `cblas_sgemm` of the peers' own libraries, to be called through ctypes as ours is, so
    that on small shapes every contender so called pays the same call cost (numpy's and
    PyTorch's Python entries cost differently): numpy's bundled OpenBLAS (`openblas-c`, its
    64-bit-integer `scipy_cblas_sgemm64_`) and PyTorch's MKL (`mkl-c`) where its library exports
    `cblas_sgemm`. Each as `(name, function, integer type)`."""
    found = []
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for name in sorted(os.listdir(libs)) if os.path.isdir(libs) else []:
        if name.startswith("libscipy_openblas64_"):
            lib = ctypes.CDLL(os.path.join(libs, name))
            found.append(("openblas-c", getattr(lib, "scipy_cblas_sgemm64_"), ctypes.c_int64))
    if torch is not None:
        path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        try:
            found.append(("mkl-c", getattr(ctypes.CDLL(path), "cblas_sgemm"), ctypes.c_int))
        except (OSError, AttributeError):
            pass
    for _, f, i in found:
        ptr, s = ctypes.POINTER(ctypes.c_float), ctypes.c_float
        f.restype = None
        f.argtypes = [i, i, i, i, i, i, s, ptr, i, ptr, i, s, ptr, i]
    return found


def shape(text):
    parts = [int(x) for x in text.lower().split("x")]
    return (parts * 3)[:3] if len(parts) == 1 else tuple(parts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1024,2048,4096")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=1, help="products per call, back to back")
    p.add_argument("--ours", help="path of libsgemm_blas.so")
    p.add_argument("--before", help="path of another build's libsgemm_blas.so, timed beside")
    p.add_argument("--seconds", type=float, default=3.0, help="time per shape (at least 5 rounds)")
    p.add_argument("--settle", type=float, default=0.25, help="pause after each call, threads > 1")
    p.add_argument("--transa", action="store_true", help="A stored transposed (k x m)")
    p.add_argument("--transb", action="store_true", help="B stored transposed (n x k)")
    args = p.parse_args()
    threads = args.threads
    ours = load_ours(args.ours, threads) if args.ours else None
    before = load_ours(args.before, threads) if args.before else None
    if torch is not None:
        torch.set_num_threads(threads)
    batch = args.batch
    peer_cblas = load_peer_cblas()
    for m, n, k in map(shape, args.shapes.split(",")):
        rng = np.random.default_rng(m * n * k)
        # The stored operands (transposed where asked), and op(A), op(B) as views of them.
        a = rng.uniform(-1, 1, (batch, k, m) if args.transa else (batch, m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (batch, n, k) if args.transb else (batch, k, n)).astype(np.float32)
        c = np.zeros((batch, m, n), np.float32)
        if batch == 1:
            a, b, c = a[0], b[0], c[0]
        op_a = a.swapaxes(-1, -2) if args.transa else a
        op_b = b.swapaxes(-1, -2) if args.transb else b
        ops = (TRANS if args.transa else NO_TRANS, TRANS if args.transb else NO_TRANS)
        lda, ldb = (m if args.transa else k), (k if args.transb else n)
        contenders = {"numpy": lambda: np.matmul(op_a, op_b, out=c)}
        if torch is not None:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            ta = ta.transpose(-1, -2) if args.transa else ta
            tb = tb.transpose(-1, -2) if args.transb else tb
            mul = torch.matmul if batch == 1 else torch.bmm
            contenders["torch"] = lambda: mul(ta, tb, out=tc)
        fp = ctypes.POINTER(ctypes.c_float)
        pa, pb, pc = (x.ctypes.data_as(fp) for x in (a, b, c))
        for name, lib in (("ours", ours), ("before", before)):
            if lib is None:
                continue
            single, batched = lib
            if batch == 1:
                contenders[name] = lambda f=single: f(ROW_MAJOR, *ops, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)
            else:
                contenders[name] = lambda f=batched: f(
                    ROW_MAJOR, *ops, m, n, k, 1.0, pa, lda, m * k, pb, ldb, k * n, 0.0, pc, n, m * n, batch
                )
        if batch == 1:
            for name, f, _ in peer_cblas:
                contenders[name] = lambda f=f: f(ROW_MAJOR, *ops, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)
        times = {name: [] for name in contenders}
        with threadpool_limits(limits=threads):
            for f in contenders.values():
                f()
            start = time.perf_counter()
            while min(map(len, times.values())) < 5 or time.perf_counter() - start < args.seconds:
                for name, f in contenders.items():
                    t = time.perf_counter()
                    f()
                    times[name].append(time.perf_counter() - t)
                    if threads > 1:
                        time.sleep(args.settle)
        rate = {name: 2 * batch * m * n * k / statistics.median(ts) / 1e9 for name, ts in times.items()}
        label = f"{m}x{n}x{k}" if batch == 1 else f"{batch}*{m}x{n}x{k}"
        label += " " + "".join("T" if t else "N" for t in (args.transa, args.transb))
        line = f"threads {threads:2} {label:<18} rounds {len(times['numpy']):4}"
        line += "".join(f"  {name} {r:8.1f}" for name, r in rate.items())
        if ours is not None:
            best = max(r for name, r in rate.items() if name not in ("ours", "before"))
            line += f"  ratio {rate['ours'] / best:.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
