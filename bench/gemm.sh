#!/usr/bin/env bash
# GEMM throughput of dtrain (bench_gemm) against OpenBLAS sgemm through numpy (gemm_peer.py), case by case
# interleaved so both see the same machine; prints per case one JSON line with gflops, peer_gflops and ratio.
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$build_dir/bench_gemm"
python=/usr/bin/python3

if [[ ! -x "$bench" ]]; then
  echo "gemm.sh: $bench not found; build it with: cmake --build $build_dir --target bench_gemm" >&2
  exit 2
fi
if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "gemm.sh: the peer needs Debian's numpy over OpenBLAS: apt-get install python3-numpy libopenblas0-pthread" >&2
  exit 2
fi

# OpenBLAS picks its kernels from the CPU model and falls back to Prescott (SSE3) on a model it does not know,
# as on some VMs (this project's Xeon: 20 GFLOP/s on 2048^3 instead of 98): the peer runs the kernels of the ISA
# dtrain's kernels use (OPENBLAS_CORETYPE, unless given): SkylakeX for avx512, Haswell for avx2.
isa=${DTRAIN_CPU_ISA:-$("$build_dir/dtrain" --version | sed -n 's/^CPU kernels this CPU runs: \([a-z0-9]*\).*/\1/p')}
case $isa in
  avx512) core=SkylakeX ;;
  avx2) core=Haswell ;;
  *) core=Prescott ;;
esac
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core}
echo "# dtrain's $isa kernels against OpenBLAS's $OPENBLAS_CORETYPE kernels on$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

cases=()
for threads in 1 2; do
  for shape in 128x784x700 128x700x500 16x784x700 2048x2048x2048; do cases+=("$shape $threads"); done
done
# The rest of the MLP training step (kernel gradients TN, input gradients NT, the N = 10 layer) at 2 threads.
for shape in 128x500x10 TN:784x128x700 TN:700x128x500 TN:500x128x10 NT:128x500x700 NT:128x10x500; do
  cases+=("$shape 2")
done
for entry in "${cases[@]}"; do
  read -r shape threads <<<"$entry"
  ours="$("$bench" "$shape" "$threads")"
  peer="$("$python" "$here/gemm_peer.py" "$shape" "$threads")"
  "$python" - "$ours" "$peer" <<'PY'
import json, sys
ours, peer = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert ours["name"] == peer["name"], (ours["name"], peer["name"])
print(json.dumps({"name": ours["name"], "gflops": ours["gflops"], "seconds": ours["seconds"],
                  "peer_gflops": peer["gflops"], "peer_seconds": peer["seconds"],
                  "ratio": round(ours["gflops"] / peer["gflops"], 3)}))
PY
done
