#!/usr/bin/env bash
# The MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned
# in tests/conformance/package-lock.json) against Temper as a gateway: its
# tools, resources, prompts and completion scenarios run against a fixture
# server written with the official Python SDK (tests/conformance/
# fixture_server.py) directly, and through `temper mcp --http` fronting it
# (tests/conformance/tools.toml). Fails when a scenario passes directly but
# not through Temper (tests/conformance/run.py; table in docs/src/hub.md).
#
#   scripts/conformance.sh install   the pinned suite into
#                                    tests/conformance/node_modules (npm ci),
#                                    and on Node < 22 its one import of
#                                    fs.globSync redirected to
#                                    tests/conformance/node20-globsync.mjs.
#                                    Needs the network (npm).
#   scripts/conformance.sh run       the scenarios, offline, on 127.0.0.1;
#                                    Temper is $TEMPER, else
#                                    target/release/temper; the SDK is
#                                    target/mcp-venv (scripts/mcp-venv.sh).
#   scripts/conformance.sh           both.
#
# Idempotent: `install` does nothing when the pinned version is installed
# and patched. Packages come from the npm registry through npm, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/tests/conformance"
pkg="@modelcontextprotocol/conformance"
bundle="$dir/node_modules/$pkg/dist/index.js"

install() {
  bash "$root/scripts/npm-pinned.sh" conformance "$dir" "$pkg"
  # Node 20 has no fs.globSync (Node 22 does): the bundle's import of it
  # fails to link. Take that one name from node20-globsync.mjs instead; the
  # rewrite must match exactly once, and is skipped once done.
  node --input-type=module -e '
    import fs from "node:fs";
    const [bundle] = process.argv.slice(1);
    const marker = "/* temper: globSync from node20-globsync.mjs */";
    let src = fs.readFileSync(bundle, "utf8");
    if (typeof fs.globSync === "function" || src.includes(marker)) process.exit(0);
    const from = "import{existsSync as i,globSync as a,mkdtempSync as o,";
    const count = src.split(from).length - 1;
    if (count !== 1) {
      console.error(`conformance: expected the fs import once in ${bundle}, found it ${count} times`);
      process.exit(1);
    }
    const shim = "../../../../node20-globsync.mjs";
    src = src.replace(from, `${marker}import{globSync as a}from"${shim}";import{existsSync as i,mkdtempSync as o,`);
    fs.writeFileSync(bundle, src);
    console.error("conformance: fs.globSync taken from node20-globsync.mjs (Node " + process.version + ")");
  ' "$bundle"
  node "$bundle" --version >/dev/null
}

run() {
  local temper="${TEMPER:-$root/target/release/temper}"
  local python="$root/target/mcp-venv/bin/python"
  [ -x "$temper" ] || { echo "conformance: $temper is missing (cargo build --release -p temper-cli)" >&2; exit 1; }
  [ -x "$python" ] || { echo "conformance: $python is missing (run scripts/mcp-venv.sh first)" >&2; exit 1; }
  [ -f "$bundle" ] || { echo "conformance: the suite is not installed (scripts/conformance.sh install)" >&2; exit 1; }
  "$python" "$dir/run.py" --temper "$temper" --python "$python" --suite "$dir" "$@"
}

case "${1:-all}" in
  install) install ;;
  run) shift; run "$@" ;;
  all) install; run ;;
  *) echo "usage: scripts/conformance.sh [install|run [run.py options]]" >&2; exit 2 ;;
esac
