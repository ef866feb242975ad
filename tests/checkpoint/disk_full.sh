#!/usr/bin/env bash
# disk_full.sh PIPE_TRAIN ENOSPC_SHIM: a disk that fills up, and a checkpoint directory that
# cannot be written, cost nothing the user had.
#
# The "disk" is a 6 MiB tmpfs when this machine lets us mount one (root), else ENOSPC_SHIM
# (LD_PRELOAD) makes writes under one directory fail the same way past 6 MiB; DISK_FULL_MODE=shim
# forces the latter. A checkpoint of tests/pipeline/gate.yaml takes 3.7 MiB, so the first fits
# and every later one runs out of room part-way.
#   (a) periodic checkpoints every 2 steps, sequential and on 2 stages: the run finishes (exit 0),
#       warns "No space left on device" and that training goes on; the failed saves leave no
#       directories behind; its --gather output equals a run without checkpoints bitwise (the
#       training state stayed valid); step-2 is still the newest checkpoint and loads
#   (b) --load CK --save CK on the full disk (sequential and 2 stages): exit 1 with the reason,
#       and CK still holds step 2 and loads
#   (c) an unwritable checkpoint directory (a path through a regular file) is refused before
#       training with exit 2 and one line, for --save, train.checkpoint.dir and --gather
set -euo pipefail
pipe_train=$(realpath "$1") shim=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
spec=tests/pipeline/gate.yaml
disk=$work/disk
mkdir -p "$disk"
mounted=0
pt_at_exit 'if [[ $mounted == 1 ]]; then umount "$disk" 2>/dev/null || true; fi'

limit=$((6 * 1024 * 1024))
if [[ ${DISK_FULL_MODE:-auto} != shim ]] && mount -t tmpfs -o size=$limit tmpfs "$disk" 2>/dev/null; then
  mounted=1
  echo "disk: a ${limit}-byte tmpfs"
  with_disk() { "$@"; }
else
  echo "disk: $shim (writes under $disk fail past $limit bytes)"
  # ASan wants its runtime first among the libraries; the shim has to come first to wrap write.
  with_disk() {
    LD_PRELOAD=$shim PT_ENOSPC_DIR=$disk PT_ENOSPC_BYTES=$limit \
      ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0 "$@"
  }
fi

steps=8
run_seq() { with_disk "$pipe_train" "$spec" --quiet --set train.steps=$steps "$@"; }
run_pp() {
  with_disk mpirun -np 2 --oversubscribe -x LD_PRELOAD -x PT_ENOSPC_DIR -x PT_ENOSPC_BYTES \
    "$pipe_train" "$spec" --quiet --set train.steps=$steps --set pipeline.stages=2 "$@"
}
# The two layouts give bitwise the same parameters (tests/pipeline/gate.sh), so one reference.
"$pipe_train" "$spec" --quiet --set train.steps=$steps --gather "$work/ref.safetensors"

resumes() { # CK: a checkpoint at step 2 that trains on to step 3
  grep -Eq '"step":[[:space:]]*2,' "$1/manifest.json" || fail "$1: not the step-2 checkpoint"
  "$pipe_train" "$spec" --quiet --set train.steps=3 --load "$1" >/dev/null 2>"$work/resume.err" ||
    fail "$1 does not load: $(cat "$work/resume.err")"
}

for layout in seq pp; do
  root=$disk/$layout
  set +e
  run_$layout --set "train.checkpoint={dir: $root, every: 2, keep: 1}" \
    --gather "$work/$layout.safetensors" >"$work/out" 2>"$work/err"
  code=$?
  set -e
  [[ $code == 0 ]] || fail "($layout) periodic saves on a full disk: exit $code: $(cat "$work/err")"
  grep -q "No space left on device" "$work/err" || fail "($layout) no ENOSPC reason: $(cat "$work/err")"
  grep -q "training goes on with its state intact" "$work/err" || fail "($layout) no 'training goes on'"
  left=$(cd "$root" && echo *)
  [[ $left == step-00000002 ]] || fail "($layout) $root holds '$left', expected only step-00000002"
  cmp -s "$work/ref.safetensors" "$work/$layout.safetensors" ||
    fail "($layout) the parameters differ from a run without checkpoints"
  resumes "$root/step-00000002"
  echo "ok: ($layout) periodic checkpoints on a full disk: warned, trained on, step 2 kept"

  ck=$root/step-00000002
  set +e
  run_$layout --set train.steps=4 --load "$ck" --save "$ck" >"$work/out" 2>"$work/err"
  code=$?
  set -e
  [[ $code == 1 ]] || fail "($layout) a final save on a full disk: exit $code, expected 1"
  grep -q "checkpoint $ck not written: .*No space left on device" "$work/err" ||
    fail "($layout) the reason is missing: $(cat "$work/err")"
  [[ ! -e $ck.previous ]] || fail "($layout) $ck.previous left behind"
  resumes "$ck"
  echo "ok: ($layout) --save over its own checkpoint on a full disk: exit 1, the checkpoint kept"
  rm -rf "$root" # the next layout starts on an empty disk
done

touch "$work/file"
expect_refused() { # WHAT ARGS...: exit 2 and one line naming WHAT and the fix
  local what=$1
  shift
  set +e
  "$pipe_train" "$spec" --quiet --set train.steps=1 "$@" >"$work/out" 2>"$work/err"
  local code=$?
  set -e
  [[ $code == 2 ]] || fail "$what through a file: exit $code, expected 2"
  [[ $(wc -l <"$work/err") == 1 ]] || fail "$what: expected one line, got: $(cat "$work/err")"
  grep -q -e "$what $work/file.*: cannot write there: $work/file: it is not a directory; choose a directory" "$work/err" ||
    fail "$what: unexpected message: $(cat "$work/err")"
}
expect_refused --save --save "$work/file/ck"
expect_refused train.checkpoint.dir --set "train.checkpoint={dir: $work/file/ck, every: 1}"
expect_refused --gather --gather "$work/file/model.safetensors"
echo "ok: unwritable checkpoint directories refused before training (exit 2, one line)"
