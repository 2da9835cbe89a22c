#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, runs every unit and
# end-to-end test with ctest (its last line is the summary).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
scripts/build.sh build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
