#!/usr/bin/env bash
# shard.sh PIPE_TRAIN: checkpoints of a sharded optimizer (pipeline.shard_optimizer) hold the
# whole optimizer state, reassembled from the replicas' ranges, and resume exactly under another
# stage count, data-parallel degree and sharded or not.
#
# Every run trains tests/pipeline/gate.yaml for its 20 steps, one BLAS thread, so every leg is
# bitwise: losses and every parameter, tied copies too.
#   (a) reference: sequential with data_parallel=2, 20 steps
#   (b) 2 stages x 2 replicas sharded, checkpoints every 5: equals the reference; its optimizer
#       files are byte for byte those of the same run unsharded
#   (c) sharded -> unsharded: its step-10 checkpoint resumed by 2 x 2 unsharded
#   (d) D=2 -> D=4: the step-10 checkpoint resumed by 1 stage x 4 replicas sharded, against a
#       sequential data_parallel=4 run from the same checkpoint
#   (e) unsharded -> sharded: the unsharded run's step-10 checkpoint resumed by 2 x 2 sharded
set -euo pipefail
pipe_train=$(realpath "$1")
. "$(dirname "$0")/common.sh"
dp2=(--set pipeline.stages=2 --set pipeline.data_parallel=2)
shard=(--set pipeline.shard_optimizer=true)
exact() { # exact LABEL FIRST RANKS RUN [REF]: RUN's losses FIRST..20 and parameters bitwise REF's
  local ref=${5:-ref}
  ck cmp_losses "$work/$ref.jsonl" "$work/$4.jsonl" "$2" 20 0 "$1"
  ck cmp_params "$work/$ref" 1 "$work/$4" "$3" "$1" exact
}

say "(a) reference: sequential, data_parallel=2, 20 steps"
seq_run --set pipeline.data_parallel=2 --metrics "$work/ref.jsonl" --dump-params "$work/ref"

say "(b) 2 stages x 2 replicas, sharded, checkpoints every 5"
mpi_run 4 "${dp2[@]}" "${shard[@]}" --set "train.checkpoint={dir: $work/sh, every: 5, keep: 4}" \
  --metrics "$work/sh.jsonl" --dump-params "$work/sh"
exact "2x2 sharded vs sequential" 1 4 sh
for s in 05 10 15 20; do ck check_ckpt "$work/sh/step-000000$s" "${s#0}" 2 2; done
mpi_run 4 "${dp2[@]}" --set "train.checkpoint={dir: $work/un, every: 5, keep: 4}" \
  --metrics "$work/un.jsonl" --dump-params "$work/un"
for s in 05 20; do
  for f in optim-s000 optim-s001 model-s000 model-s001; do
    cmp "$work/sh/step-000000$s/$f.safetensors" "$work/un/step-000000$s/$f.safetensors" ||
      fail "step $s: $f of the sharded run differs from the unsharded run's"
  done
done
echo "  steps 5 and 20: the sharded run's model and optimizer files are the unsharded run's, byte for byte"

say "(c) sharded -> unsharded"
mpi_run 4 "${dp2[@]}" --load "$work/sh/step-00000010" --metrics "$work/c.jsonl" \
  --dump-params "$work/c"
exact "2x2 unsharded from 2x2 sharded@10" 11 4 c

say "(d) D=2 -> D=4 (and 2 stages -> 1)"
seq_run --set pipeline.data_parallel=4 --load "$work/sh/step-00000010" \
  --metrics "$work/ref4.jsonl" --dump-params "$work/ref4"
mpi_run 4 --set pipeline.stages=1 --set pipeline.data_parallel=4 "${shard[@]}" \
  --load "$work/sh/step-00000010" --metrics "$work/d.jsonl" --dump-params "$work/d"
exact "1x4 sharded from 2x2 sharded@10 vs sequential dp=4" 11 4 d ref4

say "(e) unsharded -> sharded"
mpi_run 4 "${dp2[@]}" "${shard[@]}" --load "$work/un/step-00000010" --metrics "$work/e.jsonl" \
  --dump-params "$work/e"
exact "2x2 sharded from 2x2 unsharded@10" 11 4 e

echo "sharded optimizer checkpoints: all checks passed in $((SECONDS - start)) s"
