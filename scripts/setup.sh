#!/usr/bin/env bash
# Installs what Temper's build needs on a fresh Debian machine, idempotently:
# the wasm32-wasip2 and wasm32-unknown-unknown Rust targets, Debian's
# clang-14 / lld-14 / wasi-libc, and the sysroot folder QuickJS's C build
# uses. Safe to run again: it only installs what is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "setup: adding Rust target wasm32-wasip2" >&2
  rustup target add wasm32-wasip2
fi
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding Rust target wasm32-unknown-unknown (the compose core)" >&2
  rustup target add wasm32-unknown-unknown
fi

# clippy for the lint step of scripts/test.sh.
if ! cargo clippy --version >/dev/null 2>&1; then
  echo "setup: adding the clippy component" >&2
  rustup component add clippy
fi

need=()
command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
command -v llvm-ar-14 >/dev/null 2>&1 || need+=(llvm-14)
dpkg -s lld-14 >/dev/null 2>&1 || need+=(lld-14)
[ -e /usr/lib/llvm-14/lib/libclang.so ] || [ -e /usr/lib/llvm-14/lib/libclang-14.so.1 ] || need+=(libclang-14-dev)
[ -d /usr/include/wasm32-wasi ] || need+=(wasi-libc)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Debian's wasi-libc is not laid out as one sysroot: make one out of links.
sysroot="$root/target/wasi-sysroot"
mkdir -p "$sysroot/lib"
ln -sfn /usr/include/wasm32-wasi "$sysroot/include"
ln -sfn /usr/lib/wasm32-wasi "$sysroot/lib/wasm32-wasi"

# Debian's PostgreSQL server binaries for the PostgreSQL store tests, which
# run against a throw-away cluster (scripts/pg-cluster.sh, scripts/with-postgres.sh)
# on 127.0.0.1; the packaged service is not started (policy-rc.d 101).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup: installing Debian package postgresql (server binaries for the store tests)" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
    $sudo_cmd chmod +x "$policy"
    made_policy=1
  fi
  pg_status=0
  $sudo_cmd apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends postgresql >/dev/null ||
    pg_status=$?
  if [ "$made_policy" = 1 ]; then
    $sudo_cmd rm -f "$policy"
  fi
  if [ "$pg_status" != 0 ]; then
    echo "setup: apt-get install postgresql failed (status $pg_status): the PostgreSQL store tests will fail" >&2
  fi
fi

# mdbook from crates.io for the book (scripts/book.sh builds docs/ and checks
# its links). Pinned; without the `serve` and `watch` features, which a build
# does not use, it compiles in about 2.5 minutes on 2 cores.
mdbook_version=0.5.4
mdbook_bin="${CARGO_HOME:-$HOME/.cargo}/bin/mdbook"
if ! { command -v mdbook >/dev/null 2>&1 && mdbook --version 2>/dev/null | grep -qx "mdbook v$mdbook_version"; } &&
  ! { [ -x "$mdbook_bin" ] && "$mdbook_bin" --version 2>/dev/null | grep -qx "mdbook v$mdbook_version"; }; then
  echo "setup: installing mdbook $mdbook_version from crates.io (cargo install)" >&2
  cargo install --locked --version "$mdbook_version" --no-default-features --features search mdbook
fi
