#!/usr/bin/env bash
# chunks.sh PIPE_TRAIN PIPE_CONVERT: checkpoints written by ranks that run several chunks
# (virtual stages) hold one file pair per chunk, resume exactly under any layout, and load where
# one chunk per stage was written; --gather and pipe_convert work on them.
#
# Every run trains tests/pipeline/gate.yaml (tied embedding and head) for its 20 steps, one BLAS
# thread, so every leg is bitwise: losses and every parameter, tied copies too.
#   (a) reference: sequential, 20 steps
#   (b) interleaved_1f1b, 2 stages x 2 chunks (loop placement), checkpoints every 5: equals the
#       reference; 4 chunk files, the chunk layout in the manifest
#   (c) its step-10 checkpoint resumed with one chunk per stage (P=2, 1f1b) -> that run's step-15
#       checkpoint resumed sequentially and, in today's layout, by 2 stages x 2 chunks again;
#       the step-10 one by zbv (two chunks per rank, down and back up, the backward split into
#       I and W) and by it with 2 replicas (against a sequential data_parallel=2 run from the
#       same checkpoint)
#   (d) --gather of loop and V runs: byte-identical to the sequential file
#   (e) pipe_convert: a chunked checkpoint to one file (bitwise the saving run's weights), and
#       --stages 2 re-split from the recorded spec (2 x 2 chunks) resumed exactly
set -euo pipefail
pipe_train=$(realpath "$1") pipe_convert=$(realpath "$2")
. "$(dirname "$0")/common.sh"
v2=(--set pipeline.stages=2 --set pipeline.schedule=interleaved_1f1b --set pipeline.virtual_stages=2)
vsched=(--set pipeline.stages=2 --set pipeline.schedule=zbv)
exact() { # exact LABEL FIRST RANKS RUN: RUN's losses FIRST..20 and parameters bitwise the reference's
  ck cmp_losses "$work/ref.jsonl" "$work/$4.jsonl" "$2" 20 0 "$1"
  ck cmp_params "$work/ref" 1 "$work/$4" "$3" "$1" exact
}

say "(a) reference: sequential, 20 steps"
seq_run --metrics "$work/ref.jsonl" --dump-params "$work/ref"

say "(b) 2 stages x 2 chunks (interleaved_1f1b), checkpoints every 5"
mpi_run 2 "${v2[@]}" --set "train.checkpoint={dir: $work/v2ck, every: 5, keep: 4}" \
  --metrics "$work/v2.jsonl" --dump-params "$work/v2"
exact "2x2 chunks vs sequential" 1 2 v2
for s in 05 10 15 20; do ck check_ckpt "$work/v2ck/step-000000$s" "${s#0}" 2 1 4; done

say "(c) the chunked checkpoint under other layouts"
mpi_run 2 --set pipeline.stages=2 --load "$work/v2ck/step-00000010" \
  --set "train.checkpoint={dir: $work/p2ck, every: 5, keep: 2}" \
  --metrics "$work/p2.jsonl" --dump-params "$work/p2"
exact "P=2, one chunk per stage, from 2x2@10" 11 2 p2
ck check_ckpt "$work/p2ck/step-00000015" 15 2 1
seq_run --load "$work/p2ck/step-00000015" --metrics "$work/seq.jsonl" --dump-params "$work/seq"
exact "sequential from P=2@15 (written from 2x2@10)" 16 1 seq
mpi_run 2 "${v2[@]}" --load "$work/p2ck/step-00000015" --metrics "$work/v2b.jsonl" \
  --dump-params "$work/v2b"
exact "2x2 chunks from P=2@15 (one chunk per stage)" 16 2 v2b
mpi_run 2 "${vsched[@]}" --load "$work/v2ck/step-00000010" --metrics "$work/vs.jsonl" \
  --dump-params "$work/vs"
exact "V placement from 2x2@10" 11 2 vs
seq_run --set pipeline.data_parallel=2 --load "$work/v2ck/step-00000010" \
  --metrics "$work/refdp2.jsonl" --dump-params "$work/refdp2"
mpi_run 4 "${vsched[@]}" --set pipeline.data_parallel=2 --load "$work/v2ck/step-00000010" \
  --metrics "$work/vsdp2.jsonl" --dump-params "$work/vsdp2"
ck cmp_losses "$work/refdp2.jsonl" "$work/vsdp2.jsonl" 11 20 0 "V x 2 replicas from 2x2@10 vs sequential dp=2"
ck cmp_params "$work/refdp2" 1 "$work/vsdp2" 4 "V x 2 replicas from 2x2@10 vs sequential dp=2" exact

say "(d) --gather"
seq_run --set train.steps=4 --gather "$work/seq.safetensors"
mpi_run 2 "${v2[@]}" --set train.steps=4 --gather "$work/v2.safetensors"
mpi_run 2 "${vsched[@]}" --set train.steps=4 --gather "$work/vs.safetensors"
cmp "$work/seq.safetensors" "$work/v2.safetensors" || fail "--gather of 2x2 chunks differs from the sequential file"
cmp "$work/seq.safetensors" "$work/vs.safetensors" || fail "--gather of the V schedule differs from the sequential file"
echo "  --gather of 2x2 chunks (loop and V placement): byte for byte the sequential file"

say "(e) pipe_convert"
"$pipe_convert" "$work/v2ck/step-00000020" "$work/full.safetensors" || fail "pipe_convert exited $?"
ck check_convert "$work/full.safetensors" "$work/v2ck/step-00000020" "$work/v2" 2
"$pipe_convert" "$work/v2ck/step-00000010" --stages 2 --out "$work/re2" || fail "pipe_convert --stages 2 exited $?"
ck check_ckpt "$work/re2" 10 2 1 4
mpi_run 2 "${v2[@]}" --load "$work/re2" --metrics "$work/re2run.jsonl" --dump-params "$work/re2run"
exact "2x2 chunks from pipe_convert --stages 2 of 2x2@10" 11 2 re2run

echo "chunked checkpoints: all checks passed in $((SECONDS - start)) s"
