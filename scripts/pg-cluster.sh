#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests, from Debian's postgresql
# binaries (/usr/lib/postgresql/<version>/bin; scripts/setup.sh installs them).
#
#   pg-cluster.sh start DIR   initdb in DIR/data, start on 127.0.0.1 only, a random
#                             free port, password (scram-sha-256) auth for role
#                             `temper`; writes the URL to DIR/url
#   pg-cluster.sh url DIR     prints postgres://temper:PASSWORD@127.0.0.1:PORT/postgres
#   pg-cluster.sh stop DIR    stops the server (fast shutdown)
#
# PostgreSQL refuses to run as root: as root, DIR is chowned to the `postgres`
# system user and the server runs as that user (runuser); as root inside a
# user namespace only (`unshare -rn`), it runs in a nested namespace as
# uid 1000 (the same real user); otherwise it runs as the calling user. The unix socket lives in DIR (not /var/run/postgresql),
# so the cluster needs no system directory and does not touch the packaged
# service. The data is disposable: fsync is off (the tests kill clients, not
# the server), everything else is PostgreSQL's default.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|url DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd="$1"
dir="$2"

pg_bin() {
  local bin
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "pg-cluster: no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (run scripts/setup.sh)" >&2
    exit 1
  fi
  echo "$bin"
}

# How to run the server as someone other than root (PostgreSQL refuses
# root): as root on the host, the `postgres` system user (runuser); as root
# only inside a user namespace (test.sh's `unshare -rn` for a non-root
# caller), a nested user namespace where the caller is uid 1000; otherwise
# the caller itself.
owner_mode() {
  if [ "$(id -u)" != 0 ]; then
    echo self
  elif id postgres >/dev/null 2>&1 && runuser -u postgres -- true 2>/dev/null; then
    echo runuser
  elif unshare --user --map-user=1000 --map-group=1000 true 2>/dev/null; then
    echo userns
  else
    echo none
  fi
}

# Runs a command as the cluster's owner.
as_owner() {
  case "$(owner_mode)" in
  self) "$@" ;;
  runuser) runuser -u postgres -- "$@" ;;
  userns) unshare --user --map-user=1000 --map-group=1000 -- "$@" ;;
  *)
    echo "pg-cluster: running as root with no way to run the server as another user (no usable 'postgres' user, no user namespace)" >&2
    exit 1
    ;;
  esac
}

free_port() {
  # A random port in 20000..59999 that nothing listens on now (the server
  # start is retried with another port if it is taken in between).
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "pg-cluster: no free port found" >&2
  return 1
}

start() {
  local bin pw port
  bin="$(pg_bin)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [ "$(owner_mode)" = runuser ]; then
    chown postgres: "$dir"
  fi
  chmod 700 "$dir"
  pw="$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)"
  as_owner sh -c "umask 077 && printf '%s\n' '$pw' > '$dir/pwfile'"
  as_owner "$bin/initdb" -D "$dir/data" -U temper --pwfile="$dir/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
    >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    echo "pg-cluster: initdb failed" >&2
    exit 1
  }
  rm -f "$dir/pwfile"
  local started=0
  for _ in 1 2 3 4 5; do
    port="$(free_port)"
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c max_connections=300" \
      >/dev/null 2>&1; then
      started=1
      break
    fi
  done
  if [ "$started" != 1 ]; then
    tail -n 20 "$dir/server.log" >&2 || true
    echo "pg-cluster: the server did not start" >&2
    exit 1
  fi
  (umask 077 && printf 'postgres://temper:%s@127.0.0.1:%s/postgres\n' "$pw" "$port" >"$dir/url")
  echo "pg-cluster: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir/data)" >&2
}

stop() {
  local bin
  bin="$(pg_bin)"
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >/dev/null
  fi
}

case "$cmd" in
start) start ;;
stop) stop ;;
url)
  if [ ! -f "$dir/url" ]; then
    echo "pg-cluster: no cluster started in $dir" >&2
    exit 1
  fi
  cat "$dir/url"
  ;;
*) usage ;;
esac
