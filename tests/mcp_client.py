"""`temper mcp` driven by the official MCP Python SDK (PyPI `mcp`, 2.x).

Run by `cargo test --test mcp` (official_python_sdk_client, stdio) and
`cargo test --test mcp_http` (official_python_sdk_client_http) with the venv
from scripts/mcp-venv.sh:

    python tests/mcp_client.py stdio TEMPER_BIN STORE_DIR CACHE_DIR SLUGIFY_SEED_JSON
    python tests/mcp_client.py http URL TOKEN SLUGIFY_SEED_JSON

1. The SDK's stdio or Streamable HTTP client (with a bearer token): initialize,
   list (the meta-tools only), forge the slugify seed with a progress
   callback, receive tools/list_changed, list again, call slugify (the SDK
   checks structuredContent against the advertised outputSchema), a failing
   call of slugify (an isError result, no exception), an unknown tool (a
   -32602 protocol error, raised as MCPError).
   HTTP also: the high-level `Client` in its default (auto) mode, which
   finds 2026-07-28 through `server/discover`, and in legacy mode.
2. stdio only: raw bytes the SDK cannot send: malformed JSON and an unknown
   method on a fresh server, then an SDK ClientSession over the same pipes
   (a small bridge that also lets the test inject raw lines mid-session):
   initialize, ping, a malformed line, ping again, list.

Exits non-zero (with a traceback) on the first failed check. Messages are
awaited, never timed; the overall limit only guards against a hang.
"""

import json
import sys

import anyio
import mcp.types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

META_TOOLS = ["forge_tool", "delete_tool", "promote_tool", "tool_stats", "run_code", "describe_tools", "search_tools"]

HANG_SECONDS = 600


def server_args(store, cache):
    return ["mcp", "--judge", "rules", "--store", store, "--cache-dir", cache]


def text_json(result):
    assert result.content and result.content[0].type == "text", result
    return json.loads(result.content[0].text)


async def sdk_flow(read, write, seed):
    changed = anyio.Event()
    progress = []

    async def on_message(message):
        if isinstance(message, Exception):
            raise message
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async with ClientSession(read, write, message_handler=on_message) as session:
        init = await session.initialize()
        assert init.server_info.name == "temper", init
        assert init.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, init
        assert init.capabilities.tools and init.capabilities.tools.list_changed, init

        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == META_TOOLS, listed
        assert "testCases" in listed.tools[0].input_schema["required"]

        forged = await session.call_tool("forge_tool", seed, progress_callback=on_progress)
        assert not forged.is_error, forged
        assert forged.structured_content["success"] is True, forged
        assert forged.structured_content["tool"]["name"] == "slugify", forged
        # stdio: list_changed came before the result; HTTP: on the GET
        # stream, at any time.
        await changed.wait()
        assert [p[0] for p in progress] == [0, 1, 2, 3, 4, 5], progress
        assert all(p[1] == 5 for p in progress), progress

        listed = await session.list_tools()
        by_name = {t.name: t for t in listed.tools}
        assert set(by_name) == {*META_TOOLS, "slugify"}, listed
        assert by_name["slugify"].input_schema == seed["inputSchema"]
        assert by_name["slugify"].output_schema == seed["outputSchema"]

        out = await session.call_tool("slugify", {"text": "Hello MCP World"})
        assert not out.is_error, out
        assert out.structured_content == {"slug": "hello-mcp-world"}, out
        assert text_json(out) == {"slug": "hello-mcp-world"}, out

        # A failing call of a tool with an outputSchema: an error result the
        # SDK accepts, with the error as text only.
        bad = await session.call_tool("slugify", {"words": 3})
        assert bad.is_error, bad
        assert bad.structured_content is None, bad
        assert text_json(bad)["stage"] == "invoke", bad

        # An unknown tool is a protocol error (-32602), as the spec answers it.
        try:
            unknown = await session.call_tool("no_such_tool", {})
        except MCPError as e:
            assert e.code == -32602, e
            assert "no_such_tool" in e.message, e
        else:
            raise AssertionError(f"an unknown tool answered {unknown}")

        await session.send_ping()


async def stdio_flow(temper, store, cache, seed):
    params = StdioServerParameters(command=temper, args=server_args(store, cache))
    async with stdio_client(params) as (read, write):
        await sdk_flow(read, write, seed)
    print("mcp_client: SDK stdio flow passed", file=sys.stderr)


async def http_flow(url, token, seed):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            await sdk_flow(read, write, seed)
    print("mcp_client: SDK Streamable HTTP flow passed", file=sys.stderr)


async def http_auto_mode(url, token):
    """The SDK's high-level Client in its default mode: it probes the
    2026-07-28 `server/discover`, which this server answers, and stays on
    2026-07-28 (tests/mcp_client_2026.py drives that revision in full); in
    `mode="legacy"` it runs the initialize handshake on the same server."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client:
        async with Client(streamable_http_client(url, http_client=client)) as c:
            assert c.protocol_version == "2026-07-28", c.protocol_version
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == META_TOOLS, listed
        async with Client(streamable_http_client(url, http_client=client), mode="legacy") as c:
            assert c.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, c.protocol_version
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == META_TOOLS, listed
    print("mcp_client: SDK Client (auto and legacy modes) over Streamable HTTP passed", file=sys.stderr)


async def raw_then_sdk(temper, store, cache):
    proc = await anyio.open_process([temper, *server_args(store, cache)], stderr=None)
    stdout = BufferedByteReceiveStream(proc.stdout)
    write_lock = anyio.Lock()

    async def send_raw(data: bytes):
        async with write_lock:
            await proc.stdin.send(data)

    async def read_json():
        return json.loads(await stdout.receive_until(b"\n", 16 << 20))

    # Before any SDK traffic: answered errors, one per line.
    await send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    answer = await read_json()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    await send_raw(b'{"jsonrpc": "2.0", "id": 2, "method": "no/such_method"}\n')
    answer = await read_json()
    assert answer["id"] == 2 and answer["error"]["code"] == -32601, answer

    # An SDK session over the same pipes. Answers the SDK cannot represent
    # (errors with id null) are kept aside.
    to_session_send, to_session = anyio.create_memory_object_stream(16)
    from_session, from_session_recv = anyio.create_memory_object_stream(16)
    unrepresentable = []

    async def pump_out():
        async with from_session_recv:
            async for message in from_session_recv:
                line = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await send_raw(line.encode() + b"\n")

    async def pump_in():
        async with to_session_send:
            while True:
                try:
                    line = await stdout.receive_until(b"\n", 16 << 20)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return
                doc = json.loads(line)
                if "error" in doc and doc.get("id") is None:
                    unrepresentable.append(doc)
                    continue
                await to_session_send.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(doc)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_out)
        tg.start_soon(pump_in)
        async with ClientSession(to_session, from_session) as session:
            await session.initialize()
            await session.send_ping()
            await send_raw(b"this is not JSON\n")
            # Lines are handled in order: the parse error is answered before
            # this ping is read.
            await session.send_ping()
            assert [a["error"]["code"] for a in unrepresentable] == [-32700], unrepresentable
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == META_TOOLS, listed
        await proc.stdin.aclose()
        assert await proc.wait() == 0, proc.returncode
        tg.cancel_scope.cancel()
    print("mcp_client: raw messages and SDK session on the same pipes passed", file=sys.stderr)


async def main():
    mode = sys.argv[1]
    with anyio.fail_after(HANG_SECONDS):
        if mode == "stdio":
            temper, store, cache, seed_path = sys.argv[2:6]
            seed = load(seed_path)
            await stdio_flow(temper, store, cache, seed)
            await raw_then_sdk(temper, store, cache)
        elif mode == "http":
            url, token, seed_path = sys.argv[2:5]
            await http_flow(url, token, load(seed_path))
            await http_auto_mode(url, token)
        else:
            raise SystemExit(f"unknown mode {mode!r}")


def load(path):
    with open(path) as f:
        return json.load(f)


if __name__ == "__main__":
    anyio.run(main)
