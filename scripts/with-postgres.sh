#!/usr/bin/env bash
# Runs a command with a throw-away PostgreSQL cluster (scripts/pg-cluster.sh)
# on 127.0.0.1, its URL in TEMPER_TEST_PG_URL, and stops and removes the
# cluster when the command ends (whatever its status, also on Ctrl-C).
#
#   scripts/with-postgres.sh cargo test --release -p temper-store --features postgres
#
# Start it inside the tests' network namespace (scripts/test.sh does), so
# that the tests reach the server on the namespace's own loopback.
# The cluster lives in target/pg-XXXXXX; the command's status is returned.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
[ $# -gt 0 ] || {
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
}
mkdir -p "$root/target"
dir="$(mktemp -d "$root/target/pg-XXXXXX")"
cleanup() {
  bash "$here/pg-cluster.sh" stop "$dir" || echo "with-postgres: could not stop the cluster in $dir" >&2
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bash "$here/pg-cluster.sh" start "$dir"
TEMPER_TEST_PG_URL="$(bash "$here/pg-cluster.sh" url "$dir")"
export TEMPER_TEST_PG_URL
status=0
"$@" || status=$?
exit "$status"
