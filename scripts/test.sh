#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, runs every unit and
# end-to-end test with ctest, then the unit tests again on each other CPU kernel build this CPU runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
scripts/build.sh build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
# The unit tests again under each other CPU kernel build this CPU runs (DTRAIN_CPU_ISA, core/kernels/cpu): the
# pass above ran the best one, so every build is tested on whichever machine runs this. Left out: the tests
# of input parsing, checkpoint files and MPI transport, which run no kernel arithmetic worth a second look and
# take three quarters of the time (the fuzzers alone 2.5 minutes).
runs=$(build/dtrain --version | sed -n 's/^CPU kernels this CPU runs: //p')
for isa in ${runs#* }; do
  [[ $isa == "$runs" ]] && break  # one build only: it ran above
  echo "== the unit tests on the $isa CPU kernels (DTRAIN_CPU_ISA=$isa)"
  DTRAIN_CPU_ISA=$isa ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 -R '^unit\.' \
    -E 'fuzz|config_robustness|spanning_stress|test_mpi\.|checkpoint'
done
