"""`search_tools` driven by the official MCP Python SDK (PyPI `mcp`), its
stdio client in its default mode. Run by `cargo test --test all discovery`
(official_python_sdk_client_finds_and_calls) with the venv from
scripts/mcp-venv.sh, on a store whose session holds 300 tools:

    python tests/mcp_discovery_client.py TEMPER_BIN STORE_DIR CACHE_DIR

list (slugify is not listed), search_tools for a paraphrase (slugify found,
tools/list_changed received), list again (slugify listed, with its schema),
call slugify. Exits non-zero (with a traceback) on the first failed check;
messages are awaited, never timed.
"""

import sys

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HANG_SECONDS = 600


async def flow(temper, store, cache):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, Exception):
            raise message
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    params = StdioServerParameters(
        command=temper,
        args=["mcp", "--judge", "rules", "--store", store, "--cache-dir", cache],
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            assert "search_tools" in names, names
            assert "slugify" not in names, names
            search = next(t for t in listed.tools if t.name == "search_tools")
            assert "more tools" in search.description, search.description

            found = await session.call_tool(
                "search_tools", {"query": "make a url friendly slug out of a title", "limit": 3}
            )
            assert not found.is_error, found
            hits = found.structured_content["tools"]
            assert "slugify" in [h["name"] for h in hits], hits
            await changed.wait()

            listed = await session.list_tools()
            by_name = {t.name: t for t in listed.tools}
            assert "slugify" in by_name, list(by_name)
            assert by_name["slugify"].output_schema is not None

            out = await session.call_tool("slugify", {"text": "Hello MCP World"})
            assert not out.is_error, out
            assert out.structured_content == {"slug": "hello-mcp-world"}, out
    print("mcp_discovery_client: passed", file=sys.stderr)


async def main():
    temper, store, cache = sys.argv[1:4]
    with anyio.fail_after(HANG_SECONDS):
        await flow(temper, store, cache)


if __name__ == "__main__":
    anyio.run(main)
