"""What the framework adapters share: the tools an agent is offered
(``forge_tool``, ``run_code``, ``search_tools`` and the session's working
set: the tools found, reused or forged in it, re-read on each listing;
every other tool stays callable and is found with ``search_tools``) and how
a call to one of them runs."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, TypeVar

from . import AsyncForge, Forge
from .errors import ForgeRefused

FORGE_TOOL = "forge_tool"
RUN_CODE = "run_code"
SEARCH_TOOLS = "search_tools"


class ToolSpec(NamedTuple):
    """One tool as a framework sees it."""

    name: str
    description: str
    input_schema: dict[str, Any]


def as_async(forge: Forge | AsyncForge) -> AsyncForge:
    """The awaitable view of ``forge``."""
    return forge.aio() if isinstance(forge, Forge) else forge


def as_sync(forge: Forge | AsyncForge) -> Forge:
    """The blocking view of ``forge``."""
    return forge.sync() if isinstance(forge, AsyncForge) else forge


def _specs(meta: list[dict[str, Any]], tools: list[dict[str, Any]], working: list[str]) -> list[ToolSpec]:
    out = [ToolSpec(m["name"], m["description"], m["inputSchema"]) for m in meta]
    by_name = {t["name"]: t for t in tools}
    for name in working:
        t = by_name.get(name)
        if t is not None:
            out.append(ToolSpec(t["name"], t.get("description") or t["name"], t["inputSchema"]))
    return out


async def specs(forge: AsyncForge) -> list[ToolSpec]:
    """``forge_tool``, ``run_code``, ``search_tools`` and the working set."""
    return _specs(await forge.meta_tools(), await forge.tools(), await forge.working_set())


def specs_sync(forge: Forge) -> list[ToolSpec]:
    """:func:`specs`, blocking."""
    return _specs(forge.meta_tools(), forge.tools(), forge.working_set())


async def invoke(forge: AsyncForge, name: str, args: dict[str, Any]) -> Any:
    """Runs one tool call. ``forge_tool`` returns the forge result (a refusal
    too: ``success`` false, ``errors`` and the ``stage``, for the model to
    read); other failures raise the typed errors."""
    if name == FORGE_TOOL:
        try:
            return await forge.forge(args)
        except ForgeRefused as e:
            return e.result if e.result is not None else {"success": False, "errors": [e.reason], "stage": e.stage}
    if name == RUN_CODE:
        return await forge.run_code(args["code"], args.get("tools"))
    if name == SEARCH_TOOLS:
        return {"tools": await forge.search(args["query"], limit=int(args.get("limit") or 5))}
    return await forge.call(name, args)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=_Named)


def add_new(tools: list[T], found: list[ToolSpec], make: Callable[[ToolSpec], T]) -> None:
    """Appends to ``tools`` a framework tool (``make``) for each spec not in it."""
    have = {t.name for t in tools}
    tools.extend(make(s) for s in found if s.name not in have)


async def invoke_growing(
    forge: AsyncForge, name: str, args: dict[str, Any], tools: list[T], make: Callable[[ToolSpec], T]
) -> Any:
    """:func:`invoke`; after a successful ``forge_tool`` or a
    ``search_tools``, the tools new to the working set are appended to
    ``tools`` (the list an agent reads again at each turn)."""
    out = await invoke(forge, name, args)
    grew = name == SEARCH_TOOLS or (name == FORGE_TOOL and isinstance(out, dict) and out.get("success"))
    if grew:
        add_new(tools, await specs(forge), make)
    return out


def strict_ok(schema: Any) -> bool:
    """Whether ``schema`` keeps its meaning in OpenAI's strict mode: every
    object lists all its properties as required and allows no others."""
    if not isinstance(schema, dict):
        return False
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return all(strict_ok(s) for s in schema[key])
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") not in (None, False):
            return False
        if set(props) != set(schema.get("required") or []):
            return False
        return all(strict_ok(p) for p in props.values())
    if schema.get("type") == "array":
        return "items" in schema and strict_ok(schema["items"])
    return "type" in schema or "enum" in schema or "const" in schema
