#!/usr/bin/env bash
# tests/cli/run_examples.sh PIPE_TRAIN CUSTOM_LAYER: every shipped example trains briefly and learns.
#
# Each pipe_train run writes --metrics; its loss at the last step must be below the first step's
# (and every line finite, one per step). The custom layer example checks its own loss (it exits
# non-zero unless the loss fell by 0.5 nats); its printed losses are checked here too. Each run
# has a time limit, so a hang fails the run instead of the suite. About 10 s on two cores.
set -u
pipe_train=$(realpath "$1")
custom_layer=$(realpath "$2")
cd "$(dirname "$0")/../.." || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# check_loss NAME STEPS METRICS: one finite line per step, last loss below the first
check_loss() {
  python3 - "$@" <<'PY'
import json, math, sys
name, steps, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [json.loads(line) for line in open(path) if line.strip()]
losses = [r.get("loss", math.nan) for r in rows]
if len(rows) != steps:
    sys.exit(f"FAIL {name}: {len(rows)} metric lines, expected {steps}")
if not all(math.isfinite(x) for x in losses):
    sys.exit(f"FAIL {name}: a loss is not finite")
if not losses[-1] < losses[0]:
    sys.exit(f"FAIL {name}: the loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})")
print(f"ok {name}: loss {losses[0]:.4f} -> {losses[-1]:.4f} over {steps} steps", end="")
PY
}

# learns NAME STEPS LIMIT_S CMD...: runs CMD --quiet --metrics FILE within LIMIT_S seconds
learns() {
  local name=$1 steps=$2 limit=$3 t0=$SECONDS rc
  shift 3
  timeout --kill-after=5 "$limit" "$@" --quiet --metrics "$work/$name.jsonl" \
    >"$work/$name.log" 2>&1
  rc=$?
  if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] && echo "FAIL $name: no result within $limit s" || echo "FAIL $name: exit $rc"
    tail -n 5 "$work/$name.log"
    failed=1
  elif check_loss "$name" "$steps" "$work/$name.jsonl"; then
    echo " ($((SECONDS - t0)) s)"
  else
    failed=1
  fi
}

learns default 40 120 "$pipe_train" examples/default.yaml --set train.steps=40
learns mlp 40 60 "$pipe_train" examples/mlp.yaml --set train.steps=40
learns uneven 30 120 mpirun -np 3 --oversubscribe "$pipe_train" examples/uneven.yaml
learns gpt 2 120 "$pipe_train" examples/gpt.yaml --sequential --set train.steps=2 \
  --set train.micro_batches=1
learns llama 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/llama.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns llama3 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/llama3.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns qwen2 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/qwen2.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns qwen3 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/qwen3.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns gemma2 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/gemma2.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns mistral 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/mistral.yaml \
  --set train.steps=10 --set train.micro_batch_size=4
learns phi3 10 120 mpirun -np 2 --oversubscribe "$pipe_train" examples/phi3.yaml \
  --set train.steps=10 --set train.micro_batch_size=4

# The custom layer example has its own main: no --metrics; it prints "loss A -> B".
t0=$SECONDS
out=$(timeout --kill-after=5 60 "$custom_layer" examples/custom_layer.yaml 2>&1)
rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL custom_layer: exit $rc"
  printf '%s\n' "$out" | tail -n 5
  failed=1
elif ! printf '%s\n' "$out" | awk '/loss [0-9.]+ -> [0-9.]+/ {
    for (i = 1; i < NF; i++) if ($i == "->") { a = $(i - 1); b = $(i + 1) }
    ok = (b + 0 < a + 0) } END { exit ok ? 0 : 1 }'; then
  echo "FAIL custom_layer: the loss did not fall: $out"
  failed=1
else
  echo "ok custom_layer: $(printf '%s\n' "$out" | grep -o 'loss .*') ($((SECONDS - t0)) s)"
fi

[ "$failed" = 0 ] && echo "all examples learn" || echo "some examples failed"
exit "$failed"
