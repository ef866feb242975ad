#!/usr/bin/env bash
# Builds pipetrain and runs the whole test suite: a release build (with the GPU backend where
# the CUDA toolkit and NCCL are installed; its tests skip without a GPU), then a build with
# AddressSanitizer and UndefinedBehaviorSanitizer (CPU only), then a bounded libFuzzer run of
# the spec loader and the checkpoint reader (clang). Exits non-zero if anything fails.
#   bash scripts/test.sh                   everything
#   PT_TEST_FAST=1 bash scripts/test.sh    release build only
#   PT_FUZZ_SECONDS=N                      fuzzing time per target (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [ "${PT_TEST_FAST:-0}" != 1 ]; then
  # float-cast-overflow: gcc's "undefined" leaves out float-to-integer conversions out of range
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPT_CUDA=OFF \
    -DPT_SANITIZE=address,undefined,float-cast-overflow
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$jobs"
  bash scripts/fuzz.sh "${PT_FUZZ_SECONDS:-20}"
fi
