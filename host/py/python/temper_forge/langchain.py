"""LangChain: :func:`structured_tools` returns ``StructuredTool``s for
``forge_tool``, ``run_code``, ``search_tools`` and the session's working set
(the tools found, reused or forged in it; every other tool is found with
``search_tools``),
with their JSON Schemas as ``args_schema``. A successful ``forge_tool``
call appends the new tool to the returned list (as
:func:`temper_forge.openai_agents.function_tools` does).

Needs ``langchain-core`` (the ``langchain`` extra)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool

from . import AsyncForge, Forge
from ._adapt import ToolSpec, add_new, as_async, as_sync, invoke_growing, specs_sync

__all__ = ["structured_tools"]


def _tool(forge: AsyncForge, spec: ToolSpec, tools: list[StructuredTool]) -> StructuredTool:
    async def run(**kwargs: Any) -> Any:
        return await invoke_growing(forge, spec.name, kwargs, tools, lambda s: _tool(forge, s, tools))

    return StructuredTool.from_function(
        coroutine=run,
        name=spec.name,
        description=spec.description,
        args_schema=dict(spec.input_schema),
        infer_schema=False,
    )


def structured_tools(forge: Forge | AsyncForge) -> list[StructuredTool]:
    """The forge's tools as ``StructuredTool``s (async: call them with
    ``ainvoke``)."""
    aforge = as_async(forge)
    tools: list[StructuredTool] = []
    add_new(tools, specs_sync(as_sync(forge)), lambda s: _tool(aforge, s, tools))
    return tools
