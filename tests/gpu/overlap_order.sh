#!/usr/bin/env bash
# overlap_order.sh PIPE_TRAIN: the NCCL transport's stream ordering (docs/gpu.md, "Overlap") is
# both present and needed. tests/pipeline/gate.yaml in 2 stages over the fake NCCL, 2 steps,
# against the sequential run on one emulated GPU:
#   - with the ordering, under stream interleavings where the transfers' stream and the compute
#     stream run in any order their dependencies allow (PT_EMU_STREAMS=random, each block's
#     threads in random order too; lazy: a stream runs only when something waits for it): bit
#     for bit equal;
#   - with the communication stream's wait for the buffers' producers dropped
#     (PT_EMU_COMM_UNORDERED=ready, emulated builds only), and with the compute stream's wait
#     for the transfers dropped (=done): NOT equal, under lazy streams (a stream runs only
#     when something waits for it; a step has no host wait left to order things by chance).
#     The emulator then runs a send before the kernel that writes its buffer, or a consumer
#     before its receive landed.
pipe_train=$(realpath "$1")
source "$(dirname "$0")/../lib.sh"
export PT_EMU_DEVICES=2 PT_EMU_NCCL_TIMEOUT=${PT_EMU_NCCL_TIMEOUT:-20}
spec=tests/pipeline/gate.yaml
common=(--quiet --set pipeline.device=gpu --set train.steps=2)
"$pipe_train" "$spec" --sequential "${common[@]}" --metrics "$work/ref.jsonl" \
  --dump-params "$work/ref"
run() { # NAME ENV...: 2 stages over NCCL under ENV; 0 when bit for bit equal to the reference
  local name=$1
  shift
  env "$@" timeout 240 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" "${common[@]}" \
    --set comm.backend=nccl --set pipeline.stages=2 --metrics "$work/$name.jsonl" \
    --dump-params "$work/$name"
  python3 tests/pipeline/compare_runs.py "$work/ref.jsonl" "$work/ref" "$work/$name.jsonl" \
    "$work/$name" 2 --exact >"$work/$name.cmp" 2>&1
}
failed=0
for order in "PT_EMU_STREAMS=random PT_EMU_ORDER=random PT_EMU_SEED=3" "PT_EMU_STREAMS=lazy"; do
  # shellcheck disable=SC2086 # the words are separate settings
  if run ordered $order; then
    echo "ordered, $order: bit for bit equal to sequential"
  else
    echo "FAIL: ordered, $order: differs from sequential:"
    head -5 "$work/ordered.cmp"
    failed=1
  fi
done
for drop in ready done; do
  if run "drop_$drop" PT_EMU_COMM_UNORDERED=$drop PT_EMU_STREAMS=lazy; then
    echo "FAIL: PT_EMU_COMM_UNORDERED=$drop still bit for bit equal: the emulator misses it"
    failed=1
  else
    echo "PT_EMU_COMM_UNORDERED=$drop: differs, as it must ($(head -1 "$work/drop_$drop.cmp"))"
  fi
done
exit $failed
