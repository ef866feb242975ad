# shellcheck shell=bash
# tests/multihost/hosts.sh: several "hosts" on this machine, for the multi-host tests. Sourced
# after tests/lib.sh. Each host is a network namespace with its own hostname (a UTS namespace)
# and one link, eth0 (a veth pair), to a switch: a bridge in a namespace of its own, so the
# test's 10.29.0.0/24 never meets this machine's network or another test's. Open MPI launches
# into the hosts through tests/multihost/agent.sh (in place of ssh) and talks TCP over eth0:
#   mh_hosts N          makes hosts $mh_prefix-1 .. -N (10.29.0.1 .. .N); removed on exit
#   mh_on HOST CMD...   runs CMD on HOST (its network and hostname), environment kept
#   mh_mpirun HOSTS NP ARGS...  mpirun on the first of HOSTS (space-separated), NP ranks placed
#                       in order, as many per host as NP / hosts (Open MPI's hostfile slots)
#   mh_pids HOST        the pids of every process on HOST
#   mh_link HOST up|down  its link to the switch
#   mh_time_fault JOB OUT PATTERN LIMIT  after a fault: JOB (the pid of a backgrounded mh_mpirun)
#                       must end within LIMIT s, its output OUT holding a line that matches
#                       PATTERN (grep -E); sets mh_detect_ms (to that line) and mh_end_ms
# Names carry this shell's pid, so tests running at once (ctest -j) keep apart. Skips (exit 77)
# where namespaces cannot be made: not root, no ip or unshare, no CAP_SYS_ADMIN.
mh_prefix="ptmh$$"
mh_net=10.29.0
mh_made=()
mh_agent="$pt_root/tests/multihost/agent.sh"

mh_check() {
  [ "$(id -u)" = 0 ] || skip "multi-host tests need root to make network namespaces (ip netns)"
  command -v ip >/dev/null || skip "no 'ip' command (iproute2) to make network namespaces"
  command -v unshare >/dev/null || skip "no 'unshare' (util-linux) to give each host a hostname"
  ip netns add "$mh_prefix-probe" 2>/dev/null ||
    skip "cannot make a network namespace here (no CAP_SYS_ADMIN, or a container that forbids it)"
  ip netns del "$mh_prefix-probe"
  unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace here (no CAP_SYS_ADMIN)"
}

mh_cleanup() {
  local ns p
  for ns in "${mh_made[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  for ns in "${mh_made[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  mh_made=()
}

mh_hosts() {
  local n=$1 i sw="$mh_prefix-sw"
  mh_check
  pt_at_exit mh_cleanup
  ip netns add "$sw" && mh_made+=("$sw")
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in $(seq "$n"); do
    local h="$mh_prefix-$i"
    ip netns add "$h" && mh_made+=("$h")
    ip -n "$h" link add eth0 type veth peer name "port$i" netns "$sw"
    ip -n "$h" addr add "$mh_net.$i/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    # mpirun gives up on a host's daemon only when TCP gives up resending to it: about 12.6 s
    # here (5 tries) instead of Linux's 15 min (docs/multihost.md). Longer than the tests'
    # pipeline.timeout_s, so that the watchdog, not MPI's TCP, names a lost host's rank.
    ip netns exec "$h" sh -c 'echo 5 >/proc/sys/net/ipv4/tcp_retries2'
    ip -n "$sw" link set "port$i" master br0 up
  done
}

mh_on() {
  local h=$1
  shift
  ip netns exec "$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
}

mh_pids() { ip netns pids "$1"; }
mh_link() { ip -n "$1" link set eth0 "$2"; }

mh_mpirun() {
  local hosts=($1) np=$2 h
  shift 2
  local file="$work/hostfile.$$.$RANDOM"
  for h in "${hosts[@]}"; do echo "$h slots=$((np / ${#hosts[@]}))"; done >"$file"
  mh_on "${hosts[0]}" timeout "${PT_MPI_TIMEOUT:-240}" mpirun --allow-run-as-root -np "$np" \
    --hostfile "$file" --map-by slot --mca plm_rsh_agent "$mh_agent" \
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include "$mh_net.0/24" \
    --mca oob_tcp_if_include "$mh_net.0/24" -x OPENBLAS_NUM_THREADS "$@"
}

mh_now_ms() { echo $(($(date +%s%N) / 1000000)); }

mh_time_fault() {
  local job=$1 out=$2 pattern=$3 limit=$4 t0 t code
  t0=$(mh_now_ms)
  mh_detect_ms=
  while kill -0 "$job" 2>/dev/null; do
    t=$(($(mh_now_ms) - t0))
    [ -z "$mh_detect_ms" ] && grep -Eq -- "$pattern" "$out" && mh_detect_ms=$t
    [ "$t" -le $((limit * 1000)) ] || fail "the job still runs ${limit} s after the fault: $(cat "$out")"
    sleep 0.1
  done
  mh_end_ms=$(($(mh_now_ms) - t0))
  [ -n "$mh_detect_ms" ] || mh_detect_ms=$mh_end_ms
  set +e; wait "$job"; code=$?; set -e
  [ "$code" != 0 ] || fail "the job exited 0 after the fault: $(cat "$out")"
  grep -Eq -- "$pattern" "$out" || fail "no line matching '$pattern': $(cat "$out")"
}
