#!/usr/bin/env bash
# The `temper-forge` npm package (host/node): installs its pinned npm
# dependencies (@napi-rs/cli, @framers/agentos, ai, zod, typescript: the versions in
# host/node/package-lock.json) into host/node/node_modules, builds the
# native addon (host/node/build.mjs: cargo in the release profile and the
# workspace's target directory, so wasmtime is compiled once; the types and
# the loader from @napi-rs/cli's generators), writing
# temper-forge.linux-x64-gnu.node, native.cjs and the generated index.d.ts
# into host/node; with --test, then runs the package's tests
# (`node --test`).
# Idempotent: npm ci only when an installed version differs from the lock;
# cargo rebuilds only what changed. Packages come from the npm registry
# through npm, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/host/node"
cd "$dir"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node-package: installing Debian packages: nodejs npm" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi

stale=""
for pkg in @napi-rs/cli @framers/agentos ai zod typescript; do
  read -r want have <<<"$(node -e '
    const [lock, dir, name] = process.argv.slice(1);
    const want = require(lock).packages["node_modules/" + name].version;
    let have = "";
    try { have = require(dir + "/node_modules/" + name + "/package.json").version } catch {}
    console.log(want + " " + have);
  ' "$dir/package-lock.json" "$dir" "$pkg")"
  if [ "$want" != "$have" ]; then
    stale="$stale $pkg@$want"
  fi
done
if [ -n "$stale" ]; then
  echo "node-package: installing$stale into $dir/node_modules" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi

# The addon, in the release profile and the workspace's target directory,
# with its types and loader from @napi-rs/cli's generators (build.mjs).
node build.mjs

if [ "${1:-}" = "--test" ]; then
  node --test test/*.test.js
fi
