#!/usr/bin/python3
"""The peer of bench_gemm: OpenBLAS sgemm through numpy (float32 np.matmul), same cases, same JSON.

Run with Debian's /usr/bin/python3 (python3-numpy over libopenblas0-pthread). Each case runs in its own
subprocess with OPENBLAS_NUM_THREADS set, since OpenBLAS reads it once at load.
Usage: gemm_peer.py                 all cases
       gemm_peer.py [TN:|NT:]MxKxN THREADS   one case
"""
import json
import os
import subprocess
import sys
import time

CASES = [(threads, shape) for threads in (1, 2)
         for shape in ("128x784x700", "128x700x500", "16x784x700", "2048x2048x2048")]
# The rest of the MLP training step at 2 threads (bench_gemm's list): "TN:" is A^T * B with A stored K x M,
# "NT:" is A * B^T with B stored N x K.
CASES += [(2, shape) for shape in ("128x500x10", "TN:784x128x700", "TN:700x128x500", "TN:500x128x10",
                                   "NT:128x500x700", "NT:128x10x500")]


def measure(shape, threads):
    import numpy as np

    trans = shape[:2] if shape[2:3] == ":" else "NN"
    m, k, n = (int(x) for x in shape.split(":")[-1].split("x"))
    rng = np.random.default_rng(1)
    # Stored as the training step stores them; .T is a view, so OpenBLAS sees the transpose flag.
    a = rng.uniform(-1, 1, (k, m) if trans[0] == "T" else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if trans[1] == "T" else (k, n)).astype(np.float32)
    if trans[0] == "T":
        a = a.T
    if trans[1] == "T":
        b = b.T
    out = np.empty((m, n), np.float32)
    np.matmul(a, b, out=out)  # warm-up: thread pool, caches
    times = []
    while sum(times) < 0.3 or len(times) < 5:
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - start)
    times.sort()
    seconds = times[len(times) // 2]
    # A fast wrong answer is a failure.
    expected = a[:8].astype(np.float64) @ b.astype(np.float64)
    assert np.abs(expected - out[:8]).max() <= 1e-5 + 1e-6 * k, "numpy matmul disagrees with float64"
    label = shape if trans == "NN" else f"{trans} {shape[3:]}"
    print(json.dumps({"name": f"gemm {label} threads={threads}",
                      "gflops": round(2.0 * m * n * k / seconds / 1e9, 2),
                      "seconds": float(f"{seconds:.6g}")}), flush=True)


def run_case(shape, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    subprocess.run([sys.executable, os.path.abspath(__file__), "--in-process", shape, str(threads)],
                   env=env, check=True)


def main(argv):
    if len(argv) == 4 and argv[1] == "--in-process":
        measure(argv[2], int(argv[3]))
    elif len(argv) == 3:
        run_case(argv[1], int(argv[2]))
    elif len(argv) == 1:
        for threads, shape in CASES:
            run_case(shape, threads)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
