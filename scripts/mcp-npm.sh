#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`,
# the version pinned in tests/mcp-ts/package-lock.json) into
# tests/mcp-ts/node_modules for the TypeScript-client tests of `temper mcp`
# (tests/mcp-ts/client.mjs, run by the `mcp_http` tests of `cargo test --test all`).
# Idempotent: does nothing when the pinned SDK is already installed; installs
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

want="$(node -e 'console.log(require(process.argv[1]).packages["node_modules/@modelcontextprotocol/sdk"].version)' "$dir/package-lock.json")"
have="$(node -e 'try { console.log(require(process.argv[1]).version) } catch { console.log("") }' "$dir/node_modules/@modelcontextprotocol/sdk/package.json")"
if [ "$want" = "$have" ]; then
  exit 0
fi

echo "mcp-npm: installing @modelcontextprotocol/sdk $want into $dir/node_modules" >&2
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
node -e 'import("@modelcontextprotocol/sdk/client/index.js")'
