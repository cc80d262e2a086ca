#!/usr/bin/env bash
# The test suite on a fresh Debian machine: install what is missing, then run
# every test (unit, integration, CLI) in the release profile, which the CLI
# and the benches share, so wasmtime is compiled once.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# The official MCP Python SDK for the `temper mcp` client test; required here.
bash scripts/mcp-venv.sh ||
  echo "test: could not create target/mcp-venv: the MCP Python-client test will fail" >&2
TEMPER_REQUIRE_MCP_PY=1 cargo test --release --locked --workspace
if command -v node >/dev/null 2>&1; then
  node --test guest-js-shim/tests-js/
else
  echo "node not found: skipping the prelude's node tests" >&2
fi
