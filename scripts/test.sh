#!/usr/bin/env bash
# Builds pipetrain and runs the whole test suite twice: a release build, then a build with
# AddressSanitizer and UndefinedBehaviorSanitizer. Exits non-zero if any test fails.
#   bash scripts/test.sh            both builds
#   PT_TEST_FAST=1 bash scripts/test.sh   release build only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [ "${PT_TEST_FAST:-0}" != 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPT_SANITIZE=address,undefined
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi
