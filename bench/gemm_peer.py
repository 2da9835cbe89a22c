#!/usr/bin/python3
"""The peer of bench_gemm: OpenBLAS sgemm through numpy (float32 np.matmul), same cases, same JSON.

Run with Debian's /usr/bin/python3 (python3-numpy over libopenblas0-pthread). Each case runs in its own
subprocess with OPENBLAS_NUM_THREADS set, since OpenBLAS reads it once at load.
Usage: gemm_peer.py                 all cases
       gemm_peer.py MxKxN THREADS   one case
"""
import json
import os
import subprocess
import sys
import time

CASES = [(threads, shape) for threads in (1, 2)
         for shape in ("128x784x700", "128x700x500", "16x784x700", "2048x2048x2048")]


def measure(shape, threads):
    import numpy as np

    m, k, n = (int(x) for x in shape.split("x"))
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
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
    print(json.dumps({"name": f"gemm {shape} threads={threads}",
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
