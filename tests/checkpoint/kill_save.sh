#!/usr/bin/env bash
# kill_save.sh PIPE_TRAIN: a process killed with SIGKILL at any moment, saves included, leaves a
# checkpoint root that `pipe_train --load ROOT` resumes from (the newest complete checkpoint).
#
# Part 1 (random): a sequential run of tests/pipeline/gate.yaml with a checkpoint after every
#   step (keep 3) is killed -9 at random moments, restarted from `--load ROOT` and killed again
#   (ROUNDS times). After each kill: the newest step-N with a manifest has files whose CRC-32 and
#   sizes match its manifest, at most keep+1 complete checkpoints exist, the newest step never
#   goes back, and `pipe_train --load ROOT --set train.steps=N+1` trains exactly step N+1.
#   KILL_SEED=S repeats a sequence of moments.
# Part 2 (exact moments, needs strace; skipped without it): the process is killed at the k-th
#   rename(2) or unlink(2) (strace -e inject=...:signal=KILL), i.e. between the steps of a save:
#   (A) periodic saves: --load ROOT resumes from the newest complete step (or, before the first
#       complete one, is refused with exit 2 and one line);
#   (B) `--load CK --save CK` (saving over the checkpoint it resumed from): CK must still load;
#   (C) pruning (keep 1): every step-N that still has a manifest must load.
set -euo pipefail
pipe_train=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
spec=tests/pipeline/gate.yaml
bg=""
pt_at_exit 'if [[ -n $bg ]]; then kill -9 "$bg" 2>/dev/null || true; wait "$bg" 2>/dev/null || true; fi'
trap 'exit 143' TERM INT # through the EXIT trap: the background run is killed too
start=$SECONDS
seed=${KILL_SEED:-$$}
RANDOM=$seed
rounds=${ROUNDS:-6}

cat >"$work/state.py" <<'EOF'
"""state.py ROOT KEEP: prints the newest complete step (-1 if none) after checking that its files
match the manifest and that at most KEEP+1 complete checkpoints exist."""
import json, os, re, sys, zlib
root, keep = sys.argv[1], int(sys.argv[2])
complete, incomplete = [], []
for d in sorted(os.listdir(root)):
    m = re.fullmatch(r"step-(\d+)", d)
    if m:
        (complete if os.path.exists(os.path.join(root, d, "manifest.json")) else incomplete).append(int(m.group(1)))
if len(complete) > keep + 1:
    sys.exit(f"{root}: {len(complete)} complete checkpoints {complete}, keep is {keep}")
if not complete:
    print(-1, 0)
    sys.exit(0)
newest = max(complete)
d = os.path.join(root, f"step-{newest:08d}")
man = json.load(open(os.path.join(d, "manifest.json")))
if man["step"] != newest:
    sys.exit(f"{d}: the manifest says step {man['step']}")
for f in man["files"]:
    blob = open(os.path.join(d, f["name"]), "rb").read()
    if zlib.crc32(blob) != f["crc32"] or len(blob) != f["bytes"]:
        sys.exit(f"{d}/{f['name']}: CRC-32/size do not match the manifest")
print(newest, len(incomplete) + sum(1 for c in complete for f in os.listdir(os.path.join(root, f"step-{c:08d}")) if ".tmp." in f))
EOF

# resume_one ROOT_OR_DIR STEP LABEL: --load resumes at STEP and trains exactly step STEP+1.
resume_one() {
  local path=$1 step=$2 label=$3 code=0
  timeout 60 "$pipe_train" "$spec" --sequential --quiet --load "$path" \
    --set train.steps=$((step + 1)) --metrics "$work/one.jsonl" >"$work/one.out" 2>&1 || code=$?
  [[ $code == 0 ]] || fail "$label: pipe_train --load $path exited $code: $(cat "$work/one.out")"
  local got
  got=$(python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1])))' "$work/one.jsonl")
  [[ $got == "$((step + 1))" ]] ||
    fail "$label: --load $path should resume at step $step and train step $((step + 1)); it trained step(s) '$got'"
}

echo "== part 1: random kills of a run that saves every step (seed $seed, $rounds rounds)"
root=$work/root
ckpt="train.checkpoint={dir: $root, every: 1, keep: 3}"
last=-1 torn=0
for round in $(seq 1 "$rounds"); do
  load=()
  [[ $round == 1 ]] || load=(--load "$root")
  # Not under timeout: the kill must hit pipe_train itself. 3000 steps (~1.5 min) bound it even
  # if this script dies without its trap.
  "$pipe_train" "$spec" --sequential --quiet --set train.steps=3000 --set "$ckpt" "${load[@]}" \
    >"$work/bg.out" 2>&1 &
  bg=$!
  if [[ $round == 1 ]]; then # the first kill comes after the first complete checkpoint
    for _ in $(seq 1 200); do
      compgen -G "$root/step-*/manifest.json" >/dev/null && break
      kill -0 "$bg" 2>/dev/null || break
      sleep 0.05
    done
  fi
  delay=$(printf '0.%03d' $((50 + RANDOM % 650)))
  sleep "$delay"
  kill -0 "$bg" 2>/dev/null || fail "round $round: the training run ended before the kill: $(cat "$work/bg.out")"
  kill -9 "$bg"
  wait "$bg" 2>/dev/null || true
  bg=""
  read -r newest leftovers < <(python3 "$work/state.py" "$root" 3) || fail "round $round: bad checkpoint root state"
  [[ $newest -ge 0 ]] || fail "round $round: no complete checkpoint under $root after the kill"
  [[ $newest -ge $last ]] || fail "round $round: newest complete step went back from $last to $newest"
  [[ $leftovers == 0 ]] || torn=$((torn + 1))
  resume_one "$root" "$newest" "round $round"
  echo "ok: round $round: killed after ${delay}s; newest complete step $newest (CRC ok)," \
    "$leftovers incomplete dir(s)/temp file(s) left; --load ROOT trained step $((newest + 1))"
  last=$newest
done
echo "   ($torn of $rounds kills left a save half-done behind)"

if ! command -v strace >/dev/null || ! strace -o /dev/null true 2>/dev/null; then
  echo "== part 2 skipped: strace is missing or cannot trace here"
  echo "checkpoint kill_save: part 1 passed in $((SECONDS - start)) s"
  exit 0
fi

# killed_at SYSCALL K ARGS...: runs pipe_train ARGS and kills it at its K-th SYSCALL.
killed_at() {
  local sc=$1 k=$2 code=0
  shift 2
  ( # a subshell, so that the shell's "Killed" notice goes to /dev/null
    timeout 60 strace -f -o /dev/null -e trace="$sc" -e inject="$sc":signal=KILL:when="$k" \
      "$pipe_train" "$spec" --sequential --quiet "$@" >"$work/inj.out" 2>&1
    exit $?
  ) 2>/dev/null || code=$?
  [[ $code != 0 ]] || fail "the kill at $sc #$k never happened (the run ended normally)"
}

echo "== part 2 (A): killed at the k-th rename of periodic saves (3 per save)"
for k in 1 2 3 4 5 6; do
  r=$work/A$k
  killed_at rename "$k" --set train.steps=3 --set "train.checkpoint={dir: $r, every: 1, keep: 2}"
  read -r newest _ < <(python3 "$work/state.py" "$r" 2) || fail "(A) k=$k: bad checkpoint root state"
  if [[ $newest -lt 0 ]]; then
    code=0
    timeout 60 "$pipe_train" "$spec" --sequential --quiet --load "$r" >"$work/a.out" 2>&1 || code=$?
    if [[ $code != 2 || $(awk 'END { print NR }' "$work/a.out") != 1 ]] ||
      ! grep -q "not a checkpoint" "$work/a.out"; then
      fail "(A) k=$k: nothing complete yet: --load should exit 2 with one 'not a checkpoint' line; got $code: $(cat "$work/a.out")"
    fi
    echo "ok: (A) rename #$k: no complete checkpoint yet; --load ROOT refused (exit 2, one line)"
  else
    resume_one "$r" "$newest" "(A) rename #$k"
    echo "ok: (A) rename #$k: --load ROOT resumed at step $newest"
  fi
done

echo "== part 2 (B): --load CK --save CK killed at the k-th rename"
"$pipe_train" "$spec" --sequential --quiet --set train.steps=3 --save "$work/good" || fail "writing a checkpoint"
for k in 1 2 3; do
  rm -rf "$work/B"
  cp -r "$work/good" "$work/B"
  killed_at rename "$k" --set train.steps=4 --load "$work/B" --save "$work/B"
  code=0
  timeout 60 "$pipe_train" "$spec" --sequential --quiet --load "$work/B" --set train.steps=5 \
    >"$work/b.out" 2>&1 || code=$?
  [[ $code == 0 ]] || fail "(B) rename #$k: a save over the checkpoint it resumed from, killed" \
    "between its renames, destroyed it: pipe_train --load CK exited $code: $(cat "$work/b.out")" \
    "(CK now holds: $(ls "$work/B" | tr '\n' ' '))"
  echo "ok: (B) rename #$k: CK still loads"
done

echo "== part 2 (C): pruning (keep 1) killed at the k-th unlink"
for k in 1 2 3; do
  r=$work/C$k
  killed_at unlink "$k" --set train.steps=3 --set "train.checkpoint={dir: $r, every: 1, keep: 1}"
  for d in "$r"/step-*; do
    [[ -e $d/manifest.json ]] || continue
    s=$((10#${d##*step-}))
    code=0
    timeout 60 "$pipe_train" "$spec" --sequential --quiet --load "$d" --set train.steps=$((s + 1)) \
      >"$work/c.out" 2>&1 || code=$?
    [[ $code == 0 ]] || fail "(C) unlink #$k: $d has a manifest (so it counts as a complete" \
      "checkpoint) but does not load: exit $code: $(cat "$work/c.out") (it holds: $(ls "$d" | tr '\n' ' '))"
  done
  echo "ok: (C) unlink #$k: every step-N with a manifest loads ($(cd "$r" && ls -d step-* | tr '\n' ' '))"
done

echo "checkpoint kill_save: all checks passed in $((SECONDS - start)) s"
