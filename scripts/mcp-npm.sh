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

bash "$root/scripts/npm-pinned.sh" mcp-npm "$dir" @modelcontextprotocol/sdk @modelcontextprotocol/client
cd "$dir"
node -e 'import("@modelcontextprotocol/sdk/client/index.js")'
node -e 'import("@modelcontextprotocol/client")'
