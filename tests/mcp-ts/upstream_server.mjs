// An upstream MCP server for Temper's hub, written with the official MCP
// TypeScript SDK (McpServer + StreamableHTTPServerTransport, one session per
// `initialize`), over Streamable HTTP on 127.0.0.1.
//
// Usage: node upstream_server.mjs [--port N] [--json]
//   --port N   listen on N (default 0: a free port); prints "LISTENING <port>"
//              on stdout once it listens
//   --json     answer POSTs with JSON bodies instead of event streams
// Environment:
//   UPSTREAM_AUTH  when set, every request must carry
//                  `Authorization: <UPSTREAM_AUTH>`; others get HTTP 401
//                  with a body that echoes what they sent (a hostile
//                  server: Temper must not repeat it)
//
// Tools (SDK handlers): search_issues (outputSchema, structuredContent),
// echo_text (text), slow (sleeps), fail (isError), big (n bytes of text),
// add_tool (registers a tool: the SDK sends tools/list_changed).
// Faults (answered before the SDK sees the call, so they are listed with
// schemas but misbehave on the wire): http_500, revoked (HTTP 401, echoing
// the Authorization header), malformed (200 with a body that is not JSON),
// malformed_event (an event stream whose event is not JSON),
// liar (a structuredContent that breaks its own outputSchema), crash (the
// process exits during the call).

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod/v4";

const args = process.argv.slice(2);
const portArg = args.indexOf("--port");
const port = portArg >= 0 ? Number(args[portArg + 1]) : 0;
const jsonResponses = args.includes("--json");
const requiredAuth = process.env.UPSTREAM_AUTH;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function makeServer() {
  const server = new McpServer({ name: "hub-test-ts-upstream", version: "1.0.0" });
  server.registerTool(
    "search_issues",
    {
      description: "Searches the (fake) issue tracker.",
      inputSchema: { query: z.string().min(1), limit: z.number().int().min(1).max(10).optional() },
      outputSchema: {
        query: z.string(),
        total: z.number().int(),
        items: z.array(z.object({ id: z.number().int(), title: z.string() })),
      },
    },
    async ({ query, limit }) => {
      const n = limit ?? 2;
      const items = Array.from({ length: n }, (_, i) => ({ id: i + 1, title: `${query} #${i + 1}` }));
      const structuredContent = { query, total: n, items };
      return { content: [{ type: "text", text: JSON.stringify(structuredContent) }], structuredContent };
    },
  );
  server.registerTool(
    "echo_text",
    { description: "Echoes text back.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text: `you said: ${text}` }] }),
  );
  server.registerTool(
    "slow",
    { description: "Answers after ms milliseconds.", inputSchema: { ms: z.number().int().min(0) } },
    async ({ ms }) => {
      await sleep(ms);
      return { content: [{ type: "text", text: `slept ${ms} ms` }] };
    },
  );
  server.registerTool(
    "fail",
    { description: "Reports an error.", inputSchema: { reason: z.string() } },
    async ({ reason }) => ({ isError: true, content: [{ type: "text", text: `failed on purpose: ${reason}` }] }),
  );
  server.registerTool(
    "big",
    { description: "Returns n bytes of text.", inputSchema: { n: z.number().int().min(0) } },
    async ({ n }) => ({ content: [{ type: "text", text: "x".repeat(n) }] }),
  );
  server.registerTool(
    "add_tool",
    { description: "Registers a tool named `name` (the server then says its list changed).", inputSchema: { name: z.string() } },
    async ({ name }) => {
      server.registerTool(
        name,
        { description: "Added at run time.", inputSchema: { x: z.number() } },
        async ({ x }) => ({ content: [{ type: "text", text: JSON.stringify({ doubled: x * 2 }) }] }),
      );
      return { content: [{ type: "text", text: `added ${name}` }] };
    },
  );
  // Listed with real schemas; their calls are answered by the fault layer.
  const unreachable = async () => ({ isError: true, content: [{ type: "text", text: "not reached" }] });
  for (const name of ["http_500", "revoked", "malformed", "malformed_event", "crash"]) {
    server.registerTool(name, { description: `Fault: ${name}.`, inputSchema: {} }, unreachable);
  }
  server.registerTool(
    "liar",
    { description: "Fault: breaks its own output schema.", inputSchema: {}, outputSchema: { count: z.number() } },
    unreachable,
  );
  return server;
}

const sessions = new Map();

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/// Answers a faulty tool call itself; true when it did.
function fault(body, req, res) {
  if (!body || body.method !== "tools/call") return false;
  const name = body.params?.name;
  switch (name) {
    case "http_500":
      res.writeHead(500, { "content-type": "text/plain" }).end("internal failure in the upstream");
      return true;
    case "revoked":
      res
        .writeHead(401, { "content-type": "text/plain" })
        .end(`token revoked: ${req.headers.authorization ?? "(none)"}`);
      return true;
    case "malformed":
      res.writeHead(200, { "content-type": "application/json" }).end("{this is not json");
      return true;
    case "malformed_event":
      res.writeHead(200, { "content-type": "text/event-stream" }).end("event: message\ndata: {this is not json\n\n");
      return true;
    case "liar":
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: body.id,
          result: { content: [{ type: "text", text: "{}" }], structuredContent: { count: "many" } },
        }),
      );
      return true;
    case "crash":
      process.exit(1);
    default:
      return false;
  }
}

const http = createServer(async (req, res) => {
  try {
    if (requiredAuth !== undefined && req.headers.authorization !== requiredAuth) {
      res
        .writeHead(401, { "content-type": "text/plain" })
        .end(`bad credentials: ${req.headers.authorization ?? "(none)"}`);
      return;
    }
    const raw = req.method === "POST" ? await readBody(req) : "";
    const body = raw ? JSON.parse(raw) : undefined;
    if (fault(body, req, res)) return;
    const sessionId = req.headers["mcp-session-id"];
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId) {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      if (req.method !== "POST" || !isInitializeRequest(body)) {
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "No session" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: jsonResponses,
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error("upstream_server:", e);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

http.listen(port, "127.0.0.1", () => {
  process.stdout.write(`LISTENING ${http.address().port}\n`);
});

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => process.exit(0));
}
