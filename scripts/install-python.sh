#!/usr/bin/env bash
# Installs the Python packages the Hugging Face tests and scripts/tokenize.py use (torch,
# transformers, safetensors, tokenizers, numpy, pyyaml), tensorboard (its reader checks
# pipe_train --tensorboard's files, tests/observe/tensorboard.sh), and nvidia-cudnn-frontend (the C++
# headers of cuDNN's graph API that the GPU build's bf16 attention compiles against,
# cmake/FindCUDNNFrontend.cmake), from PyPI into a virtual environment at
# ${PIPETRAIN_VENV:-$HOME/.cache/pipetrain/venv}, which CMake's PT_PYTHON then defaults to.
# Idempotent: does nothing when that venv (or, with no venv there, python3) already imports
# them all. The PyPI torch wheel brings
# its CUDA libraries (about 3 GB): once per machine or CI cache.
set -euo pipefail
venv=${PIPETRAIN_VENV:-$HOME/.cache/pipetrain/venv}
modules="torch transformers safetensors tokenizers numpy yaml tensorboard cudnn"
check="import importlib.util, sys
missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]
sys.exit(1 if missing else 0)"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" $modules 2>/dev/null; then
  echo "install-python: $venv already has $modules"
  exit 0
fi
if [ ! -x "$venv/bin/python" ] && python3 -c "$check" $modules 2>/dev/null; then
  echo "install-python: python3 already has $modules (CMake's PT_PYTHON falls back to it)"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  if ! python3 -m venv "$venv"; then
    echo "install-python: python3 -m venv failed; install python3-venv (scripts/install-deps.sh)" >&2
    exit 1
  fi
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet torch transformers safetensors tokenizers numpy pyyaml \
  tensorboard nvidia-cudnn-frontend
"$venv/bin/python" -c "$check" $modules
echo "install-python: $venv has $modules (configure with -DPT_PYTHON=$venv/bin/python, the default when it exists)"
