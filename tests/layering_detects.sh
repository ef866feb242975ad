#!/usr/bin/env bash
# layering_detects.sh: scripts/check_layers.py can fail: a tree whose core/ includes
# engine/pipeline.h must be refused, naming the file, line and include.
source "$(dirname "$0")/lib.sh"
mkdir -p "$work/core" "$work/engine"
echo '#include "engine/pipeline.h"' >"$work/core/x.c"
if python3 scripts/check_layers.py "$work" >"$work/out"; then fail "check_layers.py passed an upward include"; fi
grep -q 'core/x.c:1: includes "engine/pipeline.h"' "$work/out" ||
  fail "check_layers.py did not name core/x.c:1: $(cat "$work/out")"
