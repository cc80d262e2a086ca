"""What an upstream sends during a call, through `temper mcp --http`, to the
official MCP Python SDK 2.3 client in its default mode (`Client(url)`, which
probes `server/discover` and speaks 2026-07-28 with Temper).

Run by `cargo test --test all hub_relay` (tests/all/hub_relay.rs) with the
venv from scripts/mcp-venv.sh and the servers from scripts/mcp-servers.sh:

    python tests/mcp_relay_client.py URL TOKEN SECRET [legacy]
    python tests/mcp_relay_client.py --stdio SPEC_JSON SECRET

The gateway fronts the official everything server (`ev.`, `relay =
["elicitation", "sampling"]`) and the SDK-written test upstream (`up.`,
tests/fixtures/hub/upstream_server.py, whose env holds SECRET).

Checks, each with the SDK's own callbacks:
- `ev.trigger-elicitation-request`: the everything server's
  `elicitation/create` reaches the client's elicitation callback (an
  `input_required` result the SDK resolves), the answer goes back to the
  server, whose result names what the callback gave;
- `ev.trigger-sampling-request`: the same for `sampling/createMessage`;
- `up.chatty` with `log_level="info"`: its two log messages reach the
  logging callback, the upstream's secret cut out;
- a client without callbacks (declaring neither capability): the
  everything server hears a refusal, and its tool's error says so.

With `legacy`, the same checks with `Client(url, mode="legacy")`: the
requests come as server-to-client requests on the call's event stream.

With `--stdio`, the same client in `mode="legacy"` over stdio (SPEC_JSON:
{"command": ..., "args": [...], "env": {...}} starting `temper mcp`): the
upstreams' requests come to it as server-to-client requests (its
callbacks answer them), and every log message of its call reaches it.

Exits non-zero (with a traceback) on the first failed check.
"""

import json
import sys

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

HANG_SECONDS = 300


def texts(result):
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def flow(url, token, secret, mode):
    asked = []
    logs = []

    async def on_elicit(context, params):
        asked.append(("elicitation", params.message))
        if params.message == "Which one?":  # the SDK-written upstream's `ask`
            return types.ElicitResult(action="accept", content={"pick": "b"})
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def on_sample(context, params):
        asked.append(("sampling", params.messages[0].content.text))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="scripted-model",
        )

    async def on_log(params):
        logs.append(params)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    legacy = {"mode": "legacy"} if mode == "legacy" else {}
    client = Client(
        streamable_http_client(url, http_client=http),
        **legacy,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        logging_callback=on_log,
        log_level="info",
    )
    async with http, client as c:
        names = [t.name for t in (await c.list_tools()).tools]
        for name in ["ev.trigger-elicitation-request", "ev.trigger-sampling-request", "up.chatty"]:
            assert name in names, names

        out = await c.call_tool("ev.trigger-elicitation-request", {})
        assert not out.is_error, out
        text = texts(out)
        assert "User provided the requested information" in text, text
        assert "- Name: Ada Lovelace" in text and "- Agreed to terms: true" in text, text
        assert asked[0][0] == "elicitation", asked

        out = await c.call_tool("ev.trigger-sampling-request", {"prompt": "the answer", "maxTokens": 5})
        assert not out.is_error, out
        text = texts(out)
        assert "forty-two" in text and "scripted-model" in text, text
        assert asked[1] == ("sampling", "Resource trigger-sampling-request context: the answer"), asked

        out = await c.call_tool("up.chatty", {})
        assert texts(out) == "chatty: done", out
        seen = [(m.level, m.data) for m in logs]
        assert ("info", "chatty: starting") in seen, seen
        assert ("warning", "chatty: using key [redacted]") in seen, seen
        assert secret not in repr(seen), seen

    # A client that declares neither capability: the upstream is refused.
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), **legacy) as c:
        try:
            out = await c.call_tool("ev.trigger-elicitation-request", {})
        except MCPError as e:
            message = e.message
        else:
            assert out.is_error, out
            message = texts(out)
        assert "declare that capability" in message, message
    print(f"relayed ({mode}): {len(asked)} requests, {len(logs)} log messages")


async def legacy_stdio(spec, secret):
    asked = []
    logs = []

    async def on_elicit(context, params):
        asked.append(params.message)
        if params.message == "Which one?":  # the SDK-written upstream's `ask`
            return types.ElicitResult(action="accept", content={"pick": "b"})
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    async def on_log(params):
        logs.append(params)

    server = StdioServerParameters(command=spec["command"], args=spec["args"], env=spec["env"])
    client = Client(server, mode="legacy", elicitation_callback=on_elicit, logging_callback=on_log)
    async with client as c:
        out = await c.call_tool("up.ask", {})
        assert texts(out) == "answered: accept b", out
        assert asked == ["Which one?"], asked
        out = await c.call_tool("up.chatty", {})
        assert texts(out) == "chatty: done", out
        seen = [(m.level, m.data) for m in logs]
        assert ("info", "chatty: starting") in seen, seen
        assert ("warning", "chatty: using key [redacted]") in seen, seen
        assert secret not in repr(seen), seen
        # The everything server's elicitation too, through the same client.
        out = await c.call_tool("ev.trigger-elicitation-request", {})
        assert "User provided the requested information" in texts(out), out
    print(f"legacy relayed: {len(asked)} requests, {len(logs)} log messages")


async def main():
    with anyio.fail_after(HANG_SECONDS):
        if sys.argv[1] == "--stdio":
            with open(sys.argv[2]) as f:
                spec = json.load(f)
            await legacy_stdio(spec, sys.argv[3])
        else:
            mode = sys.argv[4] if len(sys.argv) > 4 else "default"
            await flow(sys.argv[1], sys.argv[2], sys.argv[3], mode)


anyio.run(main)
