#!/usr/bin/env bash
# multihost_host_lost.sh PIPE_TRAIN: a 4-stage job over 2 hosts (tests/multihost/hosts.sh),
# checkpointing every 2 steps; the second host's ranks are killed (SIGKILL, as the out-of-memory
# killer or a crashed node would). The job ends within pipeline.timeout_s with one line naming a
# rank of that host and the host; then the job resumes on the remaining host alone from the last
# checkpoint and ends bitwise where an uninterrupted run ends (losses and model).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
source "$pt_root/tests/multihost/hosts.sh"
mh_hosts 2
marker="$work/marker" ckpt="$work/ckpt"
timeout_s=4
# on the CPU whatever the build (multihost_gate.sh says why)
common=(tests/pipeline/gate.yaml --quiet --set pipeline.device=cpu
        --set train.lr_schedule.name=constant)
mh_mpirun "$mh_prefix-1 $mh_prefix-2" 4 "$pipe_train" "${common[@]}" --set pipeline.stages=4 \
  --set train.steps=1000000 --set pipeline.timeout_s=$timeout_s \
  --set "train.checkpoint={dir: $ckpt, every: 2}" --metrics "$marker.jsonl" >"$work/out" 2>&1 &
job=$!
for _ in $(seq 300); do compgen -G "$ckpt/step-*/manifest.json" >/dev/null && break; sleep 0.2; done
compgen -G "$ckpt/step-*/manifest.json" >/dev/null || fail "no checkpoint written: $(cat "$work/out")"
lost=()
for p in $(pt_ranks_of_run "$marker"); do
  mh_pids "$mh_prefix-2" | grep -qx "$p" && lost+=("$p")
done
[ ${#lost[@]} = 2 ] || fail "want 2 ranks on $mh_prefix-2, found ${#lost[@]}"
kill -KILL "${lost[@]}"
named="rank [23]( with PID [0-9]+)? on (node )?$mh_prefix-2\b"
mh_time_fault "$job" "$work/out" "$named" $((timeout_s + 10))
echo "host's ranks killed: named after $mh_detect_ms ms, job ended after $mh_end_ms ms (timeout_s $timeout_s)"
echo "line: $(grep -m1 -E "$named" "$work/out")"
[ "$mh_end_ms" -le $(((timeout_s + 5) * 1000)) ] ||
  fail "the job took $mh_end_ms ms to end (timeout_s $timeout_s)"
# the newest complete checkpoint (a save cut short has no manifest)
k=$(find "$ckpt" -name manifest.json | sed -n 's|.*/step-0*\([0-9][0-9]*\)/manifest.json|\1|p' | sort -n | tail -1)
steps=$((k + 4))
mh_mpirun "$mh_prefix-1" 4 "$pipe_train" "${common[@]}" --set pipeline.stages=4 \
  --set train.steps=$steps --load "$ckpt" --metrics "$work/resumed.jsonl" \
  --gather "$work/resumed.st" >"$work/resume.out" 2>&1 ||
  fail "resume on $mh_prefix-1 alone: exit $? ($(cat "$work/resume.out"))"
"$pipe_train" "${common[@]}" --sequential --set train.steps=$steps --metrics "$work/fresh.jsonl" \
  --gather "$work/fresh.st" || fail "the uninterrupted run"
pt_same_bits "$work/fresh.st" "$work/resumed.st"
python3 - "$work/fresh.jsonl" "$work/resumed.jsonl" "$k" <<'PY'
import json, sys
fresh, resumed = ([(r["step"], r["loss"]) for r in map(json.loads, open(p))] for p in sys.argv[1:3])
k = int(sys.argv[3])
assert [s for s, _ in resumed] == list(range(k + 1, k + 5)), resumed
assert resumed == fresh[k:], f"losses differ after the resume: {resumed} vs {fresh[k:]}"
PY
echo "resumed on $mh_prefix-1 alone from step $k: steps $((k + 1))..$steps and the model bitwise equal to an uninterrupted run"
echo "multihost_host_lost: passed"
