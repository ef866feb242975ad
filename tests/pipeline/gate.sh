#!/usr/bin/env bash
# gate.sh PIPE_TRAIN NP "REF_SETTINGS" "RUN_SETTINGS" [--exact] [SPEC]: trains SPEC
# (tests/pipeline/gate.yaml) sequentially with REF_SETTINGS and with `mpirun -np NP` with
# RUN_SETTINGS (space-separated KEY=VALUE), then compares losses and final parameters
# (compare_runs.py; --exact: tied weights and losses bitwise too). One BLAS thread everywhere,
# so both sides run the same GEMM code paths.
set -euo pipefail
pipe_train=$1 np=$2 ref_sets=$3 run_sets=$4 exact=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
spec=${6:-$here/gate.yaml}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sets() { for kv in $1; do printf -- '--set\n%s\n' "$kv"; done; }
mapfile -t ref_args < <(sets "$ref_sets")
mapfile -t run_args < <(sets "$run_sets")
"$pipe_train" "$spec" --sequential --quiet "${ref_args[@]}" \
  --metrics "$work/ref.jsonl" --dump-params "$work/ref"
timeout 240 mpirun -np "$np" --oversubscribe "$pipe_train" "$spec" --quiet \
  "${run_args[@]}" --metrics "$work/run.jsonl" --dump-params "$work/run"
python3 "$here/compare_runs.py" "$work/ref.jsonl" "$work/ref" "$work/run.jsonl" "$work/run" "$np" \
  $exact
