#!/usr/bin/env bash
# leftovers.sh PIPE_TRAIN: what interrupted saves and prunes leave behind is never lost and
# never kept forever (found by scripts/soak.py). Needs strace (skipped, exit 77, without it).
#   (a) SIGTERM right after a periodic save of step N, then SIGKILL during what would be the
#       preemption save: step N's checkpoint is not saved twice, so it survives and stays the
#       newest (it used to be renamed to step-N.previous and rewritten, and lost when killed)
#   (b) a step-N.previous left beside an incomplete step-N stands in for step N: --load ROOT
#       resumes at N + 1
#   (c) a prune killed half-way leaves an incomplete step-N; the next prune deletes it
pipe_train=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
command -v strace >/dev/null || skip "strace is not installed"
spec=tests/pipeline/gate.yaml
first_step() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["step"])' "$1"; }

# (a) renames 1..8 are the first two saves' files; the 9th, step 3's manifest, raises SIGTERM;
# a second save of step 3 would start with mkdir, the 16th, which is killed
root=$work/a
strace -f -o /dev/null -e trace=rename,mkdir -e inject=rename:signal=TERM:when=9 \
  -e inject=mkdir:signal=KILL:when=16 "$pipe_train" "$spec" --sequential --quiet \
  --set train.steps=10 --set "train.checkpoint={dir: $root, every: 1, keep: 2}" >"$work/a.out" 2>&1 ||
  fail "(a) the preempted run exited $?: $(cat "$work/a.out")"
grep -q "preempted after step 3" "$work/a.out" || fail "(a) not preempted after step 3: $(cat "$work/a.out")"
[[ -f $root/step-00000003/manifest.json && ! -e $root/step-00000003.previous ]] ||
  fail "(a) step 3 was saved again: $(ls "$root")"
"$pipe_train" "$spec" --sequential --quiet --load "$root" --set train.steps=4 --metrics "$work/a.jsonl"
[[ $(first_step "$work/a.jsonl") == 4 ]] || fail "(a) --load ROOT did not resume at step 4"
echo "ok: (a) a preemption right after a periodic save keeps that checkpoint"

# (b) step 3 set aside whole, its new save cut short
root=$work/b
mkdir -p "$root"
cp -r "$work/a/step-00000003" "$root/step-00000003.previous"
mkdir "$root/step-00000003"
cp -r "$work/a/step-00000002" "$root/"
"$pipe_train" "$spec" --sequential --quiet --load "$root" --set train.steps=4 --metrics "$work/b.jsonl"
[[ $(first_step "$work/b.jsonl") == 4 ]] || fail "(b) step-3.previous was not used"
echo "ok: (b) step-N.previous stands in for an incomplete step-N"

# (c) the 4th unlink is inside the first prune (step 1's files, its manifest already gone)
root=$work/c
strace -f -o /dev/null -e trace=unlink -e inject=unlink:signal=KILL:when=4 "$pipe_train" "$spec" \
  --sequential --quiet --set train.steps=3 --set "train.checkpoint={dir: $root, every: 1, keep: 1}" \
  >/dev/null 2>&1 && fail "(c) the run was not killed"
[[ -d $root/step-00000001 && ! -f $root/step-00000001/manifest.json ]] ||
  fail "(c) the kill did not leave an incomplete step 1: $(ls "$root")"
"$pipe_train" "$spec" --sequential --quiet --load "$root" --set train.steps=4 \
  --set "train.checkpoint={dir: $root, every: 1, keep: 1}"
[[ $(cd "$root" && echo *) == step-00000004 ]] || fail "(c) left behind: $(ls "$root")"
echo "ok: (c) the next prune deletes what an interrupted prune left"
