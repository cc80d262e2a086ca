"""`temper mcp` driven by the official MCP Python SDK (PyPI `mcp`).

Run by `cargo test --test mcp` (official_python_sdk_client) with the venv
from scripts/mcp-venv.sh:

    python tests/mcp_client.py TEMPER_BIN STORE_DIR CACHE_DIR SLUGIFY_SEED_JSON

1. The SDK's stdio client: initialize, list (only forge_tool), forge the
   slugify seed with a progress callback, receive tools/list_changed, list
   again, call slugify (the SDK checks structuredContent against the
   advertised outputSchema), call an unknown tool.
2. Raw bytes the SDK cannot send: malformed JSON and an unknown method on a
   fresh server, then an SDK ClientSession over the same pipes (a small
   bridge that also lets the test inject raw lines mid-session): initialize,
   ping, a malformed line, ping again, list.

Exits non-zero (with a traceback) on the first failed check. Messages are
awaited, never timed; the overall limit only guards against a hang.
"""

import json
import sys

import anyio
import mcp.types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS

HANG_SECONDS = 600


def server_args(store, cache):
    return ["mcp", "--judge", "rules", "--store", store, "--cache-dir", cache]


def text_json(result):
    assert result.content and result.content[0].type == "text", result
    return json.loads(result.content[0].text)


async def sdk_flow(temper, store, cache, seed):
    changed = []
    progress = []

    async def on_message(message):
        if isinstance(message, Exception):
            raise message
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changed.append(message.root)

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    params = StdioServerParameters(command=temper, args=server_args(store, cache))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            assert init.serverInfo.name == "temper", init
            assert init.protocolVersion in SUPPORTED_PROTOCOL_VERSIONS, init
            assert init.capabilities.tools and init.capabilities.tools.listChanged, init

            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["forge_tool"], listed
            assert "testCases" in listed.tools[0].inputSchema["required"]

            forged = await session.call_tool("forge_tool", seed, progress_callback=on_progress)
            assert not forged.isError, forged
            assert forged.structuredContent["success"] is True, forged
            assert forged.structuredContent["tool"]["name"] == "slugify", forged
            # The server sends list_changed before the result; the session
            # handles messages in order.
            assert len(changed) == 1, changed
            assert [p[0] for p in progress] == [0, 1, 2, 3, 4, 5], progress
            assert all(p[1] == 5 for p in progress), progress

            listed = await session.list_tools()
            by_name = {t.name: t for t in listed.tools}
            assert set(by_name) == {"forge_tool", "slugify"}, listed
            assert by_name["slugify"].inputSchema == seed["inputSchema"]
            assert by_name["slugify"].outputSchema == seed["outputSchema"]

            out = await session.call_tool("slugify", {"text": "Hello MCP World"})
            assert not out.isError, out
            assert out.structuredContent == {"slug": "hello-mcp-world"}, out
            assert text_json(out) == {"slug": "hello-mcp-world"}, out

            unknown = await session.call_tool("no_such_tool", {})
            assert unknown.isError, unknown
            assert "no_such_tool" in text_json(unknown)["error"], unknown

            await session.send_ping()
    print("mcp_client: SDK stdio flow passed", file=sys.stderr)


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
                await to_session_send.send(SessionMessage(types.JSONRPCMessage.model_validate(doc)))

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
            assert [t.name for t in listed.tools] == ["forge_tool"], listed
        await proc.stdin.aclose()
        assert await proc.wait() == 0, proc.returncode
        tg.cancel_scope.cancel()
    print("mcp_client: raw messages and SDK session on the same pipes passed", file=sys.stderr)


async def main():
    temper, store, cache, seed_path = sys.argv[1:5]
    with open(seed_path) as f:
        seed = json.load(f)
    with anyio.fail_after(HANG_SECONDS):
        await sdk_flow(temper, store, cache, seed)
        await raw_then_sdk(temper, store, cache)


if __name__ == "__main__":
    anyio.run(main)
