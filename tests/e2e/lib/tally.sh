# The pass/fail tally of the end-to-end scripts (sourced): ok, bad MESSAGE, skip_part WHY, and report, which
# prints the summary line and ends the script: 1 when a check failed; else 77 (ctest: SKIPPED) when a part
# could not run here, so a script that left checks out never reads as a pass; else 0.
passed=0
failed=0
skipped=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
skip_part() { skipped=$((skipped + 1)); echo "skipped: $*"; }
report() {
  echo "$passed passed, $failed failed, $skipped skipped"
  if ((failed > 0)); then exit 1; fi
  if ((skipped > 0)); then exit 77; fi
  exit 0
}
# Whether mpirun is there and DTRAIN was built with MPI (its build's CMake cache says so, or it links
# libmpi). ldd's output is read whole: `ldd | grep -q` under pipefail fails when grep stops reading early,
# which turned a multi-process part into a skip by chance.
mpi_runnable() {
  command -v mpirun >/dev/null || return 1
  grep -Eqi '^DTRAIN_WITH_MPI:BOOL=(ON|TRUE|1|YES)$' "$(dirname "$1")/CMakeCache.txt" 2>/dev/null && return 0
  local libraries
  libraries=$(ldd "$1" 2>/dev/null || true)
  [[ $libraries == *libmpi* ]]
}
