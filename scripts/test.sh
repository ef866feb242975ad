#!/usr/bin/env bash
# Builds pipetrain and runs the whole test suite: a release build (with the GPU backend where
# the CUDA toolkit and NCCL are installed; its GPU tests run where a GPU is visible), then the
# GPU backend on the CUDA emulator (tests/gpu/emu: kernels, streams, cuBLAS and a fake NCCL on
# the CPU) with every GPU test, then a build with AddressSanitizer and UndefinedBehaviorSanitizer
# (the GPU backend emulated too; further layouts of the bitwise gates, the long trainings and
# the second thread order left to the release builds: tests/CMakeLists.txt, release_only), then a bounded libFuzzer run of the spec loader and the checkpoint
# reader (clang). Exits non-zero if anything fails.
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
  cmake -S . -B build-gpuemu -DCMAKE_BUILD_TYPE=Release -DPT_GPU_EMULATION=ON
  cmake --build build-gpuemu -j "$jobs"
  ctest --test-dir build-gpuemu --output-on-failure -j "$jobs" -R '^gpu_'
  # float-cast-overflow: gcc's "undefined" leaves out float-to-integer conversions out of range
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPT_GPU_EMULATION=ON \
    -DPT_SANITIZE=address,undefined,float-cast-overflow
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$jobs" \
    -LE release_only \
    -E '^gpu_(train_parity|gate_|emu_counters|cuda_ops_random|precision_parity|overlap_order|dp_reduce_nccl|nonfinite)'
  bash scripts/fuzz.sh "${PT_FUZZ_SECONDS:-20}"
fi
