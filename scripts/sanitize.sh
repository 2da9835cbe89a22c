#!/usr/bin/env bash
# The unit tests and a short training run under AddressSanitizer and UndefinedBehaviorSanitizer, in their own
# build (build-asan, or $1). Any report fails the run. Fibers tell ASan about their stack switches.
# Line tables only (-g1): a report's stack still names file:line.
# The unit tests run as two processes, each with every other test file, so both cores work.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=$(realpath -m "${1:-build-asan}")  # absolute: the training run below starts elsewhere
# The optimization and debug flags go in the build type's own variables: CMake puts those after
# CMAKE_CXX_FLAGS, so RelWithDebInfo's default "-O2 -g" overrode the "-g1" given there. -O2 keeps the run
# short. Line tables alone save a fifth of the compile time.
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
level="-O2 -g1 -DNDEBUG"
# The CPU kernels built for the sanitizers: the generic ones and those this CPU runs best (the unit tests run no
# other), as the Release build's dtrain says; all three when there is none to ask.
isas="generic;avx2;avx512"
if [[ -x build/dtrain ]] && best=$(build/dtrain --version | sed -n 's/^CPU kernels this CPU runs: \([a-z0-9]*\).*/\1/p') &&
  [[ -n $best ]]; then
  isas="generic"
  [[ $best == generic ]] || isas+=";$best"
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_WITH_CUDA=OFF "-DDTRAIN_CPU_KERNEL_ISAS=$isas" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$level" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$level" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target dtrain dtrain_tests
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
files=(tests/test_*.cpp)
shards=("" "")
for i in "${!files[@]}"; do
  [[ ${files[$i]} == tests/test_mpi.cpp ]] && continue
  shards[$((i % 2))]+="*/${files[$i]#tests/},"
done
pids=()
for shard in "${shards[@]}"; do
  "$build_dir/dtrain_tests" "--test-case-exclude=needs *" --source-file="${shard%,}" --no-intro --no-version &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[[ $status == 0 ]] || { echo "sanitizers: a unit test failed or reported (above)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && source "$OLDPWD/tests/e2e/lib/mnist_fixture.sh" >/dev/null &&
  "$build_dir/dtrain" train --config mp.yaml >train.log 2>&1 && tail -2 train.log)
echo "sanitizers: no report"
