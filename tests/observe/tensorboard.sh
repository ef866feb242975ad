#!/usr/bin/env bash
# tensorboard.sh PIPE_TRAIN PYTHON: --tensorboard read back with TensorBoard's own reader
# (tensorboard_check.py; skipped, exit 77, where PYTHON lacks the tensorboard package):
#   (1) a 2-stage run with data.eval: every scalar of every step equals its --metrics record,
#       the spec and the plan are text summaries;
#   (2) a run that went on 2 steps past its checkpoint, resumed from that checkpoint into the
#       same directory: each step shows once, the resumed steps with the resumed run's values.
pipe_train=$(realpath "$1") python=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
"$python" -c 'import tensorboard' 2>/dev/null || skip "$python has no tensorboard package (scripts/install-python.sh)"
spec=tests/pipeline/gate.yaml
head -c 30000 examples/data/tiny.txt | tail -c 6000 >"$work/heldout.txt"
run() { pt_mpirun 2 "$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
  --set "data.eval={path: $work/heldout.txt, every: 3, batches: 1}" "$@"; }
run --set train.steps=6 --metrics "$work/a.jsonl" --tensorboard "$work/tb_a"
"$python" "$here/tensorboard_check.py" "$work/tb_a" "$work/a.jsonl"
# (2): steps 1-5 with a checkpoint after step 3; then from step 3 to 8
run --set train.steps=5 --set "train.checkpoint={dir: $work/ck, every: 3}" \
  --metrics "$work/b1.jsonl" --tensorboard "$work/tb_b"
run --set train.steps=8 --load "$work/ck/step-00000003" --metrics "$work/b2.jsonl" --tensorboard "$work/tb_b"
head -n 3 "$work/b1.jsonl" >"$work/b.jsonl"
cat "$work/b2.jsonl" >>"$work/b.jsonl"
"$python" "$here/tensorboard_check.py" "$work/tb_b" "$work/b.jsonl"
echo "tensorboard: fresh and resumed runs read back step for step"
