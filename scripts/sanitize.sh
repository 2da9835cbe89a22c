#!/usr/bin/env bash
# The unit tests and a short training run under AddressSanitizer and UndefinedBehaviorSanitizer, in their own
# build (build-asan, or $1). Any report fails the run. Fibers tell ASan about their stack switches.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build-asan}"
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target dtrain dtrain_tests
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$build_dir/dtrain_tests" "--test-case-exclude=needs *" --source-file-exclude="*/test_mpi.cpp" --no-intro
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && source "$OLDPWD/tests/e2e/lib/mnist_fixture.sh" >/dev/null &&
  "$OLDPWD/$build_dir/dtrain" train --config mp.yaml >train.log 2>&1 && tail -2 train.log)
echo "sanitizers: no report"
