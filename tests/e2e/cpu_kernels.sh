#!/usr/bin/env bash
# End-to-end (issue 32): one binary, its CPU kernels chosen at run time (core/kernels/cpu/cpu_isa.hpp).
# --version lists the kernel builds and those this CPU runs; each of those trains (DTRAIN_CPU_ISA chooses it),
# says so in the start-up line and metrics.jsonl, and reaches the same result within rounding; a bad choice
# exits 2 before anything is written; each build's object exports only its entry point and runs no static
# initializer. On an emulated AVX2-only CPU (qemu-user) the same binary picks avx2 and gives the native avx2
# run's bits; on one without AVX2 it refuses with exit 2 naming the level it needs, never SIGILL.
# Usage: cpu_kernels.sh DTRAIN SOURCE_DIR
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }

dtrain=$(realpath "$1")
build_dir=$(dirname "$dtrain")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
source "$lib/cli.sh"  # expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml (8 steps an epoch, run dir run)
x86=false
[[ $(uname -m) == x86_64 ]] && x86=true

# ---- --version: the builds and the ones this CPU runs ----
expect 0 "^CPU kernels built: " -- --version
built=$(sed -n 's/^CPU kernels built: //p' "$work/out")
runs=$(sed -n 's/^CPU kernels this CPU runs: //p' "$work/out")
best=${runs%% *}
if $x86; then
  check "an x86-64 binary holds the avx512, avx2 and generic kernels: '$built'" test "$built" = "avx512 avx2 generic"
  check "this CPU runs avx2 at least (the binary's baseline): '$runs'" grep -q avx2 <<<"$runs"
fi
check "every CPU runs the generic kernels: '$runs'" grep -q generic <<<"$runs"

# final_loss RUN_DIR: the last test row's loss in its metrics.jsonl.
final_loss() {
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
print(repr([r for r in rows if r.get("split") == "test"][-1]["loss"]))' "$1"
}
# train_losses RUN_DIR: every logged training loss, as text (for an exact comparison).
train_losses() { python3 -c '
import json, sys
print([json.loads(l)["loss"] for l in open(sys.argv[1] + "/metrics.jsonl") if json.loads(l).get("split") == "train_steps"])' "$1"; }
# close A B: relative difference at most 1e-3 (builds differ in FMA use and summation order, amplified over steps).
close() { python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-3 * max(abs(a), abs(b)) else 1)' "$1" "$2"; }

# ---- each build this CPU runs trains; the default is the best ----
train_args=(train --config dp.yaml --set train.epochs=1 --set train.log_every=1)
expect 0 "test accuracy" -- "${train_args[@]}" --run-dir run_default --set checkpoint.dir=ckpt_default
check "the start-up line names the best build, $best: $(grep -a 'parameters on mesh' "$work/out" || true)" \
  grep -q "test examples; $best kernels$" "$work/out"
for isa in $runs; do
  DTRAIN_CPU_ISA=$isa expect 0 "test accuracy" -- "${train_args[@]}" --run-dir "run_$isa" --set "checkpoint.dir=ckpt_$isa"
  if [[ $isa == "$best" ]]; then
    check "DTRAIN_CPU_ISA=$isa says the build plainly" grep -q "test examples; $isa kernels$" "$work/out"
  else
    check "DTRAIN_CPU_ISA=$isa names the build and the CPU's best: $(grep -a 'parameters on mesh' "$work/out" || true)" \
      grep -q "test examples; $isa kernels (DTRAIN_CPU_ISA; the CPU runs $best)$" "$work/out"
  fi
  check "metrics.jsonl's run row names the $isa build" grep -q "\"cpu_kernels\": \"$isa\"" "run_$isa/metrics.jsonl"
  check "the $isa build's test loss is the default's within rounding ($(final_loss "run_$isa") vs $(final_loss run_default))" \
    close "$(final_loss "run_$isa")" "$(final_loss run_default)"
done
check "the default run is the $best build's, bit for bit" test "$(train_losses run_default)" = "$(train_losses "run_$best")"

# ---- a bad choice: exit 2 before anything is written ----
DTRAIN_CPU_ISA=sse9 expect 2 "DTRAIN_CPU_ISA=sse9: this binary has no such CPU kernels \(it has: ${built// /, }\)" -- \
  "${train_args[@]}" --run-dir run_bad --set checkpoint.dir=ckpt_bad
check "a bad DTRAIN_CPU_ISA writes no checkpoint" test ! -e ckpt_bad/latest

# ---- each build's object: its entry point is its only global symbol, and it has no static initializer ----
if $x86 && command -v nm >/dev/null && command -v readelf >/dev/null && [[ -f $build_dir/cpu_kernels_avx512.o ]]; then
  sanitized=false
  grep -q -- '-fsanitize' "$build_dir/CMakeCache.txt" 2>/dev/null && sanitized=true
  for isa in $built; do
    object=$build_dir/cpu_kernels_$isa.o
    globals=$(nm --defined-only "$object" | awk '$2 ~ /^[A-Z]$/ {print $3}' | tr '\n' ' ')
    check "the $isa kernels export only dtrain_cpu_kernels_$isa: $globals" test "$globals" = "dtrain_cpu_kernels_$isa "
    check "the $isa kernels keep no COMDAT group the link could share" \
      bash -c "! readelf -g -W '$object' | grep -q 'COMDAT group'"
    if ! $sanitized; then
      check "the $isa kernels have no static initializer" bash -c "! readelf -S -W '$object' | grep -Eq '\.init_array|\.ctors'"
    fi
  done
else
  skip_part "the kernel objects' symbols (needs an x86-64 build folder, nm and readelf)"
fi

# ---- the same binary on other CPUs, emulated ----
qemu_run() {  # qemu_run CPU ARGS...: dtrain ARGS under qemu-user's CPU model, its warnings dropped
  local model=$1
  shift
  local rc=0
  qemu-x86_64 -cpu "$model" "$dtrain" "$@" >"$work/out.raw" 2>&1 || rc=$?
  grep -v '^qemu-x86_64: warning' "$work/out.raw" >"$work/out" || true
  return $rc
}
if $x86 && command -v qemu-x86_64 >/dev/null; then
  rc=0
  qemu_run Haswell-v4 "${train_args[@]}" --run-dir run_haswell --set checkpoint.dir=ckpt_haswell || rc=$?
  check "an AVX2-only CPU (qemu Haswell) trains: exit $rc, $(tail -2 "$work/out")" test "$rc" = 0
  check "... with the avx2 kernels: $(grep -a 'parameters on mesh' "$work/out" || true)" \
    grep -q "test examples; avx2 kernels$" "$work/out"
  if [[ -f run_avx2/metrics.jsonl && -f run_haswell/metrics.jsonl ]]; then
    check "... and gives the native avx2 run's losses exactly" test "$(train_losses run_haswell)" = "$(train_losses run_avx2)"
  fi
  rc=0
  DTRAIN_CPU_ISA=avx512 qemu_run Haswell-v4 "${train_args[@]}" --run-dir run_haswell512 --set checkpoint.dir=ckpt_h512 || rc=$?
  check "DTRAIN_CPU_ISA=avx512 on an AVX2-only CPU exits 2: $rc" test "$rc" = 2
  check "... saying it cannot run them: $(tail -1 "$work/out")" \
    grep -q "DTRAIN_CPU_ISA=avx512: this CPU cannot run the avx512 kernels (it runs: avx2, generic)" "$work/out"
  rc=0
  qemu_run Nehalem --version || rc=$?
  check "a CPU without AVX2 (qemu Nehalem) is refused with exit 2, not SIGILL: $rc" test "$rc" = 2
  check "... naming the level this build needs: $(tail -1 "$work/out")" \
    grep -q "this CPU lacks x86-64-v3, which this build of dtrain needs" "$work/out"
else
  skip_part "the emulated CPUs (needs qemu-x86_64: apt-get install qemu-user)"
fi

report
