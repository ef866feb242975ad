#!/usr/bin/env bash
# expect_deadlock.sh REGEX CMD...: CMD (an mpirun of a program that deadlocks under NCCL's rules)
# must fail, and its output must hold the emulated NCCL's deadlock report matching REGEX.
set -u
regex=$1
shift
out=$("$@" 2>&1)
code=$?
if [ "$code" = 0 ]; then printf 'expected a failure, got exit 0\n%s\n' "$out"; exit 1; fi
line=$(printf '%s\n' "$out" | grep -E -- 'nccl-emu\[rank [0-9]+\]: a deadlock in the emulated NCCL: ' | head -n 1)
if [ -z "$line" ]; then printf 'no deadlock report (exit %s):\n%s\n' "$code" "$out"; exit 1; fi
if ! printf '%s\n' "$line" | grep -Eq -- "$regex"; then
  printf 'the report does not match /%s/:\n%s\n' "$regex" "$out"; exit 1
fi
echo "ok (exit $code): $line"
