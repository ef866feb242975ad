#!/usr/bin/env bash
# check_default_example.sh PIPE_TRAIN [STEPS]: trains examples/default.yaml in full (or for
# STEPS steps: the sanitizer build, where memory errors are the point, not the learning) and
# checks what the README promises: it learns (final loss well under ln(256) = 5.55; under 3 for
# a short run) and --metrics writes one JSON object per step with the documented fields.
set -eu
pipe_train=$1 steps=${2:-300}
metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
"$pipe_train" examples/default.yaml --metrics "$metrics" --quiet --set train.steps="$steps"
python3 - "$metrics" "$steps" <<'PY'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = int(sys.argv[2])
assert len(rows) == steps, f"expected {steps} metric lines, got {len(rows)}"
for i, r in enumerate(rows):
    for key in ("step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms"):
        assert key in r and math.isfinite(r[key]), f"line {i + 1}: bad or missing {key}: {r}"
    assert r["step"] == i + 1, f"line {i + 1}: step {r['step']}"
first, last = rows[0]["loss"], sum(r["loss"] for r in rows[-10:]) / 10
assert abs(first - math.log(256)) < 0.3, f"initial loss {first:.3f} is not ln(256)"
limit = 2.0 if steps >= 300 else 3.0
assert last < limit, f"final loss {last:.3f} is not well under ln(256)"
print(f"default example: loss {first:.3f} -> {last:.3f} over {len(rows)} steps")
PY
