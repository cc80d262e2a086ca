"""The OpenAI Agents SDK: :func:`function_tools` returns ``FunctionTool``s
for ``forge_tool``, ``run_code`` and every tool the forge's agent may call,
with their JSON Schemas passed through (strict where the schema keeps its
meaning in strict mode).

Pass the returned list itself as the agent's ``tools``: a successful
``forge_tool`` call appends the new tool to it, and the runner reads the
list again at each turn, so the tool is called in the next turn of the same
run.

Needs ``openai-agents`` (the ``openai-agents`` extra)."""

from __future__ import annotations

import copy
import json
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from . import AsyncForge, Forge
from ._adapt import FORGE_TOOL, ToolSpec, as_async, as_sync, invoke, specs, specs_sync, strict_ok

__all__ = ["function_tools"]


def _tool(forge: AsyncForge, spec: ToolSpec, tools: list[FunctionTool]) -> FunctionTool:
    async def on_invoke(ctx: ToolContext[Any], args_json: str) -> Any:
        args = json.loads(args_json) if args_json else {}
        out = await invoke(forge, spec.name, args)
        if spec.name == FORGE_TOOL and isinstance(out, dict) and out.get("success"):
            await _refresh(forge, tools)
        return out

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=copy.deepcopy(spec.input_schema),
        on_invoke_tool=on_invoke,
        strict_json_schema=strict_ok(spec.input_schema),
    )


def _add(forge: AsyncForge, found: list[ToolSpec], tools: list[FunctionTool]) -> None:
    have = {t.name for t in tools}
    for spec in found:
        if spec.name not in have:
            tools.append(_tool(forge, spec, tools))


async def _refresh(forge: AsyncForge, tools: list[FunctionTool]) -> None:
    _add(forge, await specs(forge), tools)


def function_tools(forge: Forge | AsyncForge) -> list[FunctionTool]:
    """The forge's tools as ``FunctionTool``s (a failure of a tool raises
    the typed error; the SDK reports it to the model as the tool's
    result)."""
    tools: list[FunctionTool] = []
    _add(as_async(forge), specs_sync(as_sync(forge)), tools)
    return tools
