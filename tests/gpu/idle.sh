#!/usr/bin/env bash
# idle.sh PIPE_TRAIN: a pipeline stage's idle fraction on a GPU is the GPU's, not the host's.
# The host queues a step's work ahead of the GPU, so timing the calls on the host's clock made
# every GPU stage look idle about 99.9 % of each step (the metrics' bubble, the report's idle);
# the stages time their compute with events on the stream (device_span_begin). 2 stages of the
# gate model, 1f1b, 4 micro-batches, sharing one GPU as a one-GPU machine runs them: each stage
# computes for a real part of every step after the first, so its idle fraction must be under
# MAX_IDLE (1f1b's own bubble here is (P - 1) / (M + P - 1) = 20 %; staging the messages
# through the host, and on a real GPU the other rank's share of it, add to that).
# Exits 77 (CTest skip) where no GPU can be used (a kit's real-GPU build run without one).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
pt_probe_gpu "$pipe_train" tests/pipeline/gate.yaml --sequential --quiet --set train.steps=1 \
  --set pipeline.device=gpu
pt_mpirun 2 "$pipe_train" tests/pipeline/gate.yaml --set pipeline.device=gpu \
  --set pipeline.stages=2 --set comm.backend=mpi --set "pipeline.devices=[0, 0]" \
  --set train.steps=4 --metrics "$work/m.jsonl" >"$work/out" 2>&1 ||
  fail "the run: $(cat "$work/out")"
python3 - "$work/m.jsonl" "$work/out" <<'PY'
import json, re, sys
MAX_IDLE = 0.8
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 4, f"{len(rows)} steps recorded, want 4"
for r in rows[1:]:
    for s, idle in enumerate(r["bubble"]):
        assert 0 < idle < MAX_IDLE, \
            f"step {r['step']} stage {s}: idle {idle:.4f}, not in (0, {MAX_IDLE})"
report = [float(x) for x in re.findall(r"stage \d+: .* idle ([0-9.]+)%", open(sys.argv[2]).read())]
assert len(report) == 2 and all(0 < x < 100 * MAX_IDLE for x in report), f"report idle {report}"
print("idle: stages idle " + ", ".join(f"{x:.1f} %" for x in report) +
      f" of the run (< {100 * MAX_IDLE:.0f} %)")
PY
