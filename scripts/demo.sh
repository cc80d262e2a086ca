#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is missing, build
# Temper (the JS shim is built from source by host/runtime/build.rs), then forge the
# seed example tools, run their test cases, and run an example artifact.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cargo build --release --locked -p temper-cli
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

echo "== capabilities: crypto, files and fetch, each only when granted"
"$temper" run components/examples/sign.js --allow-crypto --input '{"message": "hello", "key": "k"}'
"$temper" run components/examples/read_words.js --allow-read=components/examples/data:/data \
  --input '{"path": "/data/notes.txt"}'
if "$temper" run components/examples/sign.js --input '{"message": "hello", "key": "k"}'; then
  echo "expected: capability not granted: crypto" >&2; exit 1
fi
# A local server on 127.0.0.1; the rule names that IP, so it is allowed.
mkdir -p "$out/www/v1"
echo '{"items": [1, 2, 3]}' > "$out/www/v1/items.json"
port=18765
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$out/www" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
"$temper" run components/examples/fetch_json.js --allow-net="http://127.0.0.1:$port" \
  --input "{\"url\": \"http://127.0.0.1:$port/v1/items.json\"}"
if "$temper" run components/examples/fetch_json.js --allow-net=api.example.com \
  --input "{\"url\": \"http://127.0.0.1:$port/v1/items.json\"}"; then
  echo "expected: IP address not allowed" >&2; exit 1
fi

echo "== the forge pipeline: forge with the offline rules judge, call, stats, promote, approve, audit"
store="$out/store"
rm -rf "$store"
reg=(--store "$store" --agent demo-agent --session demo-session)
if "$temper" forge tests/fixtures/seeds/slugify.json "${reg[@]}"; then
  echo "expected: no judge configured, forge rejected (fail closed)" >&2; exit 1
fi
for req in slugify add_numbers parse_csv convert_temperature; do
  "$temper" forge "tests/fixtures/seeds/$req.json" --judge rules "${reg[@]}"
done
"$temper" tools "${reg[@]}"
for text in "Hello World" "Forged tools" "Temper" "A b c" "Last one"; do
  "$temper" call slugify --input "{\"text\": \"$text\"}" "${reg[@]}"
done
"$temper" stats slugify "${reg[@]}"
python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["implementation"]["code"])' \
  tests/fixtures/seeds/slugify.json > "$out/slugify.js"
"$temper" promote slugify --judge rules --source "$out/slugify.js" "${reg[@]}"
"$temper" approve slugify --by demo-operator --note "demo" "${reg[@]}"
"$temper" call slugify --input '{"text": "Seen by another agent"}' --store "$store" --agent other-agent
"$temper" audit verify "${reg[@]}"

echo "== compose: a pipeline of two forged tools, run linked, then bundled into one component"
"$temper" forge tests/fixtures/compose/fahrenheit_plus.json --judge rules "${reg[@]}"
"$temper" call fahrenheit_plus --input '{"celsius": 37, "offset": 0.4}' "${reg[@]}"
"$temper" export fahrenheit_plus --bundle -o "$out/fahrenheit_plus.bundle.wasm" "${reg[@]}"
"$temper" inspect "$out/fahrenheit_plus.bundle.wasm"
rm -rf "$out/store3"
"$temper" import "$out/fahrenheit_plus.bundle.wasm" --judge rules --store "$out/store3" --agent bundle-agent
"$temper" call fahrenheit_plus --input '{"celsius": 37, "offset": 0.4}' --store "$out/store3" --agent bundle-agent

echo "== artifacts: export, inspect, verify by rebuilding, import into another store"
"$temper" export add_numbers -o "$out/add_numbers.wasm" --sidecar "${reg[@]}"
"$temper" inspect "$out/add_numbers.wasm"
"$temper" verify "$out/add_numbers.wasm" --request tests/fixtures/seeds/add_numbers.json
rm -rf "$out/store2"
"$temper" import "$out/add_numbers.wasm" --judge rules --store "$out/store2" --agent imported-agent
"$temper" call add_numbers --input '{"a": 40, "b": 2}' --store "$out/store2" --agent imported-agent
"$temper" session end "${reg[@]}"

echo "== limits: an infinite loop stops at the timeout"
echo 'function execute(input) { for (;;) {} }' > "$out/spin.js"
if "$temper" run "$out/spin.js" --timeout-ms 300; then
  echo "expected a timeout" >&2; exit 1
fi
echo "demo finished"
