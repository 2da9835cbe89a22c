# Timing helpers of the scripts that start jobs in the background and wait for them (sourced; uses tally.sh's
# ok and bad): check, now, seconds_since, within and wait_for.
check() {  # check DESCRIPTION COMMAND...: ok when COMMAND succeeds, else a failure naming DESCRIPTION
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; fi
}
now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
within() { awk -v s="$1" -v limit="$2" 'BEGIN { exit !(s <= limit) }'; }  # within SECONDS LIMIT
# wait_for SECONDS COMMAND...: polls COMMAND every 20 ms until it succeeds (0) or SECONDS pass (1).
wait_for() {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 50; ++i)); do
    if "$@"; then return 0; fi
    sleep 0.02
  done
  return 1
}
