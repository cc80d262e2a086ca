// `temper mcp --http` driven by the official MCP TypeScript client 2.4
// (@modelcontextprotocol/client, installed by scripts/mcp-npm.sh) speaking
// MCP 2026-07-28. Run by `cargo test --test all mcp_modern`
// (official_typescript_client_2026):
//
//   node tests/mcp-ts/client2026.mjs URL TOKEN SEED_JSON MODE
//
// MODE: "pin" (versionNegotiation pinned to 2026-07-28) or "auto" (probes
// server/discover). In the session `_meta["dev.temper/session"]` = "ts-MODE":
// list (the meta-tools), listen for tools, forge the seed with progress,
// list_changed on the subscription, list again, call. Outside the session
// the tool is unknown (-32602). Exits non-zero on the first failed check;
// waits for messages, never for a fixed time.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const HANG_MS = 600_000;
setTimeout(() => {
  console.error("mcp-ts 2026: no progress for too long");
  process.exit(2);
}, HANG_MS).unref();

const META_TOOLS = ["forge_tool", "promote_tool", "tool_stats", "run_code", "describe_tools"];
const [url, token, seedPath, mode] = process.argv.slice(2);
const seed = JSON.parse(readFileSync(seedPath, "utf8"));
const session = { "dev.temper/session": `ts-${mode}` };

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const negotiation = mode === "auto" ? { mode: "auto" } : { mode: { pin: "2026-07-28" } };
const client = new Client({ name: "temper-ts-2026-test", version: "0.0.0" }, { versionNegotiation: negotiation });

let changed = 0;
let waiters = [];
client.setNotificationHandler("notifications/tools/list_changed", () => {
  changed += 1;
  for (const w of waiters.splice(0)) w();
});
const untilChanged = (n) =>
  changed >= n ? Promise.resolve() : new Promise((r) => waiters.push(() => untilChanged(n).then(r)));

await client.connect(transport);
assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
assert.equal(client.getServerVersion()?.name, "temper");

let listed = await client.listTools({ _meta: session });
assert.deepEqual(listed.tools.map((t) => t.name), META_TOOLS);

const sub = await client.listen({ toolsListChanged: true });
assert.equal(sub.honoredFilter.toolsListChanged, true);

const progress = [];
const forged = await client.callTool(
  { name: "forge_tool", arguments: seed, _meta: session },
  { onprogress: (p) => progress.push(p.progress) },
);
assert.equal(forged.isError, false, JSON.stringify(forged));
assert.equal(forged.structuredContent.success, true);
assert.deepEqual(progress, [0, 1, 2, 3, 4, 5]);
await untilChanged(1);
await sub.close();

listed = await client.listTools({ _meta: session }, { cacheMode: "refresh" });
assert.deepEqual(listed.tools.map((t) => t.name), [...META_TOOLS, seed.name]);

const out = await client.callTool({ name: seed.name, arguments: { text: "Hello MCP World" }, _meta: session });
assert.equal(out.isError, false, JSON.stringify(out));
assert.deepEqual(out.structuredContent, { slug: "hello-mcp-world" });

// Outside the session (a one-request session): unknown.
await assert.rejects(
  client.callTool({ name: seed.name, arguments: { text: "x" } }),
  (e) => e.code === -32602 && e.message.includes(seed.name),
);

await client.close();
console.error(`mcp-ts 2026 (${mode}): passed`);
process.exit(0);
