"""`temper mcp --http` driven by the official MCP Python SDK 2.3 speaking
MCP 2026-07-28 (no initialize, no Mcp-Session-Id; per-request `_meta`).

Run by `cargo test --test all mcp_modern` (official_python_sdk_client_2026)
with the venv from scripts/mcp-venv.sh:

    python tests/mcp_client_2026.py URL TOKEN SLUGIFY_SEED_JSON MODE [SAME_AGENT_TOKEN OTHER_AGENT_TOKEN]

MODE is the SDK's `Client(mode=...)`: "2026-07-28" (pinned), "auto"
(probes `server/discover`, which this server answers, and stays modern), or
"default": `Client(url)` as a new user writes it, no mode given.

In the session named by `_meta["dev.temper/session"]` = "py-MODE": list
(the meta-tools only), open `subscriptions/listen` for tools, forge the
slugify seed with a progress callback, receive `list_changed` on the
subscription, list again (slugify is there), call slugify.

Without a session named (what a standard client sends): the request runs
in its agent's default session. slugify (in py-MODE) is unknown there
(-32602); a forge there succeeds, its result names the session
(`_meta["dev.temper/session"]` = "default"), and the same client lists and
calls the new tool in its next requests. With the extra tokens: a second
client of the same agent lists and calls it too, and a client of another
agent neither lists nor calls it. `ping` no longer exists (-32601).

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

META_TOOLS = ["forge_tool", "delete_tool", "promote_tool", "tool_stats", "run_code", "describe_tools", "search_tools"]
SESSION_KEY = "dev.temper/session"
HANG_SECONDS = 600


def connect(url, token, mode):
    """An SDK client on `url` with `token`, in `mode` ("default": none given)."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    client = Client(transport) if mode == "default" else Client(transport, mode=mode)
    return http, client


async def second_clients(url, seed, mode, name, same_token, other_token):
    """Another client of the same agent sees and calls `name` in the default
    session; a client of another agent does not."""
    http, client = connect(url, same_token, mode)
    async with http, client as c:
        listed = await c.list_tools(cache_mode="bypass")
        assert name in [t.name for t in listed.tools], listed
        out = await c.call_tool(name, {"text": "Second Client"})
        assert not out.is_error, out
        assert out.structured_content == {"slug": "second-client"}, out
    http, client = connect(url, other_token, mode)
    async with http, client as c:
        listed = await c.list_tools(cache_mode="bypass")
        assert name not in [t.name for t in listed.tools], listed
        try:
            stolen = await c.call_tool(name, {"text": "x"})
        except MCPError as e:
            assert e.code == -32602 and name in e.message, e
        else:
            raise AssertionError(f"another agent called {name}: {stolen}")


async def flow(url, token, seed, mode, same_token=None, other_token=None):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    session = {SESSION_KEY: f"py-{mode}"}
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async with http:
        transport = streamable_http_client(url, http_client=http)
        client = Client(transport) if mode == "default" else Client(transport, mode=mode)
        async with client as c:
            assert c.protocol_version == "2026-07-28", c.protocol_version
            if mode in ("auto", "default"):
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

            # No session named: the agent's default session, without slugify.
            try:
                unknown = await c.call_tool("slugify", {"text": "x"})
            except MCPError as e:
                assert e.code == -32602, e
                assert "slugify" in e.message, e
            else:
                raise AssertionError(f"slugify outside its session answered {unknown}")

            # Forge, then call, as a standard client does: no session named.
            # The tool stays in the default session, which the result names.
            name = f"dflt_{mode.replace('-', '_')}"
            forged = await c.call_tool("forge_tool", dict(seed, name=name))
            assert not forged.is_error and forged.structured_content["success"], forged
            assert forged.meta is not None and forged.meta.get(SESSION_KEY) == "default", forged
            listed = await c.list_tools(cache_mode="bypass")
            assert name in [t.name for t in listed.tools], listed
            out = await c.call_tool(name, {"text": "Forged Then Called"})
            assert not out.is_error, out
            assert out.structured_content == {"slug": "forged-then-called"}, out
            # Naming the default session reaches the same tier.
            out = await c.call_tool(name, {"text": "pinned"}, meta={SESSION_KEY: "default"})
            assert out.structured_content == {"slug": "pinned"}, out

            # ping is removed in 2026-07-28.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    pong = await c.send_ping()
                except MCPError as e:
                    assert e.code == -32601, e
                else:
                    raise AssertionError(f"ping answered {pong}")
    if same_token and other_token:
        await second_clients(url, seed, mode, name, same_token, other_token)
    print(f"mcp_client_2026: SDK Client mode={mode} over Streamable HTTP passed", file=sys.stderr)


async def main():
    url, token, seed_path, mode = sys.argv[1:5]
    same_token, other_token = (sys.argv[5:7] + [None, None])[:2]
    with open(seed_path) as f:
        seed = json.load(f)
    with anyio.fail_after(HANG_SECONDS):
        await flow(url, token, seed, mode, same_token, other_token)


if __name__ == "__main__":
    anyio.run(main)
