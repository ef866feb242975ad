#!/usr/bin/env bash
# overlap_order.sh PIPE_TRAIN [STAGES DROP VALUES [--set K=V ...]]: a stream ordering is both
# present and needed. tests/pipeline/gate.yaml in STAGES (2) stages over the fake NCCL, 2 steps,
# with the settings given, against the sequential run on one emulated GPU:
#   - with the ordering, under stream interleavings where the streams run in any order their
#     dependencies allow (PT_EMU_STREAMS=random, each block's threads in random order too;
#     lazy: a stream runs only when something waits for it): bit for bit equal;
#   - with the ordering dropped, DROP=V for each word V of VALUES (emulated builds only), under
#     lazy streams: NOT equal (a step has no host wait left to order things by chance).
# The default, DROP PT_EMU_COMM_UNORDERED, VALUES "ready done": the NCCL transport's ordering
# (docs/gpu.md, "Overlap"); ready drops the communication stream's wait for the buffers'
# producers, done the compute stream's wait for the transfers, so the emulator runs a send
# before the kernel that writes its buffer, or a consumer before its receive landed.
# PT_EMU_OFFLOAD_UNORDERED 1 with pipeline.offload: the compute stream's waits for the offload
# copies (engine/stage_offload.h): a backward reads a frame its prefetch has not filled yet.
pipe_train=$(realpath "$1")
stages=${2:-2} drop=${3:-PT_EMU_COMM_UNORDERED} values=${4:-ready done}
shift $(($# < 4 ? $# : 4))
source "$(dirname "$0")/../lib.sh"
export PT_EMU_DEVICES=$stages PT_EMU_NCCL_TIMEOUT=${PT_EMU_NCCL_TIMEOUT:-20}
spec=tests/pipeline/gate.yaml
common=(--quiet --set pipeline.device=gpu --set train.steps=2)
"$pipe_train" "$spec" --sequential "${common[@]}" --metrics "$work/ref.jsonl" \
  --dump-params "$work/ref"
run() { # NAME ENV...: STAGES stages over NCCL under ENV; 0 when bit for bit equal to the reference
  local name=$1
  shift
  env "$@" timeout 240 mpirun -np "$stages" --oversubscribe "$pipe_train" "$spec" \
    "${common[@]}" --set comm.backend=nccl --set pipeline.stages="$stages" "${sets[@]}" \
    --metrics "$work/$name.jsonl" --dump-params "$work/$name"
  python3 tests/pipeline/compare_runs.py "$work/ref.jsonl" "$work/ref" "$work/$name.jsonl" \
    "$work/$name" "$stages" --exact >"$work/$name.cmp" 2>&1
}
sets=("$@")
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
for v in $values; do
  if run "drop_$v" "$drop=$v" PT_EMU_STREAMS=lazy; then
    echo "FAIL: $drop=$v still bit for bit equal: the emulator misses it"
    failed=1
  else
    echo "$drop=$v: differs, as it must ($(head -1 "$work/drop_$v.cmp"))"
  fi
done
exit $failed
