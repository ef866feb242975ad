#!/usr/bin/env bash
# trace_svg.sh PIPE_TRAIN PIPE_TRACE: a 4-stage run traces step 2; pipe_trace draws it as a
# picture with 2 x 4 x 4 = 32 boxes (svg_check.py).
pipe_train=$1 pipe_trace=$2
source "$(dirname "$0")/../lib.sh"
PT_MPI_TIMEOUT=120 pt_mpirun 4 "$pipe_train" tests/pipeline/gate.yaml --set pipeline.stages=4 \
  --set train.steps=2 --quiet --trace "$work/trace.json" --trace-steps 2:2
"$pipe_trace" "$work/trace.json" "$work/trace.svg"
python3 tests/observe/svg_check.py "$work/trace.svg" 32
