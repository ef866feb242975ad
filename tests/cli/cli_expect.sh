#!/usr/bin/env bash
# cli_expect.sh CODE REGEX CMD [ARGS...]: runs CMD, fails unless it exits with CODE and its
# combined output matches the extended regex REGEX. Used for the command-line error tests.
set -u
want_code=$1 regex=$2
shift 2
out=$("$@" 2>&1)
code=$?
if [ "$code" != "$want_code" ]; then
  printf 'expected exit %s, got %s from: %s\n--- output ---\n%s\n' "$want_code" "$code" "$*" "$out"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  printf 'output of %s does not match /%s/\n--- output ---\n%s\n' "$*" "$regex" "$out"
  exit 1
fi
if [ "$want_code" = 2 ] && [ "$(printf '%s\n' "$out" | grep -c .)" != 1 ]; then
  printf 'a bad-input error must be one line; got:\n%s\n' "$out"
  exit 1
fi
echo "ok: exit $code, output matches /$regex/"
