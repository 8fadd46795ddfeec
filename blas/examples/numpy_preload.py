"""numpy's float32 products through libsgemm_blas, put in front of numpy's BLAS with LD_PRELOAD.

    python3 numpy_preload.py LIBRARY            # check: exit code 0 when every product holds
    python3 numpy_preload.py LIBRARY --time N   # time a float32 N x N product, with and without

The check runs float32 products (square, rectangular, transposed and strided operands, which
numpy hands to cblas_sgemm with its transpose flags and leading dimensions) in a child process
that has the library preloaded with SGEMM_VERBOSE=1, and compares each with the float64
product (within the reference BLAS bound, 16 eps relative to |A||B|) and with numpy's own
float32 result here, without the library. The child's standard error must show the calls
arriving in the library, so a numpy whose BLAS the preload does not reach fails the check
rather than passing it unseen. Debian's python3-numpy calls the system's cblas_sgemm; the
PyPI wheels call their bundled OpenBLAS as scipy_cblas_sgemm64_ (64-bit integers): the library
exports both names.
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# (name, A's stored shape, B's stored shape, A transposed, B transposed, reaches cblas_sgemm):
# a product with one row is matrix-vector work, which numpy sends to cblas_sgemv instead.
CASES = [
    ("square", (64, 64), (64, 64), False, False),
    ("odd", (37, 41), (41, 29), False, False),
    ("A^T", (41, 37), (41, 29), True, False),
    ("B^T", (37, 41), (29, 41), False, True),
    ("both^T", (41, 37), (29, 41), True, True),
    ("big", (300, 257), (257, 311), False, False),
    ("vector-like", (1, 500), (500, 300), False, False),
]


def operands(name, a_shape, b_shape, ta, tb):
    rng = np.random.default_rng([ord(ch) for ch in name])
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    a = a.T if ta else a
    b = b.T if tb else b
    return a, b


def child(out_dir):
    for case in CASES:
        a, b = operands(*case)
        np.save(os.path.join(out_dir, case[0] + ".npy"), a @ b)
    # A strided view: every other row of a larger matrix (numpy copies or passes lda).
    big = np.arange(80 * 60, dtype=np.float32).reshape(80, 60) / 1000
    np.save(os.path.join(out_dir, "strided.npy"), big[::2, :50] @ big[:50, ::2])


def check(library):
    env = dict(os.environ, LD_PRELOAD=library, SGEMM_VERBOSE="1")
    failures = 0
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run([sys.executable, __file__, "--child", out], env=env, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            return 1
        calls = [line for line in run.stderr.splitlines() if line.startswith("sgemm: ") and " on " in line]
        print(f"{len(calls)} calls reached the library, e.g. {calls[0] if calls else '(none)'}")
        if len(calls) < len(CASES) - 1:  # every case but the vector-like one
            print("FAIL: numpy's float32 products did not reach the preloaded library")
            failures += 1
        big = np.arange(80 * 60, dtype=np.float32).reshape(80, 60) / 1000
        cases = [(c[0], *operands(*c)) for c in CASES] + [("strided", big[::2, :50], big[:50, ::2])]
        for name, a, b in cases:
            got = np.load(os.path.join(out, name + ".npy"))
            want = a.astype(np.float64) @ b.astype(np.float64)
            bound = 16 * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
            own = a @ b  # numpy's own BLAS, here in the parent without the library
            err = np.max(np.abs(got - want) - bound)
            ok = got.shape == own.shape and err <= 0 and np.allclose(got, own, rtol=1e-5, atol=1e-5)
            print(f"{name:12} {str(got.shape):12} {'ok' if ok else 'FAIL'}")
            failures += not ok
    print("ok" if failures == 0 else f"FAILED: {failures}")
    return 1 if failures else 0


def time_product(n, reps=5):
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a @ b  # warm-up (and, preloaded, the library's first call opens the GPU)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    print(f"{best * 1e3:.2f} ms, {2 * n**3 / best / 1e12:.3f} TFLOP/s")


def timing(library, n):
    for label, env in [("numpy's own BLAS", {}), ("preloaded", {"LD_PRELOAD": library})]:
        run = subprocess.run(
            [sys.executable, __file__, "--time-child", str(n)],
            env=dict(os.environ, **env), capture_output=True, text=True,
        )
        print(f"{label:18} n = {n}: {run.stdout.strip()} {run.stderr.strip()}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2])
    elif sys.argv[1] == "--time-child":
        time_product(int(sys.argv[2]))
    elif len(sys.argv) > 3 and sys.argv[2] == "--time":
        sys.exit(timing(os.path.abspath(sys.argv[1]), int(sys.argv[3])))
    else:
        sys.exit(check(os.path.abspath(sys.argv[1])))
