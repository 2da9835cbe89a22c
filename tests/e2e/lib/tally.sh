# The pass/fail tally of the end-to-end scripts (sourced): ok, bad MESSAGE, and report, which prints the
# summary line and is the script's exit status.
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
report() {
  echo "$passed passed, $failed failed"
  [[ $failed == 0 ]]
}
