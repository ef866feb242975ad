#!/usr/bin/env bash
# trace_times.sh PIPE_TRAIN TEST_TRACE_TIMES: per-layer times read back from real 2-rank traces
# of examples/mlp.yaml (observe/trace_times.h), against medians trace_medians.py computes from
# the JSON on its own: a fused backward (1f1b), chunks with a split backward (zbv, steps 2..6
# traced), activation checkpointing; then the refusals: another model, another micro-batch
# size or seq_len, no layout metadata (an older trace), damaged layout, a chunk without
# backward spans, not a trace, no file.
pipe_train=$1 times=$2
here=$(cd "$(dirname "$0")" && pwd)
spec=examples/mlp.yaml
source "$(dirname "$0")/../lib.sh"

record() { # NAME [--set K=V ...]: a traced 6-step run on 2 stages
  local name=$1
  shift
  timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
    --set train.steps=6 --trace "$work/$name.json" "$@"
}

check() { # NAME: the times of trace NAME against its medians
  python3 "$here/trace_medians.py" medians "$work/$1.json" > "$work/$1.expected"
  "$times" check "$spec" "$work/$1.json" "$work/$1.expected"
}

refuse() { # TRACE TEXT [K=V ...]
  "$times" refuse "$spec" "$@"
}

record fused
record zbv --set pipeline.schedule=zbv --trace-steps 2:6
record checkpointing --set train.activation_checkpoint_interval=2
record narrow --set model.dim=128
check fused
check zbv
check checkpointing

refuse "$work/narrow.json" "was recorded for another model"
refuse "$work/fused.json" "train.micro_batch_size 64, this spec has 32: times scale with it" \
  train.micro_batch_size=32
python3 "$here/trace_medians.py" edit "$work/fused.json" "$work/seq.json" seq_len=16
refuse "$work/seq.json" "model.seq_len 16, this spec has 0: times scale with it"
python3 "$here/trace_medians.py" edit "$work/fused.json" "$work/old.json" -bounds -model_hash
refuse "$work/old.json" "recorded by an older pipetrain; record a new trace with pipe_train --trace"
python3 "$here/trace_medians.py" edit "$work/fused.json" "$work/bad.json" "bounds=[0,5,3]"
refuse "$work/bad.json" "layout metadata is damaged"
python3 "$here/trace_medians.py" edit "$work/fused.json" "$work/no_b.json" drop:B
refuse "$work/no_b.json" "chunk 0 (layers 0-2, stage 0) has no backward (B<mb> or I<mb>) span"
refuse "$spec" "not a Chrome trace"
refuse "$work/missing.json" "cannot read the trace"
echo "trace times ok"
