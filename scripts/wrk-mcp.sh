#!/usr/bin/env bash
# A cross-check of the MCP bench's HTTP figures with an independent load
# generator in a process of its own: Debian's `wrk` (installed if missing)
# against the `temper` binary's `temper mcp --http`, the slugify seed
# forged into a fresh store's session tier, then `tools/call` of it over
# keep-alive connections for a few seconds at each connection count.
#
#   bash scripts/wrk-mcp.sh [CONNECTIONS...]     (default: 32 64)
#
# Env: WRK_SECONDS (5), WRK_THREADS (1: one event-loop thread, as the
# bench's client), TEMPER (target/release/temper, built if missing),
# WRK_PERF=FILE (a `perf record` of the server during the runs, into FILE).
# Prints wrk's own summary per run and one line of calls/s and the server's
# CPU per call (from /proc, the server process only).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! command -v wrk >/dev/null 2>&1; then
  echo "wrk-mcp: installing Debian package wrk" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wrk >/dev/null
fi
temper="${TEMPER:-$root/target/release/temper}"
if [ ! -x "$temper" ]; then
  cargo build --release --locked -p temper-cli
fi
conns=("$@")
[ ${#conns[@]} -gt 0 ] || conns=(32 64)
seconds="${WRK_SECONDS:-5}"
threads="${WRK_THREADS:-1}"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A free port on loopback.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port/mcp"
"$temper" mcp --http "127.0.0.1:$port" --judge rules --store "$work/store" \
  2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break
  sleep 0.1
done

post() { # session body -> response body (headers to $work/headers)
  curl -s -D "$work/headers" -X POST "$url" \
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    ${1:+-H "mcp-session-id: $1"} ${1:+-H 'mcp-protocol-version: 2025-06-18'} \
    --data-binary "$2"
}
post "" '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wrk-mcp","version":"0"}}}' >/dev/null
session="$(tr -d '\r' <"$work/headers" | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')"
[ -n "$session" ] || { echo "wrk-mcp: no session id from initialize" >&2; cat "$work/server.log" >&2; exit 1; }
forge="$(python3 -c 'import json,sys; print(json.dumps({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forge_tool","arguments":json.load(open(sys.argv[1]))}}))' tests/fixtures/seeds/slugify.json)"
post "$session" "$forge" | grep -q '"isError":false' || { echo "wrk-mcp: the forge failed" >&2; exit 1; }

call='{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slugify","arguments":{"text":"Hello World, from the MCP bench!"}}}'
answer="$(post "$session" "$call")"
echo "$answer" | grep -q 'hello-world-from-the-mcp-bench' || { echo "wrk-mcp: unexpected answer: $answer" >&2; exit 1; }

cat >"$work/call.lua" <<LUA
wrk.method = "POST"
wrk.body = '$call'
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-session-id"] = "$session"
wrk.headers["mcp-protocol-version"] = "2025-06-18"
bad = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, "hello-world-from-the-mcp-bench", 1, true) then
    bad = bad + 1
  end
end
done = function(summary, latency, requests)
  io.write(string.format("wrk-mcp: non-200 or wrong answers: %d\n", bad))
end
LUA

# Warm-up: the tool is promoted after 1,000 calls (compiled in the background).
wrk -t1 -c8 -d3s -s "$work/call.lua" "$url" >/dev/null
sleep 2
ticks="$(getconf CLK_TCK)"
cpu() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
faults() { awk '{print $10}' "/proc/$server_pid/stat"; }
perf_pid=""
if [ -n "${WRK_PERF:-}" ]; then
  perf record -F 999 ${WRK_PERF_ARGS:--g} -o "$WRK_PERF" -p "$server_pid" 2>"$work/perf.log" &
  perf_pid=$!
  sleep 0.5
fi
for c in "${conns[@]}"; do
  before="$(cpu)"
  faults_before="$(faults)"
  out="$(wrk -t"$threads" -c"$c" -d"${seconds}s" -s "$work/call.lua" "$url")"
  after="$(cpu)"
  faults_after="$(faults)"
  echo "$out"
  reqs="$(echo "$out" | awk '/requests in/{print $1}')"
  rate="$(echo "$out" | awk '/Requests\/sec/{print $2}')"
  echo "$out" | grep -q 'wrong answers: 0$' || { echo "wrk-mcp: some answers were wrong" >&2; exit 1; }
  awk -v c="$c" -v r="$rate" -v n="$reqs" -v b="$before" -v a="$after" -v t="$ticks" \
    -v fb="$faults_before" -v fa="$faults_after" \
    'BEGIN{printf "wrk-mcp: %d connections: %.0f calls/s, server CPU per call %.1f us, page faults per call %.2f\n", c, r, (a-b)/t*1e6/n, (fa-fb)/n}'
done
if [ -n "$perf_pid" ]; then
  kill -INT "$perf_pid"
  wait "$perf_pid" || true
fi
