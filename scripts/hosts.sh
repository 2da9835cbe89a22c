#!/usr/bin/env bash
# Test hosts on one machine: N Linux network namespaces on a bridge of their own, each a "host" with its own
# address (NET.11, NET.12, ...) and hostname (that address), nothing else reachable (no route out). mpirun
# starts its daemons inside them through `hosts.sh agent` (in place of ssh), so MPI traffic is TCP between
# the namespaces, as between machines; the file system (the checkpoint dir) is shared, as NFS would be.
# Needs root (CAP_NET_ADMIN) and iproute2; tests report SKIPPED where `up` cannot make the namespaces.
#
#   scripts/hosts.sh up N [--slots S]   make hosts 1..N (S processes each, default 2), write DIR/hostfile and
#                                       DIR/mpirun (mpirun with the hostfile, the agent and TCP on the bridge)
#   scripts/hosts.sh down               every process inside the hosts killed, namespaces and bridge removed
#   scripts/hosts.sh kill I             each process inside host I SIGKILLed (the host itself stays reachable)
#   scripts/hosts.sh lose I             host I lost, as by a power cut: its link down, then its processes killed
#   scripts/hosts.sh cut I | heal I     host I's link down (its processes keep running) | up again
#   scripts/hosts.sh drop I PERCENT     host I's incoming packets dropped at random (0 removes the rule)
#   scripts/hosts.sh slow I             host I's link slow and lossy: netem 20 ms delay and 1% loss where the
#                                       kernel has netem, else a 10 Mbit/s token bucket and 1% random drops
#   scripts/hosts.sh pids I             the PIDs of the processes inside host I
#   scripts/hosts.sh agent HOST CMD...  what mpirun runs to start a daemon on HOST (plm_rsh_agent)
#
# Options: --name NAME (default dt: several sets may coexist), --net A.B.C (default 10.213.0), --dir DIR
# (default /tmp/dtrain-hosts-NAME). Example, a 3-host run of 6 processes on one machine:
#   scripts/hosts.sh up 3 && /tmp/dtrain-hosts-dt/mpirun -np 6 build/dtrain train --config configs/imdb_dp.yaml
# On a real cluster the same run is `mpirun -np 6 --hostfile hosts build/dtrain train ...` over ssh (README).
set -euo pipefail

script=$(realpath "${BASH_SOURCE[0]}")
name=dt
net=10.213.0
dir=
slots=2
die() {
  echo "hosts.sh: $*" >&2
  exit 2
}

command=${1:-}
[[ -n $command ]] || die "usage: hosts.sh up N | down | kill I | lose I | cut I | heal I | drop I PERCENT | slow I | pids I (--help)"
shift
if [[ $command == -h || $command == --help ]]; then
  sed -n '2,/^set -euo/p' "$script" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ $command == agent ]]; then
  # mpirun calls: agent [--dir DIR] HOST COMMAND... (COMMAND is a shell command line, as ssh would run it).
  if [[ ${1:-} == --dir ]]; then
    dir=$2
    shift 2
  fi
  host=$1
  shift
  [[ -n $dir ]] || die "agent: --dir DIR is required"
  namespace=$(awk -v host="$host" '$2 == host { print $3 }' "$dir/hosts")
  [[ -n $namespace ]] || die "agent: $host is not one of the hosts in $dir/hosts"
  # A UTS namespace of its own, so the host's processes see its own hostname (its address), as on a machine.
  exec ip netns exec "$namespace" unshare --uts /bin/sh -c 'hostname "$1"; shift; exec /bin/sh -c "$*"' agent \
    "$host" "$@"
fi

positional=()
while (($#)); do
  case $1 in
    --name) name=$2; shift 2 ;;
    --net) net=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
dir=${dir:-/tmp/dtrain-hosts-$name}
bridge=$name-br
namespace_of() { echo "$name-h$1"; }
link_of() { echo "$name-v$1"; }  # the root side of host I's link, on the bridge
address_of() { echo "$net.$((10 + $1))"; }
host_count() { if [[ -f $dir/hosts ]]; then wc -l <"$dir/hosts"; else echo 0; fi; }
need_index() {
  [[ ${1:-} =~ ^[0-9]+$ ]] && ip netns list | grep -qw "$(namespace_of "$1")" || die "$command: no host ${1:-} (hosts: $(host_count))"
}
pids_of() { ip netns pids "$(namespace_of "$1")" 2>/dev/null || true; }

down() {
  local i pid
  for ((i = 1; i <= 64; ++i)); do
    ip netns list | grep -qw "$(namespace_of "$i")" || continue
    for pid in $(pids_of "$i"); do kill -9 "$pid" 2>/dev/null || true; done
    ip link del "$(link_of "$i")" 2>/dev/null || true
    ip netns del "$(namespace_of "$i")" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$dir"
}

case $command in
  up)
    count=${positional[0]:-}
    [[ $count =~ ^[1-9][0-9]?$ ]] && ((count <= 32)) || die "up: N must be 1..32, not '${count}'"
    [[ $slots =~ ^[1-9][0-9]*$ ]] || die "up: --slots must be a positive number, not '$slots'"
    command -v ip >/dev/null || die "up: no 'ip' (iproute2) on PATH"
    down
    mkdir -p "$dir"
    trap 'down' ERR
    ip link add "$bridge" type bridge
    ip addr add "$net.1/24" dev "$bridge"  # mpirun (the head) stays in the machine's own namespace
    ip link set "$bridge" up
    : >"$dir/hosts"
    : >"$dir/hostfile"
    for ((i = 1; i <= count; ++i)); do
      ns=$(namespace_of "$i")
      ip netns add "$ns"
      ip link add "$(link_of "$i")" type veth peer name eth0 netns "$ns"
      ip link set "$(link_of "$i")" master "$bridge" up
      ip -n "$ns" addr add "$(address_of "$i")/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" link set lo up
      echo "$i $(address_of "$i") $ns" >>"$dir/hosts"
      echo "$(address_of "$i") slots=$slots" >>"$dir/hostfile"
    done
    trap - ERR
    # mpirun for these hosts: daemons started by the agent, no tree spawn (every daemon from the head), TCP
    # on the bridge only, and keepalives on mpirun's own connections so a host cut off is noticed in ~5 s
    # (the default is 300 s before the first probe) and its daemon ends its processes.
    root=()
    ((EUID == 0)) && root=(--allow-run-as-root)
    cat >"$dir/mpirun" <<EOF
#!/bin/sh
exec mpirun ${root[*]} --default-hostfile "$dir/hostfile" --mca plm_rsh_agent "$script agent --dir $dir" \\
  --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include $net.0/24 --mca btl_tcp_if_include $net.0/24 \\
  --mca btl self,vader,tcp --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 \\
  --mca oob_tcp_keepalive_probes 3 --bind-to none "\$@"
EOF
    chmod +x "$dir/mpirun"
    echo "$count hosts ($(address_of 1)..$(address_of "$count"), $slots slots each): $dir/hostfile; run with $dir/mpirun -np P ..."
    ;;
  down) down ;;
  kill)
    need_index "${positional[0]:-}"
    for pid in $(pids_of "${positional[0]}"); do kill -9 "$pid" 2>/dev/null || true; done
    ;;
  lose)
    need_index "${positional[0]:-}"
    ip link set "$(link_of "${positional[0]}")" down
    for pid in $(pids_of "${positional[0]}"); do kill -9 "$pid" 2>/dev/null || true; done
    ;;
  cut) need_index "${positional[0]:-}" && ip link set "$(link_of "${positional[0]}")" down ;;
  heal) need_index "${positional[0]:-}" && ip link set "$(link_of "${positional[0]}")" up ;;
  drop)
    need_index "${positional[0]:-}"
    percent=${positional[1]:-}
    [[ $percent =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "drop: PERCENT must be a number, not '$percent'"
    command -v iptables >/dev/null || die "drop: no iptables on PATH"
    ns=$(namespace_of "${positional[0]}")
    ip netns exec "$ns" iptables -F INPUT
    if [[ $percent != 0 ]]; then
      ip netns exec "$ns" iptables -A INPUT -m statistic --mode random \
        --probability "$(awk -v p="$percent" 'BEGIN { print p / 100 }')" -j DROP
    fi
    ;;
  slow)
    need_index "${positional[0]:-}"
    ns=$(namespace_of "${positional[0]}")
    link=$(link_of "${positional[0]}")
    if tc qdisc replace dev "$link" root netem delay 20ms loss 1% 2>/dev/null; then
      ip netns exec "$ns" tc qdisc replace dev eth0 root netem delay 20ms loss 1%
      echo "host ${positional[0]}: netem 20 ms delay and 1% loss each way"
    else
      command -v iptables >/dev/null || die "slow: the kernel has no netem and there is no iptables for the drops"
      tc qdisc replace dev "$link" root tbf rate 10mbit burst 16kb latency 200ms
      ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate 10mbit burst 16kb latency 200ms
      ip netns exec "$ns" iptables -F INPUT
      ip netns exec "$ns" iptables -A INPUT -m statistic --mode random --probability 0.01 -j DROP
      echo "host ${positional[0]}: no netem in this kernel: 10 Mbit/s each way and 1% of incoming packets dropped"
    fi
    ;;
  pids) need_index "${positional[0]:-}" && pids_of "${positional[0]}" ;;
  *) die "unknown command '$command'" ;;
esac
