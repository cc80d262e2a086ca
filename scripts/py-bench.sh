#!/usr/bin/env bash
# The Python bench (docs/src/python.md#performance), in one run: the Rust
# foundation bench (its report, target/bench-foundation.md, gives the Rust
# call figure), then host/py/bench/bench_call.py in the venv that
# scripts/py-package.sh build made (the installed wheel, pydantic-monty and
# the MCP SDK): Forge.call, Runtime.call, pydantic-monty's fresh session per
# call, and `temper mcp` over stdio. Not part of CI.
#   scripts/py-bench.sh [CALLS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="$root/target/py-test-venv/bin/python"
[ -x "$py" ] || bash scripts/py-package.sh build
cargo build --release --locked -p temper-cli --bin temper
cargo bench --locked -p temper-cli --bench foundation
"$py" host/py/bench/bench_call.py "$root" "${1:-5000}"
