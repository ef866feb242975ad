#!/usr/bin/env bash
# eval.sh PIPE_TRAIN [SETTINGS]: data.eval on tests/pipeline/gate.yaml (10 steps, eval every 5
# and at the end, 3 batches of a held-out slice of tiny.txt), SETTINGS (KEY=VALUE) on every run
# (e.g. pipeline.device=emulated):
#   (1) bitwise gates (losses, eval losses, parameters: compare_runs.py --exact) against the
#       sequential run: P=2 1f1b; P=4 gpipe with checkpointing; P=2 zb_h1; P=2 interleaved
#       (2 chunks per stage); P=2 zbv; P=4 x dp2 (against sequential dp2, 8 ranks);
#   (2) eval changes no training bit: a P=2 zb_h1 run with checkpointing and eval equals the
#       run without eval (losses and --dump-params bitwise);
#   (3) independent value: with an eval file of N = T + 8T tokens every batch reads the same
#       rows as every training step (positions (k T) mod (N - T) = (k mod 8) T, G = 8), so the
#       eval loss after step 5 (parameters P5) equals the training loss of step 6 of a run
#       resumed from step 5's checkpoint on that file (its forward at P5, through the training's
#       own loss path, which scales each micro-batch before adding): within 1e-12 relative;
#   (4) bad data.eval settings: one line naming the key, exit 2.
pipe_train=$(realpath "$1")
extra=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
head -c 30000 examples/data/tiny.txt | tail -c 6000 >"$work/heldout.txt"
base=(--quiet --set train.steps=10)
for kv in $extra; do base+=(--set "$kv"); done
ev=(--set "data.eval={path: $work/heldout.txt, every: 5, batches: 3}")
seq() { timeout 120 "$pipe_train" "$spec" --sequential "${base[@]}" "$@"; }
mpi() { pt_mpirun "$1" "$pipe_train" "$spec" "${base[@]}" "${@:2}"; }
sets() { for kv in $1; do printf -- '--set\n%s\n' "$kv"; done; }
cmp() { python3 "$here/compare_runs.py" "$work/$1.jsonl" "$work/$1" "$work/$2.jsonl" "$work/$2" "$3" --exact; }
gate() { # NAME NP "SETTINGS" [REF]
  local args
  mapfile -t args < <(sets "$3")
  mpi "$2" "${ev[@]}" "${args[@]}" --metrics "$work/$1.jsonl" --dump-params "$work/$1"
  echo -n "$1: "
  cmp "${4:-ref}" "$1" "$2"
}

echo "(1) eval loss bitwise across layouts and schedules"
seq "${ev[@]}" --metrics "$work/ref.jsonl" --dump-params "$work/ref"
python3 - "$work/ref.jsonl" <<'PY'
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r]
if steps != [5, 10]:
    sys.exit(f"FAIL: evaluated after steps {steps}, want [5, 10]")
PY
gate p2 2 "pipeline.stages=2"
gate p4_gpipe_ckpt 4 "pipeline.stages=4 pipeline.schedule=gpipe train.activation_checkpoint_interval=2"
gate p2_zb_h1 2 "pipeline.stages=2 pipeline.schedule=zb_h1"
gate p2_interleaved 2 "pipeline.stages=2 pipeline.schedule=interleaved_1f1b pipeline.virtual_stages=2"
gate p2_zbv 2 "pipeline.stages=2 pipeline.schedule=zbv"
seq "${ev[@]}" --set pipeline.data_parallel=2 --metrics "$work/refdp.jsonl" --dump-params "$work/refdp"
gate p4_dp2 8 "pipeline.stages=4 pipeline.data_parallel=2" refdp

echo "(2) eval leaves training bitwise unchanged"
zb=(--set pipeline.stages=2 --set pipeline.schedule=zb_h1 --set train.activation_checkpoint_interval=1)
mpi 2 "${zb[@]}" --metrics "$work/noeval.jsonl" --dump-params "$work/noeval"
mpi 2 "${zb[@]}" "${ev[@]}" --metrics "$work/witheval.jsonl" --dump-params "$work/witheval"
python3 tests/checkpoint/ck.py cmp_params "$work/noeval" 2 "$work/witheval" 2 "eval on vs off" exact
python3 - "$work/noeval.jsonl" "$work/witheval.jsonl" <<'PY'
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p))] for p in sys.argv[1:3])
if a != b:
    sys.exit(f"FAIL: training losses changed by data.eval: {a} vs {b}")
print(f"  eval on vs off: {len(a)} training losses bitwise equal")
PY

echo "(3) eval loss against the training loss of the same rows and parameters"
head -c 288 examples/data/tiny.txt >"$work/same.txt" # N = 288, N - T = 256 = G T
seq --set "data.eval={path: $work/same.txt, every: 5, batches: 3}" \
  --set "train.checkpoint={dir: $work/ck, every: 5}" --metrics "$work/a.jsonl"
seq --set "data.path=$work/same.txt" --set train.steps=6 --load "$work/ck/step-00000005" \
  --metrics "$work/b.jsonl"
python3 - "$work/a.jsonl" "$work/b.jsonl" <<'PY'
import json, sys
a = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
b = {r["step"]: r for r in map(json.loads, open(sys.argv[2]))}
ev, tr = a[5]["eval_loss"], b[6]["loss"]
if abs(ev - tr) > 1e-12 * abs(tr):
    sys.exit(f"FAIL: eval_loss after step 5 {ev!r} vs training loss of the same rows {tr!r}")
print(f"  eval_loss {ev!r} vs training loss {tr!r}: within 1e-12")
PY

echo "(4) bad data.eval settings"
bad() { # SETTING WORD
  set +e
  out=$("$pipe_train" "$spec" --sequential --quiet --set "$1" 2>&1)
  rc=$?
  set -e
  lines=$(printf '%s\n' "$out" | grep -c .)
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$2" <<<"$out"; then
    echo "FAIL: --set '$1': exit $rc, $lines lines, want 2 and one line naming $2:"; echo "$out"
    exit 1
  fi
  echo "  $1 -> $out"
}
bad "data.eval={path: $work/heldout.txt, evry: 5}" "evry"
bad "data.eval={path: $work/heldout.txt, batches: 0}" "batches"
bad "data.eval={path: $work/heldout.txt, every: -1}" "every"
bad "data.eval={every: 5}" "path"
bad "data.eval={path: $work/nope.txt}" "nope.txt"
bad "data.eval={path: $work/heldout.txt, format: f32}" "format"
bad "data.eval={path: $work/heldout.txt, format: words}" "format"
bad "data.eval=5" "data.eval"
bad "data.order=random" "order"
echo "eval: ok"
