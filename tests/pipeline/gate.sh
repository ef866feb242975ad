#!/usr/bin/env bash
# gate.sh PIPE_TRAIN NP "REF_SETTINGS" "RUN_SETTINGS" [--exact] [SPEC]: trains SPEC
# (tests/pipeline/gate.yaml) sequentially with REF_SETTINGS and with `mpirun -np NP` with
# RUN_SETTINGS (space-separated KEY=VALUE), then compares losses and final parameters
# (compare_runs.py; --exact: tied weights and losses bitwise too). One BLAS thread everywhere
# (tests/lib.sh), so both sides run the same GEMM code paths. The gates: tests/pipeline/gates.txt.
pipe_train=$1 np=$2 ref_sets=$3 run_sets=$4
shift 4
exact=
if [ "${1:-}" = --exact ]; then exact=--exact; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
spec=${1:-$here/gate.yaml}
source "$here/../lib.sh"
sets() { for kv in $1; do printf -- '--set\n%s\n' "$kv"; done; }
mapfile -t ref_args < <(sets "$ref_sets")
mapfile -t run_args < <(sets "$run_sets")
"$pipe_train" "$spec" --sequential --quiet "${ref_args[@]}" \
  --metrics "$work/ref.jsonl" --dump-params "$work/ref"
pt_mpirun "$np" "$pipe_train" "$spec" --quiet \
  "${run_args[@]}" --metrics "$work/run.jsonl" --dump-params "$work/run"
python3 "$here/compare_runs.py" "$work/ref.jsonl" "$work/ref" "$work/run.jsonl" "$work/run" "$np" \
  $exact
