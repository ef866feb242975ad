#!/usr/bin/env bash
# shuffled.sh PIPE_TRAIN: data.order: shuffled on tests/pipeline/gate.yaml over a short file
# (1000 bytes: n = floor(999 / 32) = 31 windows, G = 8, so 20 steps cross five epochs):
#   - the shuffled run's losses differ from the sequential order's (the order is applied);
#   - sequential (one process) vs P=2 and vs P=2 x dp2: losses and parameters bitwise (--exact);
#   - resume: a P=2 run checkpointed at step 10 (mid-epoch: sample 80 is position 18 of epoch 2)
#     and resumed gives the uninterrupted run's losses 11..20 and parameters bitwise.
pipe_train=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
head -c 1000 examples/data/tiny.txt >"$work/small.txt"
common=(--quiet --set "data.path=$work/small.txt")
shuf=(--set data.order=shuffled)
mpi() { pt_mpirun "$1" "$pipe_train" "$spec" "${common[@]}" "${@:2}"; }
cmp() { python3 "$here/compare_runs.py" "$work/$1.jsonl" "$work/$1" "$work/$2.jsonl" "$work/$2" "$3" --exact; }

"$pipe_train" "$spec" --sequential "${common[@]}" --metrics "$work/plain.jsonl" --dump-params "$work/plain"
"$pipe_train" "$spec" --sequential "${common[@]}" "${shuf[@]}" --metrics "$work/ref.jsonl" \
  --dump-params "$work/ref"
if python3 "$here/compare_runs.py" "$work/plain.jsonl" "$work/plain" "$work/ref.jsonl" "$work/ref" 1 \
  --exact >/dev/null; then
  echo "FAIL: data.order=shuffled trained exactly like sequential order"; exit 1
fi
mpi 2 "${shuf[@]}" --set pipeline.stages=2 --metrics "$work/p2.jsonl" --dump-params "$work/p2"
cmp ref p2 2
"$pipe_train" "$spec" --sequential "${common[@]}" "${shuf[@]}" --set pipeline.data_parallel=2 \
  --metrics "$work/refdp.jsonl" --dump-params "$work/refdp"
mpi 4 "${shuf[@]}" --set pipeline.stages=2 --set pipeline.data_parallel=2 \
  --metrics "$work/dp2.jsonl" --dump-params "$work/dp2"
cmp refdp dp2 4
# Resume mid-epoch from the uninterrupted run's own periodic checkpoint (same cosine schedule).
mpi 2 "${shuf[@]}" --set pipeline.stages=2 --set "train.checkpoint={dir: $work/ck, every: 10}" \
  --metrics "$work/full.jsonl" --dump-params "$work/full"
mpi 2 "${shuf[@]}" --set pipeline.stages=2 --load "$work/ck/step-00000010" \
  --metrics "$work/res.jsonl" --dump-params "$work/res"
python3 - "$work/full.jsonl" "$work/res.jsonl" <<'PY'
import json, sys
full = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
res = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2]))}
if sorted(res) != list(range(11, 21)):
    sys.exit(f"FAIL: resumed steps {sorted(res)}, want 11..20")
bad = [s for s in res if res[s] != full[s]]
if bad:
    sys.exit(f"FAIL: resumed losses differ at steps {bad}")
print("resumed losses 11..20 bitwise equal")
PY
python3 tests/checkpoint/ck.py cmp_params "$work/full" 2 "$work/res" 2 "resumed vs uninterrupted" exact
echo "shuffled: ok"
