#!/usr/bin/env bash
# End-to-end: train.precision bf16 on the real MNIST (../shared/data beside the source tree; SKIPPED
# without it): the MLP (3 epochs) and the spatially partitioned CNN (1 epoch) reach their float32 test
# accuracy within 0.5 points; the start-up line and the run row say bf16 (a float32 run's row says nothing); checkpoints hold float32 values
# (not bf16-rounded ones: the optimizer updates float32 variables); a bf16 checkpoint resumes in float32
# and a float32 one in bf16; a bad value is refused at its key.
# Usage: precision_cli.sh DTRAIN SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $lib, $dtrain, $work (the cwd), expect, check, latest
source_dir=$(realpath "${2:-.}")
mnist="$source_dir/../shared/data/mnist"
if [[ ! -d $mnist ]]; then
  skip_part "no real MNIST at $mnist"
  report
fi
configs="$source_dir/configs"

# train NAME CONFIG PRECISION [ARGS...]: the run's log in NAME.log, its checkpoints in NAME/ckpt.
train() {
  local name=$1 config=$2 precision=$3
  shift 3
  expect 0 "test accuracy" -- train --config "$configs/$config" --set data.path="$mnist" \
    --set train.precision="$precision" --run-dir "$name" --set checkpoint.dir="$name/ckpt" "$@"
  cp "$work/out" "$name.log"
}
accuracy() { grep -E "^test accuracy: " "$1.log" | tail -1 | awk '{print $3}'; }
# within_half_point A B WHAT: test accuracies A and B (fractions) differ by at most 0.005.
within_half_point() {
  local a b
  a=$(accuracy "$1") b=$(accuracy "$2")
  check "$3: bf16 test accuracy $a against float32's $b (at most 0.5 points apart)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.005) }'
  echo "$3: float32 $b, bf16 $a"
}

train mlp_f32 mnist_core_dp.yaml float32 --set train.epochs=3
train mlp_bf16 mnist_core_dp.yaml bf16 --set train.epochs=3
within_half_point mlp_bf16 mlp_f32 "mnist_core_dp, 3 epochs"
check "the start-up line says bf16" grep -q "bf16 compute (mixed_bfloat16" mlp_bf16.log
check "the float32 start-up line does not" bash -c '! grep -q "bf16 compute" mlp_f32.log'
check "the run row records bf16" grep -q '"precision": "bf16"' mlp_bf16/metrics.jsonl
check "and nothing for the float32 run (the default)" bash -c '! grep -q "\"precision\"" mlp_f32/metrics.jsonl'

train cnn_f32 mnist_cnn_sp.yaml float32 --set train.epochs=1
train cnn_bf16 mnist_cnn_sp.yaml bf16 --set train.epochs=1
within_half_point cnn_bf16 cnn_f32 "mnist_cnn_sp, 1 epoch"

# The checkpoint holds float32 variables whose values are not all bf16 values (a bf16 copy would have its
# low 16 bits zero everywhere).
if h5=$(command -v h5dump); then
  ckpt="mlp_bf16/ckpt/$(latest mlp_bf16/ckpt)"
  check "a bf16 run's checkpoint stores 32-bit floats" \
    bash -c "h5dump -H -d variables/dense1/kernel '$ckpt/shard-0-of-8.h5' | grep -q 'H5T_IEEE_F32LE'"
  low=$(/usr/bin/python3 - "$ckpt" <<'PY' 2>/dev/null || echo error
import sys, glob, h5py, numpy as np
values = np.concatenate([np.asarray(h5py.File(f, "r")["variables/dense1/kernel"]).ravel()
                         for f in glob.glob(sys.argv[1] + "/shard-*.h5") if "variables/dense1/kernel" in h5py.File(f, "r")])
print(float(np.mean((values.view(np.uint32) & 0xFFFF) != 0)))
PY
)
  check "its variables keep float32 values (fraction with low bits set: $low)" \
    awk -v f="$low" 'BEGIN { exit !(f != "error" && f > 0.9) }'
else
  skip_part "h5dump not installed"
fi

# Across precisions, both ways: the 3-epoch runs stopped after epoch 1 and resumed in the other precision.
train cross_a mnist_core_dp.yaml bf16 --set train.epochs=3 --set train.max_steps=40
expect 0 "test accuracy" -- resume --config "$configs/mnist_core_dp.yaml" --set data.path="$mnist" \
  --set checkpoint.dir=cross_a/ckpt --run-dir cross_a --set train.epochs=3 --set train.precision=float32
check "bf16 -> float32: the resume starts from the bf16 checkpoint" grep -q "resum" "$work/out"
check "bf16 -> float32: the resumed run's row says no bf16" \
  bash -c '[[ $(grep -c "\"precision\": \"bf16\"" cross_a/metrics.jsonl) == 1 ]]'
train cross_b mnist_core_dp.yaml float32 --set train.epochs=3 --set train.max_steps=40
expect 0 "bf16 compute" -- resume --config "$configs/mnist_core_dp.yaml" --set data.path="$mnist" \
  --set checkpoint.dir=cross_b/ckpt --run-dir cross_b --set train.epochs=3 --set train.precision=bf16
cp "$work/out" cross_b.log
within_half_point cross_b mlp_f32 "float32 -> bf16 after 40 steps"

expect 2 "train.precision: .*bf8" -- train --config "$configs/mnist_core_dp.yaml" --set data.path="$mnist" \
  --set train.precision=bf8 --run-dir refused
report
