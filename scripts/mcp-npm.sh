#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK 1.x (npm `@modelcontextprotocol/sdk`,
# legacy revisions) and the TypeScript client 2.x (`@modelcontextprotocol/client`,
# MCP 2026-07-28), the versions pinned in tests/mcp-ts/package-lock.json, into
# tests/mcp-ts/node_modules for the TypeScript-client tests of `temper mcp`
# (tests/mcp-ts/client.mjs and client2026.mjs, run by the `mcp_http` and
# `mcp_modern` tests of `cargo test --test all`).
# Idempotent: does nothing when both pinned packages are already installed; installs
# Debian's nodejs and npm first when they are missing. Packages come from the
# npm registry through npm, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/tests/mcp-ts"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "mcp-npm: installing Debian packages: nodejs npm" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi

# "pinned-version installed-version" for a package of the lock.
versions() {
  node -e '
    const [lock, dir, name] = process.argv.slice(1);
    const want = require(lock).packages["node_modules/" + name].version;
    let have = "";
    try { have = require(dir + "/node_modules/" + name + "/package.json").version } catch {}
    console.log(want + " " + have);
  ' "$dir/package-lock.json" "$dir" "$1"
}

stale=""
for pkg in @modelcontextprotocol/sdk @modelcontextprotocol/client; do
  read -r want have <<<"$(versions "$pkg")"
  if [ "$want" != "$have" ]; then
    stale="$stale $pkg@$want"
  fi
done
if [ -z "$stale" ]; then
  exit 0
fi

echo "mcp-npm: installing$stale into $dir/node_modules" >&2
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
node -e 'import("@modelcontextprotocol/sdk/client/index.js")'
node -e 'import("@modelcontextprotocol/client")'
