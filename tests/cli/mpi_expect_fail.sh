#!/usr/bin/env bash
# mpi_expect_fail.sh REGEX CMD...: the job must exit 2, its output must match REGEX, and the
# pipetrain error must be printed once (by rank 0), not once per rank.
set -u
regex=$1
shift
out=$("$@" 2>&1)
code=$?
if [ "$code" != 2 ]; then printf 'expected exit 2, got %s\n%s\n' "$code" "$out"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  printf 'output does not match /%s/:\n%s\n' "$regex" "$out"; exit 1
fi
n=$(printf '%s\n' "$out" | grep -c '^pipetrain')
if [ "$n" != 1 ]; then printf 'expected one pipetrain error line, got %s:\n%s\n' "$n" "$out"; exit 1; fi
echo "ok: $regex"
