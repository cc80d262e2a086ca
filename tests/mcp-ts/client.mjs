// `temper mcp` driven by the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, installed by scripts/mcp-npm.sh), over stdio
// or Streamable HTTP. Run by `cargo test --test mcp_http`
// (official_typescript_sdk_client_*):
//
//   node tests/mcp-ts/client.mjs stdio TEMPER_BIN STORE_DIR CACHE_DIR SEED_JSON
//   node tests/mcp-ts/client.mjs http URL TOKEN SEED_JSON
//
// initialize, list (the meta-tools only), forge the seed with progress,
// list_changed, list again (the SDK caches the outputSchema), call, a
// failing call of a tool with an outputSchema (an isError result, no client
// exception), an unknown tool (a -32602 protocol error), 50 concurrent calls. Over HTTP also: the
// session's end (DELETE). Exits non-zero on the first failed check; waits
// for messages, never for a fixed time (the overall limit only guards
// against a hang).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const HANG_MS = 600_000;
setTimeout(() => {
  console.error("mcp-ts: no progress for too long");
  process.exit(2);
}, HANG_MS).unref();

const [mode, ...rest] = process.argv.slice(2);
let transport;
let seedPath;
if (mode === "stdio") {
  const [temper, store, cache, seed] = rest;
  seedPath = seed;
  transport = new StdioClientTransport({
    command: temper,
    args: ["mcp", "--judge", "rules", "--store", store, "--cache-dir", cache],
    stderr: "inherit",
  });
} else if (mode === "http") {
  const [url, token, seed] = rest;
  seedPath = seed;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  throw new Error(`usage: client.mjs stdio|http ...`);
}
const seed = JSON.parse(readFileSync(seedPath, "utf8"));

const client = new Client({ name: "temper-ts-test", version: "0.0.0" });
let changed = 0;
let changedWaiters = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  changed += 1;
  for (const w of changedWaiters.splice(0)) w();
});
const untilChanged = (n) =>
  changed >= n ? Promise.resolve() : new Promise((r) => changedWaiters.push(() => untilChanged(n).then(r)));

await client.connect(transport);
const info = client.getServerVersion();
assert.equal(info.name, "temper");
assert.equal(client.getServerCapabilities().tools.listChanged, true);

let listed = await client.listTools();
assert.deepEqual(
  listed.tools.map((t) => t.name),
  ["forge_tool", "delete_tool", "promote_tool", "tool_stats", "run_code", "describe_tools", "search_tools"],
);

// Forge with progress: one step per stage, then done.
const progress = [];
const forged = await client.callTool({ name: "forge_tool", arguments: seed }, undefined, {
  onprogress: (p) => progress.push(p),
});
assert.equal(forged.isError, false, JSON.stringify(forged));
assert.equal(forged.structuredContent.success, true);
assert.equal(forged.structuredContent.tool.name, seed.name);
// The server sends 0..5 before the result (tests/mcp.rs checks the wire).
// The SDK runs progress handlers in a microtask but drops a request's
// handler as soon as its response is read (shared/protocol.js
// _onnotification / _onresponse), so every step that arrives in the same
// read as the response can be lost: with stats written behind, REGISTER
// takes microseconds and its step (4) often shares that read with the
// final step (5) and the response. What arrives is the stages in order,
// at least through JUDGE (3); tests/all/mcp.rs checks all six on the wire.
const steps = progress.map((p) => p.progress);
assert.ok(steps.length >= 4, JSON.stringify(progress));
assert.deepEqual(steps, [0, 1, 2, 3, 4, 5].slice(0, steps.length), JSON.stringify(progress));
assert.ok(progress.every((p) => p.total === 5), JSON.stringify(progress));
await untilChanged(1);

listed = await client.listTools();
const tool = listed.tools.find((t) => t.name === seed.name);
assert.ok(tool, JSON.stringify(listed));
assert.deepEqual(tool.outputSchema, seed.outputSchema);

// A call: structured content that the SDK checked against the outputSchema.
const out = await client.callTool({ name: "slugify", arguments: { text: "Hello MCP World" } });
assert.equal(out.isError, false, JSON.stringify(out));
assert.deepEqual(out.structuredContent, { slug: "hello-mcp-world" });

// The defect: a failing call of a tool with an outputSchema must be an
// isError result the SDK accepts (it threw -32602 when the error came as
// structuredContent that did not match the schema).
const bad = await client.callTool({ name: "slugify", arguments: { words: 3 } });
assert.equal(bad.isError, true, JSON.stringify(bad));
assert.equal(bad.structuredContent, undefined, JSON.stringify(bad));
const err = JSON.parse(bad.content[0].text);
assert.equal(err.stage, "invoke");
assert.match(err.error, /input/);

// An unknown tool is a protocol error (-32602), as the MCP spec answers it.
await assert.rejects(
  client.callTool({ name: "no_such_tool", arguments: {} }),
  (e) => {
    assert.equal(e.code, -32602, String(e));
    assert.match(e.message, /no_such_tool/);
    return true;
  },
);

// 50 concurrent calls, each with its own answer.
const texts = Array.from({ length: 50 }, (_, i) => `Concurrent Call ${i}`);
const results = await Promise.all(
  texts.map((text) => client.callTool({ name: "slugify", arguments: { text } })),
);
results.forEach((r, i) => {
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.deepEqual(r.structuredContent, { slug: `concurrent-call-${i}` });
});

const stats = await client.callTool({ name: "tool_stats", arguments: { name: "slugify" } });
assert.equal(stats.isError, false, JSON.stringify(stats));
assert.equal(stats.structuredContent.total_calls, 52);
assert.equal(stats.structuredContent.successes, 51);

await client.ping();
if (mode === "http") {
  assert.ok(transport.sessionId, "a session id");
  await transport.terminateSession();
  assert.equal(transport.sessionId, undefined);
}
await client.close();
console.error(`mcp-ts: ${mode} flow passed`);
