#!/usr/bin/env bash
# multihost_link_cut.sh PIPE_TRAIN: a 4-stage job over 2 hosts (tests/multihost/hosts.sh); the
# second host's link is cut mid-run (ip link set down, as a failed cable or switch port). The
# ranks left waiting end within pipeline.timeout_s (the watchdog), one line naming a rank of the
# lost host and that host; mpirun, which cannot reach that host's daemon, ends once TCP gives up
# on it (tests/multihost/hosts.sh).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
source "$pt_root/tests/multihost/hosts.sh"
mh_hosts 2
marker="$work/marker"
timeout_s=4
# on the CPU whatever the build (multihost_gate.sh says why)
mh_mpirun "$mh_prefix-1 $mh_prefix-2" 4 "$pipe_train" tests/pipeline/gate.yaml --quiet \
  --set pipeline.device=cpu --set pipeline.stages=4 --set train.steps=1000000 \
  --set pipeline.timeout_s=$timeout_s --set train.lr_schedule.name=constant --metrics "$marker.jsonl" >"$work/out" 2>&1 &
job=$!
pt_pick_rank "$marker" 4 1 "$marker.jsonl" # every rank up and training
mh_link "$mh_prefix-2" down
# ranks 2 and 3 ran there (multihost_gate checks the map)
mh_time_fault "$job" "$work/out" "rank [23] on $mh_prefix-2\b" $((timeout_s + 30))
echo "link cut: named after $mh_detect_ms ms, job ended after $mh_end_ms ms (timeout_s $timeout_s)"
echo "line: $(grep -m1 -E "rank [23] on $mh_prefix-2\b" "$work/out")"
[ "$mh_detect_ms" -le $(((timeout_s + 5) * 1000)) ] ||
  fail "the line naming the lost host came after $mh_detect_ms ms (timeout_s $timeout_s)"
echo "multihost_link_cut: passed"
