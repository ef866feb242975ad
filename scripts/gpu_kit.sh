#!/usr/bin/env bash
# scripts/gpu_kit.sh [OUTDIR]: builds pipetrain for a bare GPU machine (docs/gpu.md, "Running on
# a real GPU") and packs it as a relocatable kit: OUTDIR (default kit/, ignored by git) holds the
# build tree without objects, every shared library it needs but glibc's, libstdc++'s and
# CUDA's (those come from the machine's PyTorch wheels), Open MPI 4.1's launcher with its
# plugins and help files, env.sh and relocate.sh; pipetrain-kit.tar.gz beside it is what a
# device run carries. The build: Release, portable (-march=x86-64-v3, not the build machine's
# -march=native), sm_80 and sm_90, GPU tests registered although no GPU is visible here
# (-DPT_GPU_TESTS=ON), in build-kit/ (PT_KIT_BUILD to use another folder). With an emulated
# build at hand (build-gpuemu/, PT_KIT_EMU_BUILD) the kit also holds its ledger of GPT-2 small's
# step (emu_ledger.txt), which the check sets beside the GPU's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/kit}")
build=$(realpath -m "${PT_KIT_BUILD:-$root/build-kit}")
tarball=$(dirname "$out")/pipetrain-kit.tar.gz
for tool in patchelf ldd cmake; do
  command -v "$tool" >/dev/null || { echo "gpu_kit.sh: $tool missing; run scripts/install-deps.sh" >&2; exit 2; }
done
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPT_NATIVE=OFF \
  -DCMAKE_C_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES="80;90" -DPT_GPU_TESTS=ON \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"${PT_KIT_JOBS:-2}" >/dev/null
[[ -e $build/tests/gpu/CTestTestfile.cmake ]] && grep -q gpu_cuda_ops "$build/tests/gpu/CTestTestfile.cmake" ||
  { echo "gpu_kit.sh: $build has no GPU tests registered (no CUDA toolkit or NCCL found?)" >&2; exit 1; }

# OUTDIR is replaced whole: only when it is a kit already (or empty)
if [[ -d $out && -n $(ls -A "$out") && ! -f $out/env.sh ]]; then
  echo "gpu_kit.sh: $out exists and is no kit (no env.sh); name an empty or new folder" >&2
  exit 2
fi
rm -rf "$out"
mkdir -p "$out/lib" "$out/ompi/bin" "$out/pmix"
# The build tree less what only the build needs and the CPU tests' programs (half the kit's
# size; the CPU path is tested here); ctest and the test scripts run from it.
tar -C "$build" --exclude='./tests/test_*' --exclude=./tests/fuzz --exclude=CMakeFiles \
  --exclude='*.o' --exclude='*.a' --exclude='*.d' --exclude=Makefile --exclude=cmake_install.cmake \
  --exclude=CMakeCache.txt -cf - . |
  tar -C "$out" --one-top-level=build -xf -
# but the one CPU test program a gpu_ test runs: gpu_memory_estimate_bf16 (tests/gpu) is
# test_memory_estimate on the GPU
cp "$build/tests/test_memory_estimate" "$out/build/tests/"

# Open MPI's prefix, mirrored under ompi/ so that OPAL_PREFIX relocates every directory it
# derives from it (ompi_info --path all: plugins in lib/.../openmpi3, help in share/openmpi).
ompi_lib=$(dirname "$(dirname "$(realpath "$(command -v orterun)")")")/lib/x86_64-linux-gnu/openmpi/lib
plugins=$out/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
mkdir -p "$plugins" "$out/ompi/share"
cp "$(realpath "$(command -v orterun)")" "$out/ompi/bin/orterun"
ln -s orterun "$out/ompi/bin/mpirun"
ln -s orterun "$out/ompi/bin/mpiexec"
cp -r /usr/share/openmpi "$out/ompi/share/openmpi"
cp "$ompi_lib"/openmpi3/*.so "$plugins/"
cp /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so "$out/pmix/"
# Plugins for fabrics a one-node run never uses would bring their libraries (UCX, libfabric,
# verbs, PSM): dropped, with the shared-memory and TCP paths kept.
for so in "$plugins"/*.so "$out/pmix"/*.so; do
  if ldd "$so" | grep -E 'lib(ucp|ucs|uct|fabric|ibverbs|psm|psm2|psm_infinipath|infinipath|rdmacm|efa|mlx|hcoll|knem|xpmem|oshmem)[.-]' >/dev/null; then
    rm "$so"
  fi
done

# Every library the kit's programs and plugins load, but glibc's, the C++ runtime's and CUDA's
# (cuBLAS, cudart, NCCL, cuDNN, whose engines it loads at run time, hundreds of MB: the GPU
# machine's PyTorch wheels, env.sh).
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)[.-]'
mapfile -t elfs < <(find "$out/build" "$out/ompi/bin" "$plugins" "$out/pmix" -type f \
  \( -perm -u+x -o -name '*.so' \) -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
declare -A seen=()
for elf in "${elfs[@]}"; do
  while read -r name path; do
    [[ $name =~ $skip || -z $path || -n ${seen[$name]:-} ]] && continue
    seen[$name]=1
    cp -L "$path" "$out/lib/$name"
  done < <(ldd "$elf" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done
# RUNPATH relative to each file: $ORIGIN/<up to the kit>/lib
for elf in "${elfs[@]}" "$out"/lib/*; do
  rel=$(realpath --relative-to="$(dirname "$elf")" "$out/lib")
  patchelf --set-rpath "\$ORIGIN/$rel" "$elf"
done

# CTest files name absolute paths: kept as templates, relocate.sh fills them in where unpacked.
src_re=$(printf '%s' "$root" | sed 's/[.[\*^$|]/\\&/g')
build_re=$(printf '%s' "$build" | sed 's/[.[\*^$|]/\\&/g')
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE' "$build/CMakeCache.txt" | cut -d= -f2)
mpiexec_re=$(printf '%s' "$mpiexec" | sed 's/[.[\*^$|]/\\&/g')
find "$out/build" -name CTestTestfile.cmake | while read -r f; do
  sed -e "s|$build_re|@PT_KIT_BUILD@|g" -e "s|$src_re|@PT_SOURCE@|g" \
      -e "s|$mpiexec_re|@PT_MPIEXEC@|g" "$f" > "$f.in"
  rm "$f"
done
cp "$root/scripts/gpu_kit_env.sh" "$out/env.sh"
cat > "$out/relocate.sh" <<'EOF'
#!/usr/bin/env bash
# relocate.sh: writes the kit's CTest files for where it lies now (the source tree: its parent).
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$kit")
find "$kit/build" -name CTestTestfile.cmake.in | while read -r f; do
  sed -e "s|@PT_KIT_BUILD@|$kit/build|g" -e "s|@PT_SOURCE@|$src|g" \
      -e "s|@PT_MPIEXEC@|$kit/ompi/bin/mpiexec|g" "$f" > "${f%.in}"
done
EOF
chmod +x "$out/relocate.sh"
# PyYAML, pure Python, for bench/torch_gpt.py where the machine's PyTorch venv lacks it
pyyaml=$(python3 -c 'import os, yaml; print(os.path.dirname(yaml.__file__))' 2>/dev/null ||
  ls -d "$HOME"/.cache/pipetrain/venv/lib/python3*/site-packages/yaml 2>/dev/null | head -1 || true)
if [[ -n $pyyaml ]]; then
  mkdir -p "$out/py/yaml"
  cp "$pyyaml"/*.py "$out/py/yaml/"
fi
git -C "$root" rev-parse HEAD > "$out/commit" 2>/dev/null || echo unknown > "$out/commit"
# The emulator's ledger of the step the GPU's roofline times (bench/gpu_targets.sh), for the
# check's counters row (scripts/ledger_compare.py): where an emulated build is at hand
# (PT_KIT_EMU_BUILD, default build-gpuemu/), its gpu_roofline brought up to this tree first.
emu=${PT_KIT_EMU_BUILD:-$root/build-gpuemu}
if [[ -f $emu/CMakeCache.txt ]] &&
   cmake --build "$emu" --target gpu_roofline -j"${PT_KIT_JOBS:-2}" >/dev/null 2>&1 &&
   (cd "$root" && "$emu/gpu_roofline" bench/gpt2_small.yaml --set train.precision=bf16 --direct \
      --raw) > "$out/emu_ledger.txt" 2>/dev/null; then
  echo "gpu_kit.sh: the emulator's ledger of bench/gpt2_small.yaml bf16 in $out/emu_ledger.txt"
else
  rm -f "$out/emu_ledger.txt"
  echo "gpu_kit.sh: no emulated build in $emu: the check's counters row will have no ledger to compare"
fi

tar -C "$(dirname "$out")" -czf "$tarball" "$(basename "$out")"
echo "gpu_kit.sh: kit in $out ($(du -sh "$out" | cut -f1) unpacked), $tarball:" \
  "$(du -m "$tarball" | cut -f1) MiB; on a GPU machine: bash scripts/gpu_check.sh (docs/gpu.md)"
