#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is missing, build
# Temper (the JS shim is built from source by host/build.rs), then forge the
# seed example tools, run their test cases, and run an example artifact.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cargo build --release --locked -p temper
temper=target/release/temper
out=target/demo
mkdir -p "$out"

echo "== forge the seed sandbox tools and run their test cases"
for req in parse_csv convert_temperature slugify add_numbers; do
  "$temper" test "tests/fixtures/seeds/$req.json"
done

echo "== build a tool into a component artifact, then run the artifact"
"$temper" build components/examples/slugify.js -o "$out/slugify.wasm"
"$temper" run "$out/slugify.wasm" --input '{"text": "Hello, Temper!"}'

echo "== an async tool (timers, Promise.all, URL, console capture), built in memory"
"$temper" run components/examples/async_wait.js --input '{"delays": [30, 10, 20]}'

echo "== limits: an infinite loop stops at the timeout"
echo 'function execute(input) { for (;;) {} }' > "$out/spin.js"
if "$temper" run "$out/spin.js" --timeout-ms 300; then
  echo "expected a timeout" >&2; exit 1
fi
echo "demo finished"
