#!/usr/bin/env bash
# nonfinite.sh PIPE_TRAIN [SETTINGS...]: a learning rate of 1e30 makes step 2 overflow (the first transformer
# block, layer 2, goes non-finite in attention). on_nonfinite: abort must stop with one line
# naming the step, the layer and its stage; skip must finish and leave the weights exactly as
# after step 1 (nothing of a skipped step reaches weights or optimizer state). SETTINGS go to
# every run: tests/gpu runs it on the emulated GPU (--set pipeline.device=gpu ...), where the
# checks stay on the device until the step's end.
pipe_train=$1
shift
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
blow=(--quiet --set train.optimizer.lr=1e30 --set train.grad_clip=0 --set train.lr_schedule.name=constant
      --set train.lr_schedule.warmup_steps=0 "$@")

expect_abort() { # STAGE CMD...: exit non-zero with one error line naming step 2, layer 2, STAGE
  local stage=$1; shift
  set +e; "$@" >"$work/out" 2>&1; local code=$?; set -e
  [ "$code" != 0 ] || fail "abort mode exited 0"
  local n; n=$(grep -c '^pipetrain: error' "$work/out" || true)
  [ "$n" = 1 ] || fail "expected one error line, got $n: $(cat "$work/out")"
  grep -q "step 2: non-finite values: the output of layer 2 (transformer_block) on stage $stage" \
    "$work/out" || fail "message: $(cat "$work/out")"
  echo "abort ok (stage $stage): $(grep '^pipetrain: error' "$work/out" | cut -c1-90)..."
}

expect_abort 0 "$pipe_train" "$spec" "${blow[@]}" --set train.steps=4
expect_abort 1 timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" "${blow[@]}" \
  --set train.steps=4 --set pipeline.stages=2 --set 'pipeline.boundaries=[0,2]'

"$pipe_train" "$spec" "${blow[@]}" --set train.steps=1 --dump-params "$work/one"
"$pipe_train" "$spec" "${blow[@]}" --set train.steps=5 --set train.on_nonfinite=skip \
  --metrics "$work/skip.jsonl" --dump-params "$work/skip"
cmp "$work/one.0.bin" "$work/skip.0.bin" || fail "skipped steps changed the weights"
python3 - "$work/skip.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [r["skipped_steps"] for r in rows]
assert got == [0, 1, 2, 3, 4], got
print("skip ok: steps 2-5 skipped, counted", got, "and the weights are those after step 1")
PY
