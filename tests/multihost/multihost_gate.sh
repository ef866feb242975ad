#!/usr/bin/env bash
# multihost_gate.sh PIPE_TRAIN: a 4-stage job over 2 hosts (tests/multihost/hosts.sh: network
# namespaces, Open MPI over TCP between them, launched through tests/multihost/agent.sh) trains
# bitwise the model of the same job on one host: every step's loss and the gathered weights.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
source "$pt_root/tests/multihost/hosts.sh"
mh_hosts 2
# on the CPU whatever the build: the test's PIPETRAIN_AUTO_DEVICE=cpu does not reach the second
# host's ranks, which in an emulated-GPU build resolved auto to its GPUs (refused at the start
# since: pipeline.device auto resolves to cpu on rank 0 but to gpu on rank 2)
run=(tests/pipeline/gate.yaml --quiet --set pipeline.device=cpu --set pipeline.stages=4
     --set train.steps=6)

pt_mpirun 4 "$pipe_train" "${run[@]}" --metrics "$work/one.jsonl" --gather "$work/one.st" ||
  fail "the one-host run"
mh_mpirun "$mh_prefix-1 $mh_prefix-2" 4 --display-map "$pipe_train" "${run[@]}" \
  --metrics "$work/two.jsonl" --gather "$work/two.st" >"$work/two.out" 2>&1 ||
  fail "the 2-host run: exit $? ($(cat "$work/two.out"))"
# the map Open MPI printed: ranks 2 and 3 on the second host
grep -A4 "Data for node: $mh_prefix-2" "$work/two.out" | grep -q "Process rank: 2\b" ||
  fail "rank 2 did not run on $mh_prefix-2: $(cat "$work/two.out")"
pt_same_bits "$work/one.st" "$work/two.st"
python3 - "$work/one.jsonl" "$work/two.jsonl" <<'PY'
import json, sys
one, two = ([(r["step"], r["loss"]) for r in map(json.loads, open(p))] for p in sys.argv[1:])
assert len(one) == 6 and one == two, f"losses differ: {one} vs {two}"
PY
echo "multihost_gate: 4 stages over 2 hosts: 6 losses and the model bitwise equal to one host's"
