#!/usr/bin/env bash
# Installs every Debian package pipetrain needs to build, test and benchmark, then (through
# scripts/install-python.sh, from PyPI) the Python packages of the Hugging Face tests: torch,
# transformers, safetensors. Idempotent; run as root (or with sudo). PIPETRAIN_SKIP_PYTHON=1
# installs only the Debian packages.
set -euo pipefail
packages=(
  build-essential cmake pkg-config # C11 compiler and the build
  libopenblas-dev                  # GEMM (cblas)
  libdnnl-dev                      # oneDNN: bf16 products on CPUs that have them (optional
                                   # for the build: Debian's OpenBLAS has no sbgemm)
  libyaml-dev                      # the YAML spec parser
  libcjson-dev                     # JSON: metrics now, checkpoint headers later
  zlib1g-dev                       # checksums (checkpoints)
  libhwloc-dev                     # CPU/GPU topology: binding ranks to cores
  libopenmpi-dev openmpi-bin       # MPI: the pipeline's process launch and CPU transport
  python3                          # test helpers: metrics and data checks
  python3-venv                     # the venv of scripts/install-python.sh
  strace                           # the kill-during-save test stops a save at exact points
  iproute2                         # ip netns: the multi-host tests' hosts (tests/multihost)
  clang libclang-rt-dev            # libFuzzer: fuzzing the spec loader and checkpoint reader
  patchelf debootstrap             # the GPU kit (scripts/gpu_kit.sh) and its test in a bare Debian
  chromium                         # headless, draws pipe_report's page in the report_render test
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Without PyPI (offline) the build and every other test still work: the Hugging Face tests
# then report themselves skipped, so a failure here is a warning.
python_deps() {
  [ "${PIPETRAIN_SKIP_PYTHON:-0}" = 1 ] && return 0
  bash "$(dirname "$0")/install-python.sh" ||
    echo "install-deps: warning: scripts/install-python.sh failed; the Hugging Face tests will be skipped" >&2
}
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  python_deps
  exit 0
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: need root to install: ${missing[*]} (run as root)" >&2
    exit 1
  fi
  as_root=(sudo)
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
python_deps
