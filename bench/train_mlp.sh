#!/usr/bin/env bash
# Training throughput, side by side in one run: dtrain's MNIST Core MLP (mesh {batch:1} and {batch:8}) and
# the IMDB tutorial MLP (mesh {batch:8}) against PyTorch on the same model (../shared/bench/torch_mlp.py,
# best of 1 and 2 threads), and the MNIST step against its GEMM limit (matmul FLOPs at bench_gemm's rate).
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
peer="${TORCH_MLP:-$root/../shared/bench/torch_mlp.py}"
python=/usr/bin/python3
steps="${STEPS:-300}"
for program in bench_train_step bench_gemm; do
  [[ -x "$build_dir/$program" ]] || { echo "train_mlp.sh: build $build_dir/$program first" >&2; exit 2; }
done
if [[ ! -f "$peer" ]] || ! "$python" -c 'import torch' 2>/dev/null; then
  echo "train_mlp.sh: the peer needs $peer and Debian's python3-torch (scripts/setup.sh --bench)" >&2
  exit 2
fi

# The GEMM rate of the step's two big shapes on this machine's cores, measured now.
cores="$(nproc)"
gemm_gflops="$("$python" - "$("$build_dir/bench_gemm" 128x784x700 "$cores")" "$("$build_dir/bench_gemm" 128x700x500 "$cores")" <<'PY'
import json, sys
rates = [json.loads(line)["gflops"] for line in sys.argv[1:]]
print(sum(rates) / len(rates))
PY
)"

torch_best() {  # best examples/s of the PyTorch peer over 1 and 2 threads
  local model="$1" best=0
  for threads in 1 2; do
    rate="$("$python" "$peer" --model "$model" --steps "$steps" --threads "$threads" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["examples_per_s"])')"
    best="$("$python" -c "print(max($best, $rate))")"
  done
  echo "$best"
}

mnist1="$("$build_dir/bench_train_step" --config "$root/configs/mnist_core_dp.yaml" --set "mesh.dims={batch: 1}" --steps "$steps" --name "mnist core mlp mesh {batch:1}" --gemm-gflops "$gemm_gflops")"
mnist8="$("$build_dir/bench_train_step" --config "$root/configs/mnist_core_dp.yaml" --steps "$steps" --name "mnist core mlp mesh {batch:8}")"
imdb8="$("$build_dir/bench_train_step" --config "$root/configs/imdb_dp.yaml" --steps "$steps" --name "imdb tutorial mlp mesh {batch:8}")"
torch_mnist="$(torch_best mnist)"
torch_imdb="$(torch_best imdb)"

"$python" - "$mnist1" "$mnist8" "$imdb8" "$torch_mnist" "$torch_imdb" <<'PY'
import json, sys
mnist1, mnist8, imdb8 = (json.loads(a) for a in sys.argv[1:4])
torch_mnist, torch_imdb = float(sys.argv[4]), float(sys.argv[5])
# The peer times all its steps together (a mean), so the ratio takes dtrain's mean step too; the median
# (examples_per_s) is printed beside it.
def line(run, peer_name, peer, **extra):
    out = dict(run)
    out.update({"peer": peer_name, "peer_examples_per_s": peer, "ratio": round(run["examples_per_s_mean"] / peer, 3)})
    out.update(extra)
    print(json.dumps(out))
line(mnist1, "pytorch best of 1,2 threads", torch_mnist)
line(mnist8, "dtrain mesh {batch:1}", mnist1["examples_per_s_mean"], peer_pytorch_examples_per_s=torch_mnist)
line(imdb8, "pytorch best of 1,2 threads", torch_imdb)
PY
