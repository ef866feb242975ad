#!/usr/bin/env bash
# gate.sh PIPE_TRAIN NP "REF_SETTINGS" "RUN_SETTINGS": trains tests/pipeline/gate.yaml
# sequentially with REF_SETTINGS and with `mpirun -np NP` with RUN_SETTINGS (space-separated
# KEY=VALUE), then compares losses and final parameters (compare_runs.py). One BLAS thread
# everywhere, so both sides run the same GEMM code paths.
set -euo pipefail
pipe_train=$1 np=$2 ref_sets=$3 run_sets=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sets() { for kv in $1; do printf -- '--set\n%s\n' "$kv"; done; }
mapfile -t ref_args < <(sets "$ref_sets")
mapfile -t run_args < <(sets "$run_sets")
"$pipe_train" "$here/gate.yaml" --sequential --quiet "${ref_args[@]}" \
  --metrics "$work/ref.jsonl" --dump-params "$work/ref"
timeout 240 mpirun -np "$np" --oversubscribe "$pipe_train" "$here/gate.yaml" --quiet \
  "${run_args[@]}" --metrics "$work/run.jsonl" --dump-params "$work/run"
python3 "$here/compare_runs.py" "$work/ref.jsonl" "$work/ref" "$work/run.jsonl" "$work/run" "$np"
