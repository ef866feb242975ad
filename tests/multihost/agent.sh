#!/usr/bin/env bash
# tests/multihost/agent.sh HOST COMMAND...: Open MPI's remote launch agent (plm_rsh_agent) for
# the hosts of tests/multihost/hosts.sh, in place of ssh: runs COMMAND (the words joined, read
# by a shell, as ssh does) on HOST, its network namespace under its own hostname, from a clean
# environment as a login over ssh would give (what the ranks need must come through mpirun -x).
set -eu
host=$1
shift
exec ip netns exec "$host" unshare --uts env -i PATH="$PATH" HOME="${HOME:-/root}" \
  sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
