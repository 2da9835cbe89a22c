#!/usr/bin/env bash
# End-to-end: dtrain on several hosts, made on this machine by scripts/hosts.sh (network namespaces on a bridge
# of their own; mpirun's daemons started inside them; MPI over TCP between them; the checkpoint dir shared):
#   1. train on 4 hosts -> resume on 2 hosts on another mesh -> eval on 4 hosts x 2 processes: bitwise equal to
#      one process (train.bitwise), the start-up line and metrics naming the hosts;
#   2. faults, each ending with `latest` whole and loadable and no process left on any host: all processes of
#      a host killed (the job ends within 10 s naming the host), a host cut off mid-step and mid-save (within
#      comm.timeout_s), a slow and lossy link (the same bits as one process);
#   3. dtrain elastic: a host killed mid-run, the run going on on the hosts left (on the same mesh, on a
#      smaller one, and on `batch: auto`) bitwise equal to an uninterrupted run; --min-hosts ending the job
#      naming the lost host.
# Without root, iproute2, mpirun or an MPI build, or where namespaces cannot be made: "skipped: ..." and exit
# 77 (ctest: SKIPPED). Usage: multihost.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"
source "$lib/waits.sh"

dtrain=$(realpath "$1")
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
hosts_sh=$source_dir/scripts/hosts.sh
skip() {
  echo "skipped: $*"
  echo "0 passed, 0 failed, 1 skipped"
  exit 77
}
((EUID == 0)) || skip "test hosts need root (network namespaces)"
command -v ip >/dev/null || skip "no 'ip' (iproute2) on PATH"
mpi_runnable "$dtrain" || skip "no mpirun, or $dtrain was built without MPI"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

work=$(cd "$(mktemp -d)" && pwd -P)
name=mh$$                           # this script's own hosts, bridge and subnet: several may coexist
net=10.213.$((($$ % 200) + 20))
hosts_dir=$work/hosts
hosts() { "$hosts_sh" "$@" --name "$name" --net "$net" --dir "$hosts_dir"; }
started=()
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  hosts down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
hosts up 4 --slots 2 >/dev/null 2>"$work/up.err" || skip "cannot make test hosts here: $(tail -1 "$work/up.err")"
mpirun_hosts=$hosts_dir/mpirun
host() { echo "$net.$((10 + $1))"; }  # host() I: host I's address (and hostname)

latest() { cat "$1/latest" 2>/dev/null || echo none; }
# no_process_left: no process runs inside any test host.
no_process_left() {
  local i
  for i in 1 2 3 4; do [[ -z $(hosts pids "$i") ]] || return 1; done
}
# loadable DIR: its latest checkpoint passes `inspect --verify` (every checksum) and a single-process eval.
loadable() {
  "$dtrain" inspect --verify "$1" >/dev/null 2>&1 &&
    "$dtrain" eval --config dp.yaml --checkpoint "$1" >/dev/null 2>&1
}
# on ARGS...: mpirun on the test hosts (120 s at most).
on() { timeout 120 "$mpirun_hosts" "$@" </dev/null; }
source "$lib/mnist_fixture.sh"  # data/, dp.yaml, mp.yaml, sp.yaml (8 steps per epoch)
bitwise=(--set train.bitwise=true)

# ---- 1: train on 4 hosts, resume on 2 on another mesh, eval on 4 x 2: the bits of one process ----
"$dtrain" train --config dp.yaml "${bitwise[@]}" --set checkpoint.dir=ref --run-dir r_ref >ref.out 2>&1
"$dtrain" eval --config dp.yaml "${bitwise[@]}" --checkpoint ref >ref_eval.out 2>&1
start=$(now)
on -np 4 --map-by node "$dtrain" train --config dp.yaml "${bitwise[@]}" --set train.epochs=1 \
  --set checkpoint.dir=multi --run-dir r_multi >train.out 2>&1 || bad "train on 4 hosts failed: $(tail -3 train.out)"
check "train on 4 hosts names each process's host:
$(grep -a 'parameters on mesh' train.out)" \
  grep -q "process 0 on $(host 1): devices 0-1; process 1 on $(host 2): devices 2-3; process 2 on $(host 3)" train.out
check "metrics' run row lists the 4 hosts" grep -q "\"hosts\": \[\"$(host 1)\", \"$(host 2)\", \"$(host 3)\", \"$(host 4)\"\]" \
  r_multi/metrics.jsonl
on -np 2 --map-by node "$dtrain" resume --config mp.yaml "${bitwise[@]}" --set checkpoint.dir=multi \
  --run-dir r_multi >resume.out 2>&1 || bad "resume on 2 hosts failed: $(tail -3 resume.out)"
check "resume on 2 hosts (mesh {batch: 4, model: 2}) names them: $(grep -a 'resuming' resume.out | head -1)" \
  grep -q "process 1 on $(host 2)" resume.out
if "$dtrain" diff multi ref >diff.out 2>&1; then ok; else bad "4 hosts -> 2 hosts differs from one process: $(tail -3 diff.out)"; fi
on -np 8 "$dtrain" eval --config sp.yaml "${bitwise[@]}" --checkpoint multi >eval.out 2>&1 || bad "eval on 4 x 2 failed: $(tail -3 eval.out)"
result() { sed -nE 's/.*split test: (loss [0-9.]+ accuracy [0-9.]+).*/\1/p' "$1"; }
check "eval on 4 hosts x 2 processes prints one process's numbers: $(result eval.out) vs $(result ref_eval.out)" \
  eval '[[ -n $(result eval.out) && $(result eval.out) == "$(result ref_eval.out)" ]]'
echo "part 1 (train, resume, eval on test hosts): $(seconds_since "$start") s"

# ---- 2: faults between hosts ----
# launch NAME ARGS...: a long run of 4 processes on hosts 1 and 2 (2 each) in the background, of $config (DP's
# dp.yaml unless set); $job.
launch() {
  local run=$1
  shift
  timeout 120 "$mpirun_hosts" -x DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS -np 4 "$dtrain" train --config "${config:-dp.yaml}" \
    --set checkpoint.dir="$run" --run-dir "r_$run" --set train.epochs=100000 "$@" </dev/null >"$run.log" 2>&1 &
  job=$!
  started+=("$job")
}
ended() { ! kill -0 "$job" 2>/dev/null; }
has_checkpoint() { [[ -f "$1/latest" ]] || ended; }
writing() { compgen -G "$1" >/dev/null || ended; }
# fault_ends RUN WHAT LIMIT PATTERN: the job ends non-zero within LIMIT s of the fault, its output matches
# PATTERN, no process is left on any host within 15 s, and RUN's latest is whole and loadable.
fault_ends() {
  local run=$1 what=$2 limit=$3 pattern=$4 start rc=0 took
  start=$(now)
  wait_for 60 ended || true
  took=$(seconds_since "$start")
  if ended; then wait "$job" || rc=$?; else rc=running; fi
  echo "$what: mpirun exited $rc after $took s"
  check "$run: the job ends non-zero ($rc) within $limit s ($took s) after $what" \
    eval '[[ $rc != 0 && $rc != running ]] && within "$took" "$limit"'
  check "$run: the output names /$pattern/: $(grep -a -m3 -i 'daemon\|waited\|node' "$run.log" | tr '\n' ' ')" \
    grep -Eaq -- "$pattern" "$run.log"
  check "$run: no process left on any host 15 s later" wait_for 15 no_process_left
  check "$run: latest ($(latest "$run")) is whole (inspect --verify) and loadable (eval)" loadable "$run"
}
export DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=0

start=$(now)
launch kill
wait_for 60 has_checkpoint kill || true
hosts kill 2
fault_ends kill "every process of host 2 killed" 10 "on node $(host 2)"
hosts up 4 --slots 2 >/dev/null

launch cut_step --set comm.timeout_s=20
wait_for 60 has_checkpoint cut_step || true
sleep 0.3
hosts cut 2
fault_ends cut_step "host 2 cut off mid-step" 20 "on node $(host 2)"
hosts up 4 --slots 2 >/dev/null

# Mid-save: every dataset write of a shard sleeps 300 ms; host 2 is cut while process 0 writes ckpt-16's
# (a DP mesh's variables are written by device 0 alone) and host 2's processes wait for the save to commit.
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 launch cut_save --set comm.timeout_s=20
wait_for 60 writing "cut_save/ckpt-16.partial/shard-0-of-8.h5" || true
hosts cut 2
fault_ends cut_save "host 2 cut off while writing ckpt-16" 20 "on node $(host 2)"
# Host 2's processes write no shard of a DP mesh: ckpt-16 is committed when they had reached the save's
# barrier before the cut, and never is otherwise.
check "cut_save: latest is ckpt-8 or the complete ckpt-16 ($(latest cut_save))" \
  eval '[[ $(latest cut_save) == ckpt-8 || $(latest cut_save) == ckpt-16 ]]'
hosts up 4 --slots 2 >/dev/null

# Host 2 cut while its own processes write their shards: on {batch: 1, model: 8} devices 4-7 (processes 2 and 3,
# host 2) hold and write dense1/kernel's columns 16-31 and dense2/kernel's rows 16-31. ckpt-16 cannot commit
# without them (the shared folder still takes their writes: only the network is cut), so latest stays ckpt-8.
config=mp.yaml DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 launch cut_own --set comm.timeout_s=20 \
  --set "mesh.dims={batch: 1, model: 8}"
wait_for 60 writing "cut_own/ckpt-16.partial/shard-4-of-8.h5" || true
hosts cut 2
fault_ends cut_own "host 2 cut off while writing its own shards of ckpt-16" 20 "on node $(host 2)"
check "cut_own: latest is ckpt-8 ($(latest cut_own))" test "$(latest cut_own)" = ckpt-8
hosts up 4 --slots 2 >/dev/null
echo "part 2a (killed and cut hosts): $(seconds_since "$start") s"

start=$(now)
if hosts slow 2 >slow_link.out 2>&1; then
  cat slow_link.out
  on -np 4 "$dtrain" train --config dp.yaml "${bitwise[@]}" --set checkpoint.dir=slow --run-dir r_slow >slow.out 2>&1 ||
    bad "training over a slow, lossy link failed: $(tail -3 slow.out)"
  if "$dtrain" diff slow ref >diff_slow.out 2>&1; then ok; else bad "the slow, lossy link changed the bits: $(tail -3 diff_slow.out)"; fi
  echo "part 2b (slow and lossy link): $(seconds_since "$start") s"
  hosts up 4 --slots 2 >/dev/null
else
  skip_part "a slow, lossy link: $(tail -1 slow_link.out)"
fi

# ---- 3: dtrain elastic ----
elastic_run() {  # elastic_run RUN HOSTFILE MIN_HOSTS EPOCHS [ARGS...]: in the background, $job
  local run=$1 hostfile=$2 min_hosts=$3 epochs=$4
  shift 4
  timeout 180 "$dtrain" elastic --hostfile "$hostfile" --min-hosts "$min_hosts" --mpirun "$mpirun_hosts" -- train \
    --config dp.yaml "${bitwise[@]}" --set train.epochs="$epochs" --set checkpoint.dir="$run" --run-dir "r_$run" "$@" \
    </dev/null >"$run.log" 2>&1 &
  job=$!
  started+=("$job")
}
# elastic_ok RUN REF: the run ended 0, wrote a restart row naming host 2, and equals REF bitwise.
elastic_ok() {
  local rc=0
  wait_for 120 ended || true
  wait "$job" || rc=$?
  check "$1: elastic completes (exit $rc): $(grep -a 'elastic' "$1.log" | tr '\n' ' ')" test "$rc" = 0
  check "$1: a run row for the restart, its cause naming host 2" \
    grep -q "\"restart\": 1, \"cause\": \"host $(host 2) lost" "r_$1/metrics.jsonl"
  if "$dtrain" diff "$1" "$2" >"diff_$1.out" 2>&1; then ok; else bad "$1 differs from an uninterrupted run: $(tail -3 "diff_$1.out")"; fi
}
"$dtrain" train --config dp.yaml "${bitwise[@]}" --set train.epochs=150 --set checkpoint.dir=ref150 --run-dir r_ref150 \
  >/dev/null 2>&1
start=$(now)
# elastic_case RUN HOSTFILE FAULT EXPECTED ARGS...: elastic on HOSTFILE's hosts; once RUN has a checkpoint, host 2
# meets FAULT (kill: every process killed; cut: its link down, its processes left running); the run completes
# bitwise equal to ref150, its restart line holding EXPECTED, and no process is left on host 2.
elastic_case() {
  local run=$1 hostfile=$2 fault=$3 expected=$4
  shift 4
  elastic_run "$run" "$hostfile" 1 150 "$@"
  wait_for 60 has_checkpoint "$run" || true
  hosts "$fault" 2
  elastic_ok "$run" ref150
  check "$run: the restart line holds '$expected': $(grep -a 'restart 1' "$run.log")" grep -qF -- "$expected" "$run.log"
  check "$run: no process left on host 2 ($fault)" wait_for 15 eval '[[ -z $(hosts pids 2) ]]'
  hosts up 4 --slots 2 >/dev/null
}
head -3 "$hosts_dir/hostfile" >three_hosts
head -2 "$hosts_dir/hostfile" >two_hosts
elastic_case elastic3 three_hosts kill "on 2 host(s) ($(host 1), $(host 3)), 4 processes, mesh {batch: 8}"  # mesh kept
elastic_case elastic2 two_hosts kill "on 1 host(s) ($(host 1)), 2 processes, mesh {batch: 4}"               # a smaller one
# {batch: auto}: one device per process, 4 on 2 hosts, then 2 on the host left.
elastic_case elastic_auto two_hosts kill "on 1 host(s) ($(host 1)), 2 processes, mesh {batch: 2}" \
  --set "mesh.dims={batch: auto}"
check "elastic_auto: started on {batch: 4}, went on on {batch: 2}" \
  eval 'grep -q "parameters on mesh {batch: 4} on 4 CPU devices" elastic_auto.log &&
    grep -q "on mesh {batch: 2} on 2 CPU devices (over 2 processes" elastic_auto.log'
# A smaller mesh that cannot hold the step: elastic accumulates micro-batches until its plan fits. The limit
# (DTRAIN_MEMORY_LIMIT, which every process keeps to) lies between the plans of {batch: 2} on 2 processes with
# one micro-batch a step and with two; {batch: 4} on 4 processes fits it too. A larger batch makes the
# activations outweigh the accumulated gradients.
plan_peak() {
  "$dtrain" plan --config dp.yaml --set train.bitwise=false --set data.batch_size=256 "$@" --json 2>/dev/null |
    python3 -c 'import json, sys; print(int(json.load(sys.stdin)["peak_bytes_per_process"]))'
}
one=$(plan_peak --set "mesh.dims={batch: 2}" --processes 2)
two=$(plan_peak --set "mesh.dims={batch: 2}" --set train.accumulation_steps=2 --processes 2)
four=$(plan_peak --set "mesh.dims={batch: 4}" --processes 4)
fitting=$((two > four ? two : four))
if ((fitting < one)); then
  DTRAIN_MEMORY_LIMIT=$(((fitting + one) / 2)) elastic_run elastic_accumulate two_hosts 1 40 \
    --set "mesh.dims={batch: auto}" --set train.bitwise=false --set data.batch_size=256
  wait_for 60 has_checkpoint elastic_accumulate || true
  hosts kill 2
  rc=0
  wait_for 120 ended || true
  wait "$job" || rc=$?
  check "elastic_accumulate: completes (exit $rc): $(grep -a 'elastic' elastic_accumulate.log | tr '\n' ' ')" test "$rc" = 0
  check "elastic_accumulate: went on on {batch: 2} with 2 micro-batches a step: $(grep -a 'restart 1' elastic_accumulate.log)" \
    grep -qF "on 1 host(s) ($(host 1)), 2 processes, mesh {batch: 2}, accumulation 2 (to fit)" elastic_accumulate.log
  check "elastic_accumulate: the last epoch (40) was trained" \
    grep -q '"split": "train", "epoch": 40,' r_elastic_accumulate/metrics.jsonl
  hosts up 4 --slots 2 >/dev/null
else
  bad "plans: {batch: 2} with accumulation 2 ($two B) or {batch: 4} ($four B) needs no less than {batch: 2} ($one B)"
fi

# Host 2 cut off: mpirun's keepalives name it lost, and its own daemon ends its processes.
elastic_case elastic_cut three_hosts cut "on 2 host(s) ($(host 1), $(host 3)), 4 processes, mesh {batch: 8}"

# One process crashes, its host staying up: no host is lost, the run restarts on the same hosts.
elastic_run crash two_hosts 1 150
wait_for 60 has_checkpoint crash || true
crashed=
for pid in $(hosts pids 2); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$dtrain "; then crashed=$pid; break; fi
done
if [[ -n $crashed ]]; then
  kill -9 "$crashed"
  rc=0
  wait_for 120 ended || true
  wait "$job" || rc=$?
  check "crash: elastic completes after one process was killed (exit $rc): $(grep -a 'elastic' crash.log | tr '\n' ' ')" \
    test "$rc" = 0
  check "crash: it restarted on both hosts, naming no lost host" \
    grep -q "naming no lost host; restart 1 of at most 5 in 1 s on 2 host(s) ($(host 1), $(host 2)), 4 processes" crash.log
  if "$dtrain" diff crash ref150 >diff_crash.out 2>&1; then ok; else bad "crash differs from an uninterrupted run: $(tail -3 diff_crash.out)"; fi
else
  bad "crash: no dtrain process found on host 2 ($(tail -3 crash.log))"
fi
hosts up 4 --slots 2 >/dev/null

# Bad input: exit 2 naming what is wrong, before anything is launched.
refused() {  # refused PATTERN COMMAND...: exit 2 and PATTERN in the output
  local pattern=$1 rc=0
  shift
  "$@" >refused.out 2>&1 || rc=$?
  check "'${*: -4}' exits 2 ($rc) naming /$pattern/: $(tail -1 refused.out)" \
    eval '[[ $rc == 2 ]] && grep -Eq -- "$pattern" refused.out'
}
refused "N must be 1..32" hosts up 0
refused "kill: no host 9" hosts kill 9
refused "cannot read the hostfile 'absent'" "$dtrain" elastic --hostfile absent -- train --config dp.yaml
refused "give the command after --.*not 'eval'" "$dtrain" elastic --hostfile two_hosts -- eval --config dp.yaml
refused "--min-hosts 3 must be 1..2" "$dtrain" elastic --hostfile two_hosts --min-hosts 3 -- train --config dp.yaml
refused "--set data.batch_size=0: data.batch_size: expected an integer" "$dtrain" elastic --hostfile two_hosts -- train --config dp.yaml --set data.batch_size=0
printf 'h1 slots=2\nh1\n' >twice_hosts
refused "twice_hosts:2: host 'h1' is named twice" "$dtrain" elastic --hostfile twice_hosts -- train --config dp.yaml

elastic_run minimum two_hosts 2 100000
wait_for 60 has_checkpoint minimum || true
fault_start=$(now)
hosts kill 2
wait_for 30 ended || true
took=$(seconds_since "$fault_start")
rc=0
wait "$job" || rc=$?
check "minimum: elastic with --min-hosts 2 ends with exit 1 within 10 s of losing host 2 ($rc, $took s)" \
  eval '[[ $rc == 1 ]] && within "$took" 10'
check "minimum: it names the lost host and its processes: $(grep -a 'elastic' minimum.log)" \
  grep -q "host $(host 2) lost (processes 2,3); 1 host(s) left ($(host 1)), fewer than --min-hosts 2: stopping" minimum.log
check "minimum: latest ($(latest minimum)) is whole and loadable" loadable minimum
echo "part 3 (elastic): $(seconds_since "$start") s"
report
