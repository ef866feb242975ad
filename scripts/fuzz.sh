#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer) of the
# readers of input pipetrain does not control: the YAML spec loader (tests/fuzz/fuzz_spec.c), the
# checkpoint reader, manifest and safetensors (tests/fuzz/fuzz_checkpoint.c), schedule files
# (tests/fuzz/fuzz_schedule.c) and Hugging Face config.json and index files (tests/fuzz/fuzz_hf.c).
# Each promises one error message for any bad input, never a crash, an exit or a leak; this
# searches for inputs that break that promise. See docs/fuzzing.md.
#
#   bash scripts/fuzz.sh [SECONDS]           fuzz each target for SECONDS (default 30)
#   bash scripts/fuzz.sh --merge [SECONDS]   then add the new inputs that reach new code to the
#                                            committed corpus, tests/fuzz/corpus/<target>
#
# Builds build-fuzz (CC=clang -DPT_FUZZ=ON, RelWithDebInfo) and runs each target from the
# committed corpus and crashers. What a run finds stays in build-fuzz/fuzz-work/<target>/: new/
# (new inputs; the committed corpus only changes with --merge), artifacts/ (crashes, leaks,
# timeouts), fuzz.log. Exits 1 if a target found a problem, printing the input and the commands
# that replay it; 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bash scripts/fuzz.sh [--merge] [SECONDS]" >&2; exit 2; }
merge=0
seconds=30
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    '' | *[!0-9]*) usage ;;
    *) seconds=$arg ;;
  esac
done
[ "$seconds" -gt 0 ] || usage

command -v clang >/dev/null ||
  { echo "fuzz.sh: libFuzzer needs clang (apt-get install clang)" >&2; exit 2; }
grep -q '^add_subdirectory(fuzz)' tests/CMakeLists.txt ||
  { echo "fuzz.sh: tests/CMakeLists.txt does not add_subdirectory(fuzz)" >&2; exit 2; }

# One BLAS thread, as in the tests; nothing on these paths calls BLAS or MPI (no MPI_Init).
export OPENBLAS_NUM_THREADS=1
build=build-fuzz
jobs=$(nproc 2>/dev/null || echo 2)
# The fuzz targets only need the CPU library: the GPU backend (nvcc) stays out of this build.
mkdir -p "$build"
{ CC=clang cmake -S . -B "$build" -DPT_FUZZ=ON -DPT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  cmake --build "$build" -j "$jobs" --target fuzz_spec fuzz_checkpoint fuzz_schedule fuzz_hf; } >"$build/fuzz-build.log" 2>&1 ||
  { tail -n 30 "$build/fuzz-build.log" >&2; echo "fuzz.sh: the build failed: $build/fuzz-build.log" >&2; exit 1; }

# fuzz TARGET CORPUS_NAME MAX_LEN: runs one target; returns its exit status.
fuzz() {
  local target=$1 name=$2 max_len=$3
  local dir=$build/fuzz-work/$name
  rm -rf "$dir/artifacts" "$dir/tmp"
  mkdir -p "$dir/new" "$dir/artifacts" "$dir/tmp"
  echo "fuzz.sh: $target for ${seconds}s (log: $dir/fuzz.log)"
  local rc=0
  # New inputs go to the first directory only; the committed ones are read, never written.
  # TMPDIR: fuzz_checkpoint writes its checkpoints there, and a crashed run leaves them behind.
  TMPDIR=$(realpath "$dir/tmp") "$build/tests/fuzz/$target" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -artifact_prefix="$dir/artifacts/" \
    -print_final_stats=1 "$dir/new" "tests/fuzz/corpus/$name" "tests/fuzz/crashers/$name" \
    >"$dir/fuzz.log" 2>&1 || rc=$?
  local runs speed
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/fuzz.log")
  echo "fuzz.sh: $target: ${runs:-?} inputs, ${speed:-?} exec/s, $(ls "$dir/new" | wc -l) in $dir/new"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: $target FAILED (exit $rc); the end of $dir/fuzz.log:" >&2
    grep -v '^"' "$dir/fuzz.log" | tail -n 25 >&2
    # The target's own words (fuzz_die's "TARGET: what: detail"), which the stack trace pushes
    # out of the tail above.
    grep -a "^$target: " "$dir/fuzz.log" | tail -n 3 | sed 's/^/fuzz.sh: said: /' >&2 || true
    local input
    for input in "$dir"/artifacts/*; do
      [ -e "$input" ] || continue
      echo "fuzz.sh: input: $input" >&2
      # The input itself, so that a log from a machine whose files are gone (CI) replays it:
      # base64 -d > FILE.
      if [ "$(wc -c <"$input")" -le 16384 ]; then
        echo "  base64 (base64 -d > FILE):" >&2
        base64 -w 100 "$input" | sed 's/^/    /' >&2
      fi
      echo "  replay:   $build/tests/fuzz/$target $input" >&2
      echo "  or:       cmake --build $build --target ${target}_replay &&" \
           "$build/tests/fuzz/${target}_replay $input" >&2
      echo "  once fixed, keep it: cp $input tests/fuzz/crashers/$name/WHAT-IT-BROKE" >&2
    done
  fi
  return "$rc"
}

failed=0
fuzz fuzz_spec spec 16384 || failed=1
fuzz fuzz_checkpoint checkpoint 8192 || failed=1
fuzz fuzz_schedule schedule 8192 || failed=1
fuzz fuzz_hf hf 8192 || failed=1
[ "$failed" -eq 0 ] || exit 1

# merge NAME: the committed corpus keeps its named, hand-made seeds as they are; earlier finds
# (libFuzzer names them by their SHA-1) are minimised again together with this run's new inputs,
# so the corpus holds what reaches code the seeds do not, and no more. -merge=1 copies into the
# first directory only the inputs of the others that add coverage; edge coverage alone
# (-use_counters=0) keeps the committed corpus small.
merge() {
  local name=$1
  local corpus=tests/fuzz/corpus/$name dir=$build/fuzz-work/$name
  local into=$dir/merge-into finds=$dir/merge-finds f
  rm -rf "$into" "$finds"
  mkdir -p "$into" "$finds"
  for f in "$corpus"/*; do
    if [[ $(basename "$f") =~ ^[0-9a-f]{40}$ ]]; then cp "$f" "$finds/"; else cp "$f" "$into/"; fi
  done
  local before
  before=$(ls "$corpus" | wc -l)
  TMPDIR=$(realpath "$dir/tmp") "$build/tests/fuzz/fuzz_$name" -merge=1 -use_counters=0 \
    -timeout=10 -rss_limit_mb=2048 "$into" "$finds" "$dir/new" >"$dir/merge.log" 2>&1 ||
    { echo "fuzz.sh: merging into $corpus failed: see $dir/merge.log" >&2; return 1; }
  find "$corpus" -maxdepth 1 -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
  for f in "$into"/*; do
    if [[ $(basename "$f") =~ ^[0-9a-f]{40}$ ]]; then cp "$f" "$corpus/"; fi
  done
  local files bytes
  files=$(ls "$corpus" | wc -l)
  bytes=$(cat "$corpus"/* | wc -c)
  echo "fuzz.sh: $corpus: $before -> $files inputs, $bytes bytes"
  # what a repository should carry: review (git diff --stat) before committing a larger one
  if [ "$files" -ge 200 ] || [ "$bytes" -ge 150000 ]; then
    echo "fuzz.sh: warning: $corpus is over its budget (200 files, 150 KB)" >&2
  fi
}

if [ "$merge" -eq 1 ]; then
  merge spec
  merge checkpoint
  merge schedule
  merge hf
fi
