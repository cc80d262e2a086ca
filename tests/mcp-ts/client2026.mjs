// `temper mcp --http` driven by the official MCP TypeScript client 2.4
// (@modelcontextprotocol/client, installed by scripts/mcp-npm.sh) speaking
// MCP 2026-07-28. Run by `cargo test --test all mcp_modern`
// (official_typescript_client_2026):
//
//   node tests/mcp-ts/client2026.mjs URL TOKEN SEED_JSON MODE [SAME_AGENT_TOKEN OTHER_AGENT_TOKEN]
//
// MODE: "pin" (versionNegotiation pinned to 2026-07-28) or "auto" (probes
// server/discover). In the session `_meta["dev.temper/session"]` = "ts-MODE":
// list (the meta-tools), listen for tools, forge the seed with progress,
// list_changed on the subscription, list again, call. Without a session
// named (the agent's default session) that tool is unknown (-32602); a
// forge there names the session in its result's `_meta`, and the client
// calls the new tool next; a second client of the same agent lists and
// calls it, a client of another agent does not. Exits non-zero on the
// first failed check; waits for messages, never for a fixed time.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const HANG_MS = 600_000;
setTimeout(() => {
  console.error("mcp-ts 2026: no progress for too long");
  process.exit(2);
}, HANG_MS).unref();

const META_TOOLS = ["forge_tool", "delete_tool", "promote_tool", "tool_stats", "run_code", "describe_tools", "search_tools"];
const [url, token, seedPath, mode, sameToken, otherToken] = process.argv.slice(2);
const seed = JSON.parse(readFileSync(seedPath, "utf8"));
const session = { "dev.temper/session": `ts-${mode}` };

const negotiation = mode === "auto" ? { mode: "auto" } : { mode: { pin: "2026-07-28" } };
const connect = async (bearer) => {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const c = new Client({ name: "temper-ts-2026-test", version: "0.0.0" }, { versionNegotiation: negotiation });
  await c.connect(transport);
  return c;
};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
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

// Without a session named (the agent's default session): unknown there.
await assert.rejects(
  client.callTool({ name: seed.name, arguments: { text: "x" } }),
  (e) => e.code === -32602 && e.message.includes(seed.name),
);

// Forge, then call, without naming a session: the default session keeps it.
const name = `dflt_ts_${mode}`;
const made = await client.callTool({ name: "forge_tool", arguments: { ...seed, name } });
assert.equal(made.isError, false, JSON.stringify(made));
assert.equal(made.structuredContent.success, true);
assert.equal(made._meta?.["dev.temper/session"], "default", JSON.stringify(made));
listed = await client.listTools({}, { cacheMode: "refresh" });
assert.ok(listed.tools.some((t) => t.name === name), JSON.stringify(listed.tools.map((t) => t.name)));
const called = await client.callTool({ name, arguments: { text: "Forged Then Called" } });
assert.deepEqual(called.structuredContent, { slug: "forged-then-called" });
await client.close();

if (sameToken && otherToken) {
  // A second client of the same agent: sees and calls it.
  const same = await connect(sameToken);
  const seen = await same.listTools({}, { cacheMode: "refresh" });
  assert.ok(seen.tools.some((t) => t.name === name));
  const out2 = await same.callTool({ name, arguments: { text: "Second Client" } });
  assert.deepEqual(out2.structuredContent, { slug: "second-client" });
  await same.close();
  // A client of another agent: neither.
  const other = await connect(otherToken);
  const theirs = await other.listTools({}, { cacheMode: "refresh" });
  assert.ok(!theirs.tools.some((t) => t.name === name));
  await assert.rejects(
    other.callTool({ name, arguments: { text: "x" } }),
    (e) => e.code === -32602 && e.message.includes(name),
  );
  await other.close();
}

console.error(`mcp-ts 2026 (${mode}): passed`);
process.exit(0);
