"""Reference MCP servers called directly and through `temper mcp`, with the
same official MCP Python SDK client (PyPI `mcp`, 2.x), compared.

Run by `cargo test --test all hub_reference` (tests/all/hub_reference.rs)
with the venv from scripts/mcp-venv.sh and the servers from
scripts/mcp-servers.sh:

    python tests/mcp_gateway_compare.py SPEC_JSON

SPEC_JSON names one server:
    {"name": ..., "direct": {"command": ..., "args": [...], "env": {...}},
     "gateway": {"command": ..., "args": [...], "env": {...}},
     "workdir": DIR, "template": DIR (copied to workdir before each session),
     "calls": [{"tool": ..., "arguments": {...}, "progress": bool}, ...]}

Both sessions start from the same state (the template copied afresh), then
list every tool (every page) and make every call, in order. The listing
through Temper holds Temper's own meta-tools too; they are set aside. Each
tool definition and each call result is dumped by the SDK
(`model_dump(by_alias=True, exclude_none=True, mode="json")`), and volatile
values (datetimes, the dates of `ls -l`-like lines) are replaced by
placeholders in both before they are compared.

Prints one JSON object (the last line): the listing's tools, the names
whose definitions differ, the count of tools with a title, annotations,
execution, and per call whether the results are identical (both results
when not), and the progress notifications each side got. Exits non-zero
only on a failure to run; the Rust test judges the comparison.
"""

import base64
import json
import re
import shutil
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

META_TOOLS = {"forge_tool", "delete_tool", "promote_tool", "tool_stats", "run_code", "describe_tools", "search_tools"}

# Volatile values, replaced in both sides before the comparison.
VOLATILE = [
    # ISO 8601 datetimes (with or without fraction and offset).
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<datetime>"),
    # JavaScript Date strings: "Sat Nov 28 2026 09:41:02 GMT+0000 (Coordinated Universal Time)".
    (
        re.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d{4} \d\d:\d\d:\d\d GMT[+-]\d{4}(?: \([^)]*\))?"),
        "<datetime>",
    ),
    # Times of day as JavaScript's toLocaleTimeString writes them: "10:23:16 AM".
    (re.compile(r"\b\d{1,2}:\d\d:\d\d\s?[AP]M\b"), "<time>"),
]


def scrub(value):
    if isinstance(value, str):
        for pattern, placeholder in VOLATILE:
            value = pattern.sub(placeholder, value)
        return value
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub_blob(v) if k == "blob" else scrub(v) for k, v in value.items()}
    return value


def scrub_blob(blob):
    """A base64 blob that holds UTF-8 text (the everything server's dynamic
    blobs carry the time they were made): its text, scrubbed."""
    try:
        return "text:" + scrub(base64.b64decode(blob, validate=True).decode("utf-8"))
    except (ValueError, TypeError):
        return blob


def dump(model):
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def reset(spec):
    workdir, template = spec.get("workdir"), spec.get("template")
    if workdir and template:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.copytree(template, workdir, symlinks=True)


async def session_run(side, spec):
    reset(spec)
    params = StdioServerParameters(command=side["command"], args=side["args"], env=side.get("env"))
    out = {"tools": {}, "calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            cursor = None
            while True:
                page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                prefix = side.get("prefix", "")
                for tool in page.tools:
                    if tool.name not in META_TOOLS:
                        # Through a prefix: compared with it taken off.
                        d = dump(tool)
                        if prefix and d["name"].startswith(prefix):
                            d["name"] = d["name"][len(prefix):]
                        out["tools"][d["name"]] = d
                cursor = page.next_cursor
                if not cursor:
                    break
            if "features" in spec:
                out["features"] = await features(session, spec["features"], side.get("prefix", ""))
            for call in spec["calls"]:
                progress = []

                async def on_progress(value, total, message, progress=progress):
                    progress.append({"progress": value, "total": total, "message": message})

                try:
                    result = await session.call_tool(
                        side.get("prefix", "") + call["tool"],
                        call.get("arguments", {}),
                        progress_callback=on_progress if call.get("progress") else None,
                    )
                    answer = {"result": scrub(dump(result))}
                except MCPError as e:
                    answer = {"error": {"code": e.code, "message": scrub(e.message)}}
                answer["progress"] = progress
                out["calls"].append(answer)
    return out


def unprefix(value, prefix, keys):
    """`value` (a dumped item or result) with `prefix` taken off the
    members named in `keys`, at any depth."""
    if isinstance(value, list):
        return [unprefix(v, prefix, keys) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in keys and isinstance(v, str) and prefix and v.startswith(prefix):
                v = v[len(prefix):]
            out[k] = unprefix(v, prefix, keys)
        return out
    return value


async def attempt(call):
    try:
        return {"result": scrub(dump(await call))}
    except MCPError as e:
        return {"error": {"code": e.code, "message": scrub(e.message)}}


async def features(session, spec, prefix):
    """Resources, templates and prompts listed, read and got; on the
    gateway side every name and URI is asked with `prefix` and compared
    with it taken off. `refused` URIs and prompts are asked on this side
    only (their answers are reported, not compared)."""
    keys = {"uri", "uriTemplate", "name"}
    out = {
        "resources": unprefix(dump(await session.list_resources()), prefix, keys)["resources"],
        "templates": unprefix(dump(await session.list_resource_templates()), prefix, keys)[
            "resourceTemplates"
        ],
        "prompts": unprefix(dump(await session.list_prompts()), prefix, keys)["prompts"],
        "reads": [],
        "gets": [],
    }
    for uri in spec.get("reads", []):
        read = await attempt(session.read_resource(prefix + uri))
        out["reads"].append(unprefix(read, prefix, {"uri"}))
    for get in spec.get("gets", []):
        got = await attempt(session.get_prompt(prefix + get["name"], get.get("arguments")))
        out["gets"].append(got)
    if prefix:
        out["refused"] = [await attempt(session.read_resource(uri)) for uri in spec.get("refused", [])]
    return out


async def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    direct = await session_run(spec["direct"], spec)
    gateway = await session_run(spec["gateway"], spec)
    listed = sorted(direct["tools"])
    report = {
        "server": spec["name"],
        "direct_server": direct["server"],
        "gateway_server": gateway["server"],
        "tools": listed,
        "gateway_tools": sorted(gateway["tools"]),
        "definitions_differ": [
            n for n in listed if scrub(direct["tools"][n]) != scrub(gateway["tools"].get(n))
        ],
        "with_title": sum(1 for t in direct["tools"].values() if "title" in t),
        "with_annotations": sum(1 for t in direct["tools"].values() if "annotations" in t),
        "with_execution": sum(1 for t in direct["tools"].values() if "execution" in t),
        "with_output_schema": sum(1 for t in direct["tools"].values() if "outputSchema" in t),
        "gateway_definitions": {n: gateway["tools"].get(n) for n in listed},
        "direct_definitions": direct["tools"],
        "calls": [],
        "features": {"direct": direct.get("features"), "gateway": gateway.get("features")},
    }
    for call, d, g in zip(spec["calls"], direct["calls"], gateway["calls"]):
        same = {k: v for k, v in d.items() if k != "progress"} == {
            k: v for k, v in g.items() if k != "progress"
        }
        report["calls"].append(
            {
                "tool": call["tool"],
                "label": call.get("label", call["tool"]),
                "identical": same,
                "direct": d,
                "gateway": g,
            }
        )
    print(json.dumps(report))


async def bounded(spec_path):
    # Only a guard against a hang: nothing is timed.
    with anyio.fail_after(600):
        await main(spec_path)


if __name__ == "__main__":
    anyio.run(bounded, sys.argv[1])
