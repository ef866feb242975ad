#!/usr/bin/env bash
# Builds pipetrain and runs its tests. The default tier (README.md's test command) runs each
# feature once in two builds: the release build (with the GPU backend where the CUDA toolkit and
# NCCL are installed; its GPU tests run where a GPU is visible) and the GPU backend on the CUDA
# emulator (build-gpuemu, tests/gpu/emu: kernels, streams, cuBLAS and a fake NCCL on the CPU) for
# the GPU tests. The long tier (CI runs it after the default one) runs every other test of those
# two builds, then everything but release_only under AddressSanitizer + UndefinedBehaviorSanitizer
# (the GPU backend emulated too), then libFuzzer on the readers of untrusted input (clang).
# Exits non-zero if anything fails.
#
# Which tests a tier runs is decided by their ctest labels alone, set where each test is declared
# (tests/CMakeLists.txt, the gate tables tests/pipeline/gates.txt and tests/gpu/gates.txt):
#   fast          the default tier: each feature once (release and emulated GPU builds); every
#                 test without it runs in the long tier
#   release_only  never under the sanitizers (the release builds check those bits; memory errors
#                 show in the kept tests too)
#   gpu           the GPU backend's tests (tests/gpu), run in build-gpuemu
#   python        needs PT_PYTHON with torch and transformers (skipped, exit 77, without them)
#   kit           the GPU kit dry-run in a bare Debian (tests/kit/kit_check.sh; long, as root)
#
#   bash scripts/test.sh                     the default tier (README.md; about 6 minutes on 2 cores)
#   PT_TEST_TIER=long bash scripts/test.sh   what the default tier leaves out (CI runs it after)
#   PT_TEST_TIER=all bash scripts/test.sh    both
#   PT_TEST_FAST=1                           the release build only
#   PT_FUZZ_SECONDS=N                        fuzzing time per target in the long tier (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${PT_TEST_TIER:-default}
case "$tier" in
  default | long | all) ;;
  *) echo "test.sh: PT_TEST_TIER='$tier': expected default, long or all" >&2; exit 2 ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)

in_default() { [ "$tier" != long ]; }
in_long() { [ "$tier" != default ]; }
tests() { local build=$1; shift; ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"; }

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
if in_default; then tests build -L fast; fi
if in_long; then tests build -LE fast; fi
[ "${PT_TEST_FAST:-0}" = 1 ] && exit 0

cmake -S . -B build-gpuemu -DCMAKE_BUILD_TYPE=Release -DPT_GPU_EMULATION=ON
cmake --build build-gpuemu -j "$jobs"
if in_default; then tests build-gpuemu -L gpu -L fast; fi # both labels (repeated -L: CMake >= 3.21)
if in_long; then tests build-gpuemu -L gpu -LE fast; fi
in_long || exit 0

# float-cast-overflow: gcc's "undefined" leaves out float-to-integer conversions out of range
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPT_GPU_EMULATION=ON \
  -DPT_SANITIZE=address,undefined,float-cast-overflow
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 tests build-asan -LE release_only

bash scripts/fuzz.sh "${PT_FUZZ_SECONDS:-120}"
