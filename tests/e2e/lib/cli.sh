# What the CLI scripts share (sourced, after tally.sh, with $dtrain and $work set):
#   expect CODE PATTERN -- ARGS...  runs dtrain ARGS; checks the exit code and that stdout+stderr ($work/out)
#                                   match PATTERN
#   check DESCRIPTION COMMAND...    a check that passes when COMMAND does
#   latest DIR                      the checkpoint DIR/latest names ("none")
expect() {
  local code=$1 pattern=$2
  shift 3
  local rc=0
  "$dtrain" "$@" >"$work/out" 2>&1 || rc=$?
  if [[ $rc != "$code" ]]; then
    bad "dtrain $* exited $rc, expected $code: $(tail -5 "$work/out")"
  elif ! grep -Eq -- "$pattern" "$work/out"; then
    bad "dtrain $* output does not match /$pattern/: $(tail -5 "$work/out")"
  else
    ok
  fi
}
check() {
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; fi
}
latest() { cat "$1/latest" 2>/dev/null || echo none; }
