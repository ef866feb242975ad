#!/usr/bin/env bash
# tests/cli/gather_hf_full.sh PIPE_TRAIN: --gather-hf into a full file system (a 48 KiB tmpfs)
# ends with one line that names --gather-hf, its directory and the fix, not only the whole-model
# file it writes beside the directory first (issue 29's "names an internal file"). Needs root
# to mount the tmpfs (skipped otherwise).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root"
mkdir "$work/full"
mount -t tmpfs -o size=48k tmpfs "$work/full" 2>/dev/null || skip "cannot mount a tmpfs here"
pt_at_exit "umount '$work/full'"
rc=0
timeout 120 "$pipe_train" examples/llama.yaml --sequential --set train.steps=1 --quiet \
  --gather-hf "$work/full/out" 2>"$work/err" || rc=$?
[ "$rc" != 0 ] || fail "--gather-hf into a full file system exited 0"
[ "$(grep -c . "$work/err")" = 1 ] || fail "expected one line, got: $(cat "$work/err")"
grep -q -- "--gather-hf $work/full/out (.*free space there or name a directory elsewhere" \
  "$work/err" || fail "the line does not name --gather-hf, its directory and the fix: $(cat "$work/err")"
[ ! -e "$work/full/out" ] || fail "a partial $work/full/out was left behind"
echo "ok: $(cat "$work/err")"
