#!/usr/bin/env bash
# roundtrip.sh PIPE_TRAIN PIPE_CONVERT: checkpoints resume exactly, under the same layout and
# under others, and pipe_convert's outputs hold exactly what the run that saved them trained.
#
# Every run trains tests/pipeline/gate.yaml with its train.steps (20): an "interrupted" run is
# one that resumes from a periodic checkpoint (train.checkpoint every N) of a full-length run,
# so the cosine schedule is the one of the uninterrupted reference.
#   (a) reference: sequential, 20 steps (metrics, --dump-params)
#   (b) P=4 with checkpoints every 5 (keep 3): matches the reference; pruning kept 10/15/20;
#       resuming P=4 from step 10 gives the reference's losses 11..20 bitwise and the
#       uninterrupted P=4 run's parameters bitwise; --load ROOT picks the newest (step 20)
#   (c) across layouts: P=4 step 10 -> sequential (to its step-15 checkpoint) -> P=2 (to its
#       step-18 checkpoint) -> 4 stages x 2 replicas (8 ranks) to 20; each leg's losses within
#       1e-6 of the reference (the dp=2 leg: of a sequential dp=2 run from the same checkpoint);
#       a dp=2 checkpoint loads back into one process unchanged
#   (b') SGD with momentum resumes exactly too (momentum_buffer state)
#   (e) the emulated device: a P=2 checkpoint at step 10 resumed in one process gives the
#       reference's losses and parameters (host copies refreshed before saving, uploaded after
#       loading)
#   (d) pipe_convert: CKPT -> one safetensors file (read here with struct/json), bitwise equal to
#       the saving run's --dump-params, tie metadata; --with-optimizer; --stages 3 --out DIR
#       resumed by mpirun -np 3 matches the reference
set -euo pipefail
pipe_train=$(realpath "$1") pipe_convert=$(realpath "$2")
. "$(dirname "$0")/common.sh"

say "(a) reference: sequential, 20 steps"
seq_run --metrics "$work/ref.jsonl" --dump-params "$work/ref"

say "(b) P=4, checkpoints every 5 (keep 3), then an exact resume from step 10"
mpi_run 4 --set pipeline.stages=4 --set "train.checkpoint={dir: $work/p4ck, every: 5, keep: 3}" \
  --metrics "$work/p4.jsonl" --dump-params "$work/p4"
ck cmp_losses "$work/ref.jsonl" "$work/p4.jsonl" 1 20 0 "P=4 uninterrupted vs sequential"
ck cmp_params "$work/ref" 1 "$work/p4" 4 "P=4 uninterrupted vs sequential"
ck steps_in "$work/p4ck" 10 15 20
for s in 10 15 20; do ck check_ckpt "$work/p4ck/step-000000$s" "$s" 4 1; done
mpi_run 4 --set pipeline.stages=4 --load "$work/p4ck/step-00000010" \
  --metrics "$work/p4r.jsonl" --dump-params "$work/p4r"
ck cmp_losses "$work/ref.jsonl" "$work/p4r.jsonl" 11 20 0 "P=4 resumed at 10 vs sequential"
ck cmp_params "$work/ref" 1 "$work/p4r" 4 "P=4 resumed at 10 vs sequential"
for r in 0 1 2 3; do
  cmp -s "$work/p4.$r.bin" "$work/p4r.$r.bin" ||
    fail "rank $r: the resumed P=4 run's parameters are not bitwise those of the uninterrupted run"
done
echo "  P=4 resumed at 10: every rank's parameters (tied copies too) bitwise equal to the uninterrupted P=4 run"
seq_run --load "$work/p4ck" --metrics "$work/none.jsonl" --dump-params "$work/p4load"
[[ ! -s "$work/none.jsonl" ]] || fail "--load of the checkpoint root did not pick step 20 (it trained: $(head -c 200 "$work/none.jsonl"))"
ck cmp_params "$work/p4" 4 "$work/p4load" 1 "--load ROOT (newest: step 20) into one process vs P=4's own"

say "(c) across layouts: P=4@10 -> sequential -> P=2 -> 4 stages x 2 replicas"
seq_run --load "$work/p4ck/step-00000010" --set "train.checkpoint={dir: $work/seqck, every: 5, keep: 2}" \
  --metrics "$work/seq.jsonl"
ck cmp_losses "$work/ref.jsonl" "$work/seq.jsonl" 11 20 1e-6 "sequential resumed from P=4@10"
ck check_ckpt "$work/seqck/step-00000015" 15 1 1
mpi_run 2 --set pipeline.stages=2 --load "$work/seqck/step-00000015" \
  --set "train.checkpoint={dir: $work/p2ck, every: 3, keep: 1}" \
  --metrics "$work/p2.jsonl" --dump-params "$work/p2"
ck cmp_losses "$work/ref.jsonl" "$work/p2.jsonl" 16 20 1e-6 "P=2 resumed from sequential@15"
ck cmp_params "$work/ref" 1 "$work/p2" 2 "P=2 resumed from sequential@15 vs sequential"
ck steps_in "$work/p2ck" 18
ck check_ckpt "$work/p2ck/step-00000018" 18 2 1
# dp changes the global batch: the reference for this leg is a sequential dp=2 run from the
# same checkpoint (sequential dp=2 equals the pipelined dp=2 run, as in the dp gate).
seq_run --set pipeline.data_parallel=2 --load "$work/p2ck/step-00000018" \
  --metrics "$work/refdp2.jsonl" --dump-params "$work/refdp2"
mpi_run 8 --set pipeline.stages=4 --set pipeline.data_parallel=2 --load "$work/p2ck" \
  --metrics "$work/p8.jsonl" --dump-params "$work/p8" --save "$work/p8save"
ck cmp_losses "$work/refdp2.jsonl" "$work/p8.jsonl" 19 20 1e-6 "4x2 ranks resumed from P=2@18 vs sequential dp=2"
ck cmp_params "$work/refdp2" 1 "$work/p8" 8 "4x2 ranks resumed from P=2@18 vs sequential dp=2"
ck differ "$work/ref.jsonl" "$work/p8.jsonl" 19 "dp=2 vs dp=1"
ck check_ckpt "$work/p8save" 20 4 2
seq_run --load "$work/p8save" --metrics "$work/none2.jsonl" --dump-params "$work/p8load"
[[ ! -s "$work/none2.jsonl" ]] || fail "loading the step-20 checkpoint trained further"
ck cmp_params "$work/p8" 8 "$work/p8load" 1 "dp=2 checkpoint loaded into one process vs the 4x2 run"

say "(b') SGD with momentum: sequential 20 steps, resumed at 10 (momentum_buffer state)"
sgd="train.optimizer={name: sgd, lr: 0.01, momentum: 0.9}"
seq_run --set "$sgd" --set "train.checkpoint={dir: $work/sgdck, every: 10, keep: 2}" \
  --metrics "$work/sgd.jsonl" --dump-params "$work/sgd"
seq_run --set "$sgd" --load "$work/sgdck/step-00000010" --metrics "$work/sgdr.jsonl" --dump-params "$work/sgdr"
ck cmp_losses "$work/sgd.jsonl" "$work/sgdr.jsonl" 11 20 0 "SGD resumed at 10"
cmp -s "$work/sgd.0.bin" "$work/sgdr.0.bin" || fail "SGD resumed at 10: parameters not bitwise equal"
echo "  SGD resumed at 10: parameters bitwise equal to the uninterrupted run"

say "(d) pipe_convert"
ck_dir="$work/p4ck/step-00000020"
"$pipe_convert" "$ck_dir" "$work/full.safetensors" || fail "pipe_convert $ck_dir OUT exited $?"
ck check_convert "$work/full.safetensors" "$ck_dir" "$work/p4" 4
[[ ! -e "$work/full.optimizer.safetensors" ]] || fail "pipe_convert wrote an optimizer file without --with-optimizer"
"$pipe_convert" "$ck_dir" "$work/full2.safetensors" --with-optimizer ||
  fail "pipe_convert --with-optimizer exited $?"
cmp -s "$work/full.safetensors" "$work/full2.safetensors" ||
  fail "the model file written with --with-optimizer differs from the one without"
ck check_optim "$work/full2.optimizer.safetensors" "$ck_dir"
! compgen -G "$work/*tmp*" >/dev/null || fail "pipe_convert left temporary files: $(echo "$work"/*tmp*)"
"$pipe_convert" "$work/p4ck/step-00000010" --stages 3 --out "$work/p3ck" ||
  fail "pipe_convert --stages 3 exited $?"
ck check_ckpt "$work/p3ck" 10 3 1
mpi_run 3 --set pipeline.stages=3 --load "$work/p3ck" --metrics "$work/p3.jsonl" --dump-params "$work/p3"
ck cmp_losses "$work/ref.jsonl" "$work/p3.jsonl" 11 20 1e-6 "P=3 from pipe_convert --stages 3 of P=4@10"
ck cmp_params "$work/ref" 1 "$work/p3" 3 "P=3 from pipe_convert --stages 3 vs sequential"

say "(e) the emulated device (the GPU path's transfers): save on P=2 at step 10, resume in one process"
mpi_run 2 --set pipeline.stages=2 --set pipeline.device=emulated --set train.steps=20 \
  --set "train.checkpoint={dir: $work/emuck, every: 10}"
seq_run --set pipeline.device=emulated --load "$work/emuck/step-00000010" \
  --metrics "$work/emu.jsonl" --dump-params "$work/emu"
ck cmp_losses "$work/ref.jsonl" "$work/emu.jsonl" 11 20 0 "emulated device, resumed from P=2@10"
ck cmp_params "$work/ref" 1 "$work/emu" 1 "emulated device, resumed from P=2@10, vs sequential cpu"

echo "checkpoint roundtrip: all checks passed in $((SECONDS - start)) s"
