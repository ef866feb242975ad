#!/usr/bin/env bash
# bench/pipeline_speedup.sh [SPEC] [STEPS]: pipelined (2 ranks, one BLAS thread each) against
# sequential (one process, one thread) training throughput, in one run, for micro_batches 4, 8
# and 16. Prints each speedup beside the ideal 2M/(M+P-1) and each rank's idle fraction.
# Step times are medians over the steps after the first.
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-examples/gpt.yaml}
steps=${2:-4}
bin=${PIPE_TRAIN:-build/pipe_train}
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median_ms() { # metrics file -> median step_ms of steps 2..N
  python3 -c 'import json,statistics,sys; r=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][1:]; print(statistics.median(r))' "$1"
}
common=(--set pipeline.data_parallel=1 --set "train.steps=$steps" --set pipeline.partition=balanced)
printf '%-4s %10s %10s %8s %8s %7s  %s\n' M seq_ms pipe_ms speedup ideal "%ideal" "idle per stage"
for M in 4 8 16; do
  "$bin" "$spec" --sequential --quiet "${common[@]}" --set "train.micro_batches=$M" \
    --set pipeline.stages=1 --metrics "$work/seq.jsonl"
  # not --quiet: the end-of-run report has each stage's idle fraction
  idle=$(mpirun -np 2 --oversubscribe "$bin" "$spec" "${common[@]}" --set log.every=1000000 \
    --set "train.micro_batches=$M" --set pipeline.stages=2 --metrics "$work/pipe.jsonl" |
    grep -o 'idle [0-9.]*%' | tr '\n' ' ')
  s=$(median_ms "$work/seq.jsonl")
  p=$(median_ms "$work/pipe.jsonl")
  python3 -c 'import sys; M=int(sys.argv[1]); s=float(sys.argv[2]); p=float(sys.argv[3]); ideal=2*M/(M+1); sp=s/p; print(f"{M:<4d} {s:10.1f} {p:10.1f} {sp:8.3f} {ideal:8.3f} {100*sp/ideal:6.1f}%  {sys.argv[4]}")' "$M" "$s" "$p" "$idle"
done
