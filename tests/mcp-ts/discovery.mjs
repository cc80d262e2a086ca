// `search_tools` driven by the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, installed by scripts/mcp-npm.sh) over stdio.
// Run by `cargo test --test all discovery`
// (official_typescript_sdk_client_finds_and_calls) on a store whose session
// holds 300 tools:
//
//   node tests/mcp-ts/discovery.mjs TEMPER_BIN STORE_DIR CACHE_DIR
//
// list (slugify is not listed), search_tools for a paraphrase (found,
// tools/list_changed received), list again (slugify listed), call slugify
// (the SDK checks structuredContent against the listed outputSchema).
// Exits non-zero on the first failed check; waits for messages, never for a
// fixed time (the overall limit only guards against a hang).
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

setTimeout(() => {
  console.error("discovery.mjs: no progress for too long");
  process.exit(2);
}, 600_000).unref();

const [temper, store, cache] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: temper,
  args: ["mcp", "--judge", "rules", "--store", store, "--cache-dir", cache],
  stderr: "inherit",
});
const client = new Client({ name: "temper-ts-discovery", version: "0.0.0" });
let changed;
const listChanged = new Promise((resolve) => (changed = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed());
await client.connect(transport);

let listed = await client.listTools();
let names = listed.tools.map((t) => t.name);
assert.ok(names.includes("search_tools"), names);
assert.ok(!names.includes("slugify"), names);

const found = await client.callTool({
  name: "search_tools",
  arguments: { query: "make a url friendly slug out of a title", limit: 3 },
});
assert.equal(found.isError, false, JSON.stringify(found));
assert.ok(found.structuredContent.tools.some((t) => t.name === "slugify"), JSON.stringify(found));
await listChanged;

listed = await client.listTools();
names = listed.tools.map((t) => t.name);
assert.ok(names.includes("slugify"), names);

const out = await client.callTool({ name: "slugify", arguments: { text: "Hello MCP World" } });
assert.equal(out.isError, false, JSON.stringify(out));
assert.deepEqual(out.structuredContent, { slug: "hello-mcp-world" });
await client.close();
console.error("discovery.mjs: passed");
