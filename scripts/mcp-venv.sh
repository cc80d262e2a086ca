#!/usr/bin/env bash
# Creates target/mcp-venv with the official MCP Python SDK (PyPI `mcp`, 2.x)
# for the Python-client tests of `temper mcp` (tests/mcp_client.py, run by
# the `mcp` and `mcp_http` tests of `cargo test --test all`). Idempotent: does nothing when
# the venv already imports `mcp` 2.x; installs Debian's python3-venv first when `python3 -m venv`
# cannot work. Packages come from PyPI through pip, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/target/mcp-venv"
spec="mcp>=2.3,<3"

has_sdk() {
  "$venv/bin/python" -c "import importlib.metadata as m, mcp; assert m.version('mcp').split('.')[0] == '2'" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && has_sdk; then
  exit 0
fi

# Debian splits venv/ensurepip out of python3: `python3 -m venv` fails without it.
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  echo "mcp-venv: installing Debian packages: python3 python3-venv" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3 python3-venv >/dev/null
fi

echo "mcp-venv: creating $venv with $spec" >&2
rm -rf "$venv"
mkdir -p "$root/target"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
has_sdk
