#!/usr/bin/env bash
# Installs the official MCP reference servers the gateway tests put behind
# `temper mcp` (tests/all/hub_reference.rs), pinned:
# - npm `@modelcontextprotocol/server-everything`, `server-filesystem` and
#   `server-memory` at the versions of tests/mcp-servers/package-lock.json,
#   into tests/mcp-servers/node_modules;
# - PyPI `mcp-server-time` and `mcp-server-git` (the versions below) into
#   target/mcp-venv, the official Python SDK's venv (scripts/mcp-venv.sh
#   makes it; run it first).
# Idempotent: does nothing when the pinned versions are installed. Packages
# come from the npm registry and PyPI through npm and pip, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/tests/mcp-servers"
venv="$root/target/mcp-venv"
py_pins=("mcp-server-time==2026.10.19" "mcp-server-git==2026.10.19")

bash "$root/scripts/npm-pinned.sh" mcp-servers "$dir" @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory

if [ ! -x "$venv/bin/python" ]; then
  echo "mcp-servers: $venv is missing (run scripts/mcp-venv.sh first)" >&2
  exit 1
fi
missing=()
for pin in "${py_pins[@]}"; do
  name="${pin%%==*}"
  want="${pin##*==}"
  have="$("$venv/bin/python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name" 2>/dev/null || true)"
  [ "$have" = "$want" ] || missing+=("$pin")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "mcp-servers: installing ${missing[*]} into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${missing[@]}"
fi
"$venv/bin/python" -c "import mcp_server_time, mcp_server_git"
