#!/usr/bin/env bash
# output_paths.sh PIPE_TRAIN: every output path is checked before step 1 (nothing trains, then
# fails at the end): a part over 255 bytes, a file whose directory is missing or is a file, a
# read-only directory. Each: exit 2, one line naming the option and the path.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
long=$(printf 'x%.0s' $(seq 300))
touch "$work/plain"
mkdir "$work/ro"
chmod 555 "$work/ro"

# expect OPTION WHY ARGS...: the run refuses at once with one line naming OPTION
expect() {
  local opt=$1 why=$2 rc
  shift 2
  set +e
  timeout 60 "$pipe_train" "$spec" --quiet --set train.steps=3 --metrics "$work/m.jsonl" "$@" \
    >"$work/out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$opt ($why): exit $rc (want 2): $(head -c 600 "$work/out")"
  [ "$(wc -l <"$work/out")" = 1 ] || fail "$opt ($why): not one line: $(cat "$work/out")"
  grep -q -- "$opt" "$work/out" || fail "$opt ($why): the line does not name it: $(cat "$work/out")"
  [ ! -s "$work/m.jsonl" ] || fail "$opt ($why): it trained before refusing"
  echo "$opt ($why): $(cut -c1-140 "$work/out")"
}

for opt in --save --gather --dump-params; do
  expect "$opt" "a 300-byte name" "$opt" "$work/$long"
done
expect train.checkpoint.dir "a 300-byte name" --set "train.checkpoint={dir: $work/$long, every: 1}"
expect --gather "missing directory" --gather "$work/nowhere/model.safetensors"
expect --gather "directory is a file" --gather "$work/plain/model.safetensors"
expect --dump-params "missing directory" --dump-params "$work/nowhere/params"
if [ "$(id -u)" != 0 ]; then # root writes anywhere
  expect --gather "read-only directory" --gather "$work/ro/model.safetensors"
fi
set +e
timeout 60 "$pipe_train" "$spec" --quiet --set train.steps=1 --metrics "$work/$long.jsonl" \
  >"$work/out" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- --metrics "$work/out" || fail "--metrics (a 300-byte name): exit $rc: $(cat "$work/out")"
mpi_rc=0
timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
  --set train.steps=3 --trace "$work/$long.json" >"$work/out" 2>&1 || mpi_rc=$?
[ "$mpi_rc" = 2 ] && grep -q -- "--trace" "$work/out" ||
  fail "--trace (a 300-byte name): exit $mpi_rc: $(cat "$work/out")"
echo "--trace (a 300-byte name): refused before training"
echo "output_paths: all checks passed"
