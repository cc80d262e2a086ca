"""`temper mcp --http` driven by the official MCP Python SDK 2.3 speaking
MCP 2026-07-28 (no initialize, no Mcp-Session-Id; per-request `_meta`).

Run by `cargo test --test all mcp_modern` (official_python_sdk_client_2026)
with the venv from scripts/mcp-venv.sh:

    python tests/mcp_client_2026.py URL TOKEN SLUGIFY_SEED_JSON MODE

MODE is the SDK's `Client(mode=...)`: "2026-07-28" (pinned) or "auto"
(probes `server/discover`, which this server answers, and stays modern).

In the session named by `_meta["dev.temper/session"]` = "py-MODE": list
(the meta-tools only), open `subscriptions/listen` for tools, forge the
slugify seed with a progress callback, receive `list_changed` on the
subscription, list again (slugify is there), call slugify. Outside the
session (a one-request session per request): slugify is unknown (-32602),
a forge succeeds and is gone with its request. `ping` no longer exists
(-32601).

Exits non-zero (with a traceback) on the first failed check. Messages are
awaited, never timed; the overall limit only guards against a hang.
"""

import json
import sys
import warnings

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

META_TOOLS = ["forge_tool", "promote_tool", "tool_stats", "run_code", "describe_tools"]
SESSION_KEY = "dev.temper/session"
HANG_SECONDS = 600


async def flow(url, token, seed, mode):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    session = {SESSION_KEY: f"py-{mode}"}
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            assert c.protocol_version == "2026-07-28", c.protocol_version
            if mode == "auto":
                # The probe's DiscoverResult was adopted.
                assert c.server_info is not None and c.server_info.name == "temper", c.server_info
                assert c.server_capabilities.tools is not None, c.server_capabilities
            else:
                # A pinned client never asked: server/discover on the wire.
                raw = await c.session.send_discover("2026-07-28")
                assert raw["supportedVersions"][0] == "2026-07-28", raw
                assert raw["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "temper", raw
                assert raw["capabilities"]["tools"]["listChanged"] is True, raw

            listed = await c.list_tools(meta=session)
            assert [t.name for t in listed.tools] == META_TOOLS, listed

            async with c.listen(tools_list_changed=True) as sub:
                assert sub.honored.tools_list_changed is True, sub.honored
                forged = await c.call_tool("forge_tool", seed, progress_callback=on_progress, meta=session)
                assert not forged.is_error, forged
                assert forged.structured_content["success"] is True, forged
                assert [p[0] for p in progress] == [0, 1, 2, 3, 4, 5], progress
                event = await sub.__anext__()
                assert isinstance(event, ToolsListChanged), event

            listed = await c.list_tools(meta=session)
            by_name = {t.name: t for t in listed.tools}
            assert list(by_name) == [*META_TOOLS, "slugify"], listed
            assert by_name["slugify"].output_schema == seed["outputSchema"]

            out = await c.call_tool("slugify", {"text": "Hello MCP World"}, meta=session)
            assert not out.is_error, out
            assert out.structured_content == {"slug": "hello-mcp-world"}, out

            # No session named: a session of its own, without slugify.
            try:
                unknown = await c.call_tool("slugify", {"text": "x"})
            except MCPError as e:
                assert e.code == -32602, e
                assert "slugify" in e.message, e
            else:
                raise AssertionError(f"slugify outside its session answered {unknown}")

            # A forge in a one-request session works, and is gone after it.
            once = dict(seed, name=f"once_{mode.replace('-', '_')}")
            forged = await c.call_tool("forge_tool", once)
            assert not forged.is_error and forged.structured_content["success"], forged
            listed = await c.list_tools(cache_mode="bypass")
            assert [t.name for t in listed.tools] == META_TOOLS, listed

            # ping is removed in 2026-07-28.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    pong = await c.send_ping()
                except MCPError as e:
                    assert e.code == -32601, e
                else:
                    raise AssertionError(f"ping answered {pong}")
    print(f"mcp_client_2026: SDK Client mode={mode} over Streamable HTTP passed", file=sys.stderr)


async def main():
    url, token, seed_path, mode = sys.argv[1:5]
    with open(seed_path) as f:
        seed = json.load(f)
    with anyio.fail_after(HANG_SECONDS):
        await flow(url, token, seed, mode)


if __name__ == "__main__":
    anyio.run(main)
