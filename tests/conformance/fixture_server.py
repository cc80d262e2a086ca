"""An MCP server with the fixtures the MCP conformance suite
(`@modelcontextprotocol/conformance@0.2.0-alpha.12`) calls, written with the
official Python SDK's `MCPServer` (PyPI `mcp` 2.x) for
scripts/conformance.sh: the suite runs against it directly (Streamable
HTTP) and through `temper mcp` fronting it (stdio, as an upstream of the
tools file tests/conformance/tools.toml).

The names, arguments and results are the ones each scenario's description
in the suite asks for (`conformance list --server`, and the scenario's
"Server Implementation Requirements"):

- tools: test_simple_text, test_image_content, test_audio_content,
  test_embedded_resource, test_multiple_content_types, test_error_handling,
  test_tool_with_progress, test_tool_with_logging, test_sampling,
  test_elicitation, json_schema_2020_12_tool;
- resources: test://static-text, test://static-binary, the template
  test://template/{id}/data;
- prompts: test_simple_prompt, test_prompt_with_arguments,
  test_prompt_with_embedded_resource, test_prompt_with_image;
- completion/complete for test_prompt_with_arguments.

Usage: fixture_server.py            (stdio)
       fixture_server.py --http PORT (Streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import argparse
import asyncio
import base64
import io
import struct
import wave
import zlib
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp_types import (
    AudioContent,
    CallToolResult,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    SamplingMessage,
    SetLevelRequestParams,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field


def _png_1x1_red() -> bytes:
    """A 1x1 red RGB PNG, built here (signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then R G B
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    """10 ms of 8 kHz mono 16-bit silence as a WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 80)
    return out.getvalue()


PNG = _png_1x1_red()
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def json_schema_2020_12_tool(**arguments: Any) -> str:
    return f"Received: {sorted(arguments)}"


# The suite checks that this inputSchema is listed as written: the SDK would
# derive one from the signature, so the tool's `parameters` are set here.
_schema_tool = Tool.from_function(
    json_schema_2020_12_tool,
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
)
_schema_tool.parameters = JSON_SCHEMA_2020_12


server = MCPServer("temper-conformance-fixtures", version="1.0.0", tools=[_schema_tool])


# --- tools -----------------------------------------------------------------


@server.tool(description="Returns a simple text response.")
def test_simple_text() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="This is a simple text response for testing.")])


@server.tool(description="Returns a 1x1 red PNG image.")
def test_image_content() -> CallToolResult:
    return CallToolResult(content=[ImageContent(type="image", data=PNG_B64, mime_type="image/png")])


@server.tool(description="Returns a short WAV clip.")
def test_audio_content() -> CallToolResult:
    return CallToolResult(content=[AudioContent(type="audio", data=WAV_B64, mime_type="audio/wav")])


@server.tool(description="Returns an embedded text resource.")
def test_embedded_resource() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return CallToolResult(content=[EmbeddedResource(type="resource", resource=resource)])


@server.tool(description="Returns text, an image and an embedded resource.")
def test_multiple_content_types() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG_B64, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=resource),
        ]
    )


@server.tool(description="Always fails with isError: true.")
def test_error_handling() -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text="This tool intentionally returns an error for testing")],
        is_error=True,
    )


@server.tool(description="Reports progress 0, 50 and 100 of 100, 50 ms apart.")
async def test_tool_with_progress(ctx: Context) -> str:
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(progress, 100)
    return "Progress test completed"


@server.tool(description="Sends three info log messages, 50 ms apart.")
async def test_tool_with_logging(ctx: Context) -> str:
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Logging test completed"


@server.tool(description="Asks the client for a completion of the prompt (sampling/createMessage).")
async def test_sampling(prompt: str, ctx: Context) -> str:
    answer = await ctx.request_context.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    text = answer.content.text if isinstance(answer.content, TextContent) else str(answer.content)
    return f"LLM response: {text}"


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@server.tool(description="Asks the user for a username and an email (elicitation/create).")
async def test_elicitation(message: str, ctx: Context) -> str:
    answer = await ctx.elicit(message, UserInfo)
    data = answer.data.model_dump() if answer.action == "accept" else None
    return f"User response: action={answer.action}, content={data}"


# --- resources -------------------------------------------------------------


@server.resource(
    "test://static-text", name="static-text", description="A static text resource.", mime_type="text/plain"
)
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource(
    "test://static-binary", name="static-binary", description="A static binary resource (PNG).", mime_type="image/png"
)
def static_binary() -> bytes:
    return PNG


@server.resource(
    "test://template/{id}/data",
    name="template-data",
    description="Data for an ID, from a URI template.",
    mime_type="application/json",
)
def template_data(id: str) -> str:
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


# --- prompts ---------------------------------------------------------------


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> list[Message]:
    return [UserMessage("This is a simple prompt for testing.")]


@server.prompt(description="A prompt with two required arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt(description="A prompt embedding the resource named by resourceUri.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 (the suite's name)
    resource = TextResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    return [
        UserMessage(EmbeddedResource(type="resource", resource=resource)),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt with an image.")
def test_prompt_with_image() -> list[Message]:
    return [
        UserMessage(ImageContent(type="image", data=PNG_B64, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    if getattr(ref, "name", None) == "test_prompt_with_arguments":
        values = [v for v in ("paris", "park", "party", "test-value") if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return None


# logging/setLevel (2025-11-25; gone in 2026-07-28), which the logging
# scenario sends before its call. MCPServer has no hook for it: the SDK's
# documented way to serve a method the 2026 revision removed is the lowlevel
# Server's add_request_handler. Every level is sent (the tool logs at info).
async def set_logging_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_logging_level)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()
