"""The OpenAI Agents SDK: :func:`function_tools` returns ``FunctionTool``s
for ``forge_tool``, ``run_code``, ``search_tools`` and the session's working set
(the tools found, reused or forged in it; every other tool is found with
``search_tools``),
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
from ._adapt import ToolSpec, add_new, as_async, as_sync, invoke_growing, specs_sync, strict_ok

__all__ = ["function_tools"]


def _tool(forge: AsyncForge, spec: ToolSpec, tools: list[FunctionTool]) -> FunctionTool:
    async def on_invoke(ctx: ToolContext[Any], args_json: str) -> Any:
        args = json.loads(args_json) if args_json else {}
        return await invoke_growing(forge, spec.name, args, tools, lambda s: _tool(forge, s, tools))

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=copy.deepcopy(spec.input_schema),
        on_invoke_tool=on_invoke,
        strict_json_schema=strict_ok(spec.input_schema),
    )


def function_tools(forge: Forge | AsyncForge) -> list[FunctionTool]:
    """The forge's tools as ``FunctionTool``s (a failure of a tool raises
    the typed error; the SDK reports it to the model as the tool's
    result)."""
    aforge = as_async(forge)
    tools: list[FunctionTool] = []
    add_new(tools, specs_sync(as_sync(forge)), lambda s: _tool(aforge, s, tools))
    return tools
