#!/usr/bin/env bash
# svg_cli.sh PIPE_TRAIN: pipe_train --print-schedule --svg draws 4 stages' 1F1B step as a
# picture with 2 x 4 x 4 = 32 boxes (svg_check.py).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
"$pipe_train" tests/pipeline/gate.yaml --print-schedule --set pipeline.stages=4 \
  --svg "$work/schedule.svg" >/dev/null
python3 tests/observe/svg_check.py "$work/schedule.svg" 32
