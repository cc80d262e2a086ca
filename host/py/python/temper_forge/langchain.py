"""LangChain: :func:`structured_tools` returns ``StructuredTool``s for
``forge_tool``, ``run_code`` and every tool the forge's agent may call,
with their JSON Schemas as ``args_schema``. A successful ``forge_tool``
call appends the new tool to the returned list (as
:func:`temper_forge.openai_agents.function_tools` does).

Needs ``langchain-core`` (the ``langchain`` extra)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool

from . import AsyncForge, Forge
from ._adapt import FORGE_TOOL, ToolSpec, as_async, as_sync, invoke, specs, specs_sync

__all__ = ["structured_tools"]


def _tool(forge: AsyncForge, spec: ToolSpec, tools: list[StructuredTool]) -> StructuredTool:
    async def run(**kwargs: Any) -> Any:
        out = await invoke(forge, spec.name, kwargs)
        if spec.name == FORGE_TOOL and isinstance(out, dict) and out.get("success"):
            await _refresh(forge, tools)
        return out

    return StructuredTool.from_function(
        coroutine=run,
        name=spec.name,
        description=spec.description,
        args_schema=dict(spec.input_schema),
        infer_schema=False,
    )


def _add(forge: AsyncForge, found: list[ToolSpec], tools: list[StructuredTool]) -> None:
    have = {t.name for t in tools}
    for spec in found:
        if spec.name not in have:
            tools.append(_tool(forge, spec, tools))


async def _refresh(forge: AsyncForge, tools: list[StructuredTool]) -> None:
    _add(forge, await specs(forge), tools)


def structured_tools(forge: Forge | AsyncForge) -> list[StructuredTool]:
    """The forge's tools as ``StructuredTool``s (async: call them with
    ``ainvoke``)."""
    tools: list[StructuredTool] = []
    _add(as_async(forge), specs_sync(as_sync(forge)), tools)
    return tools
