"""PydanticAI: :class:`TemperToolset`, a toolset offering ``forge_tool``,
``run_code``, ``search_tools`` and the session's working set (every other tool
the forge's agent may call is found with ``search_tools``). It lists the tools
again at every step of a run, so a tool forged in step n is called in step
n + 1 of the same run.

Needs ``pydantic-ai-slim`` (the ``pydantic-ai`` extra)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.exceptions import ToolFailed as PydanticToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from . import AsyncForge, Forge
from ._adapt import as_async, invoke, specs
from .errors import InvalidInput, TemperError

__all__ = ["TemperToolset"]

# Temper checks every input against the tool's inputSchema itself.
_ANY = SchemaValidator(schema=core_schema.any_schema())


class TemperToolset(AbstractToolset[Any]):
    """The forge's tools as a PydanticAI toolset.

    A call whose input the tool's schema refuses asks the model to retry
    (``ModelRetry``); any other failure of a tool is reported to the model
    as a failed tool result (PydanticAI's ``ToolFailed``) with the typed
    error's message."""

    def __init__(self, forge: Forge | AsyncForge, *, id: str | None = None, max_retries: int = 1) -> None:
        self._forge = as_async(forge)
        self._id = id
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            s.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=s.name, description=s.description, parameters_json_schema=s.input_schema
                ),
                max_retries=self._max_retries,
                args_validator=_ANY,
            )
            for s in await specs(self._forge)
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        try:
            return await invoke(self._forge, name, tool_args)
        except InvalidInput as e:
            raise ModelRetry(e.message) from e
        except TemperError as e:
            raise PydanticToolFailed(e.message) from e
