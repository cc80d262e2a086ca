"""Temper in Python: forge small JavaScript tools at run time and call each
in a fresh WebAssembly sandbox, in-process.

``Forge`` blocks (and releases the GIL while it works); ``AsyncForge`` has
the same methods as coroutines that never block the event loop (cancelling
the awaiting task cancels the call). ``Runtime`` is the sandbox alone.
Errors are the typed classes of :mod:`temper_forge.errors`.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Sequence

from . import _temper
from .errors import (
    Busy,
    CapabilityDenied,
    ForgeRefused,
    InvalidInput,
    MemoryLimitExceeded,
    TemperError,
    ToolFailed,
    ToolNotFound,
    ToolTimeout,
)

__all__ = [
    "Forge",
    "AsyncForge",
    "Runtime",
    "Tool",
    "TemperError",
    "ForgeRefused",
    "ToolTimeout",
    "MemoryLimitExceeded",
    "CapabilityDenied",
    "ToolFailed",
    "ToolNotFound",
    "InvalidInput",
    "Busy",
]

__version__: str = _temper.__version__


def _path(p: str | os.PathLike[str] | None) -> str | None:
    return None if p is None else os.fspath(p)


def _request_text(request: dict[str, Any] | str) -> str:
    return request if isinstance(request, str) else json.dumps(request)


def _tools_list(doc: str) -> list[dict[str, Any]]:
    d = json.loads(doc)
    tools: list[dict[str, Any]] = d["tools"]
    for hub in d["hubTools"]:
        tools.append({**hub, "tier": "hub"})
    return tools


class _Base:
    _native: _temper.NativeForge

    def __init__(
        self,
        store: str | os.PathLike[str],
        *,
        judge: str | None = None,
        agent: str = "default",
        session: str = "default",
        policy: str | os.PathLike[str] | None = None,
        tools: str | os.PathLike[str] | None = None,
        allow_tools: Sequence[str] | None = None,
    ) -> None:
        self._native = _temper.NativeForge(
            os.fspath(store),
            judge,
            agent,
            session,
            _path(policy),
            _path(tools),
            None if allow_tools is None else list(allow_tools),
        )

    @classmethod
    def _wrap(cls, native: _temper.NativeForge) -> Any:
        self = cls.__new__(cls)
        self._native = native
        return self

    @property
    def agent(self) -> str:
        """The agent acting."""
        return self._native.agent

    @property
    def session(self) -> str:
        """The session."""
        return self._native.session


class Forge(_Base):
    """A forge on a store (a directory, or a PostgreSQL URL), for one agent
    and session, opened as ``temper`` opens one: a tool forged here has the
    same id as ``temper forge`` of the same request.

    ``judge="rules"`` is the offline rules judge; ``judge=None`` (the
    default) refuses every forge (fail closed). ``policy`` is a host policy
    TOML file (default: deny every capability), ``tools`` a tools file
    (hub tools). ``allow_tools`` (names or globs) narrows the hub tools this
    forge's calls may reach, directly or through any tool at any depth, on
    top of the policy (as a token's ``tools`` does over HTTP): a hub tool
    outside it is not found, and a tool that would reach one is refused.
    Every method blocks with the GIL released.
    """

    def forge(self, request: dict[str, Any] | str) -> dict[str, Any]:
        """Forges a request in the seed's format into this session. Returns
        the forge result (``success``, ``tool``, ``verdict``,
        ``testResults``); raises :class:`ForgeRefused` with the stage."""
        return json.loads(self._native.forge(_request_text(request)))  # type: ignore[no-any-return]

    def call(self, name: str, input: Any) -> Any:
        """Calls a tool by name: its output."""
        return json.loads(self._native.call(name, json.dumps(input)))

    def tools(self) -> list[dict[str, Any]]:
        """The tools this agent and session may call (hub tools with
        ``tier`` ``"hub"``)."""
        return _tools_list(self._native.tools())

    def search(self, query: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """The tools this agent and session may call that match ``query``,
        best first (``name``, ``description``, ``signature``, ``tier``,
        ``score``); at most ``limit`` (1 to 50). They join the session's
        working set."""
        return json.loads(self._native.search(query, limit))  # type: ignore[no-any-return]

    def working_set(self) -> list[str]:
        """The session's working set: the tools found, reused or forged in
        it, most recent first."""
        return json.loads(self._native.working_set())  # type: ignore[no-any-return]

    def meta_tools(self) -> list[dict[str, Any]]:
        """``forge_tool`` and ``run_code`` as the MCP server defines them
        (``name``, ``description``, ``inputSchema``)."""
        return json.loads(self._native.meta_tools())  # type: ignore[no-any-return]

    def stats(self, name: str) -> dict[str, Any]:
        """A tool's call statistics."""
        return json.loads(self._native.stats(name))  # type: ignore[no-any-return]

    def promote(self, name: str, source: str | None = None) -> dict[str, Any]:
        """Promotes a session tool to this agent's tier."""
        return json.loads(self._native.promote(name, source))  # type: ignore[no-any-return]

    def delete(self, name: str) -> dict[str, Any]:
        """Deletes a tool from this session's tier (frees one of its
        ``maxSessionTools`` slots; audited as a deletion):
        ``{"deleted": tool}``. Agent-tier and shared tools are not deleted."""
        return json.loads(self._native.delete(name))  # type: ignore[no-any-return]

    def approve(self, name: str, *, by: str, note: str | None = None) -> dict[str, Any]:
        """Approves an agent tool for every agent (the shared tier)."""
        return json.loads(self._native.approve(name, by, note))  # type: ignore[no-any-return]

    def run_code(self, code: str, tools: Sequence[str] | None = None) -> dict[str, Any]:
        """Runs ``code`` (the body of an async function) once in a fresh
        sandbox with the tools it may call: ``{"result", "logs", "tools"}``."""
        return json.loads(self._native.run_code(code, None if tools is None else list(tools)))  # type: ignore[no-any-return]

    def export(self, name: str, path: str | os.PathLike[str], *, with_source: bool = False) -> dict[str, Any]:
        """Writes a tool's artifact (``.wasm``) to ``path``: ``{"id", "bytes", "path"}``."""
        return json.loads(self._native.export(name, os.fspath(path), with_source))  # type: ignore[no-any-return]

    def import_artifact(self, path: str | os.PathLike[str], *, tier: str = "session") -> dict[str, Any]:
        """Imports an artifact file into ``tier`` (``session``, ``agent`` or
        ``shared``): its tests run again and the judge reviews it."""
        return json.loads(self._native.import_artifact(os.fspath(path), tier))  # type: ignore[no-any-return]

    def end_session(self) -> int:
        """Ends the session: its tools are discarded. Returns how many."""
        return int(json.loads(self._native.end_session())["discarded"])

    def flush(self) -> None:
        """Writes the call counts kept in memory to the store (they are also
        written every second, and when the forge is collected)."""
        self._native.flush()

    def aio(self) -> AsyncForge:
        """The same forge, with awaitable methods."""
        return AsyncForge._wrap(self._native)  # type: ignore[no-any-return]


class AsyncForge(_Base):
    """:class:`Forge` with awaitable methods, run on the module's tokio
    runtime: they never block the event loop, and cancelling the awaiting
    task cancels the call.

    The constructor opens the store and the engine where it is called (the
    first engine of a process may compile the JS shim, on a cold cache for
    seconds); ``await AsyncForge.open(...)`` does it on a worker thread."""

    @classmethod
    async def open(
        cls,
        store: str | os.PathLike[str],
        *,
        judge: str | None = None,
        agent: str = "default",
        session: str = "default",
        policy: str | os.PathLike[str] | None = None,
        tools: str | os.PathLike[str] | None = None,
        allow_tools: Sequence[str] | None = None,
    ) -> AsyncForge:
        """Opens the forge off the event loop (see the class)."""
        native = await asyncio.to_thread(
            _temper.NativeForge,
            os.fspath(store),
            judge,
            agent,
            session,
            _path(policy),
            _path(tools),
            None if allow_tools is None else list(allow_tools),
        )
        return cls._wrap(native)  # type: ignore[no-any-return]

    async def forge(self, request: dict[str, Any] | str) -> dict[str, Any]:
        """See :meth:`Forge.forge`."""
        return json.loads(await self._native.forge_async(_request_text(request)))  # type: ignore[no-any-return]

    async def call(self, name: str, input: Any) -> Any:
        """See :meth:`Forge.call`."""
        return json.loads(await self._native.call_async(name, json.dumps(input)))

    async def tools(self) -> list[dict[str, Any]]:
        """See :meth:`Forge.tools`."""
        return _tools_list(await self._native.tools_async())

    async def search(self, query: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """See :meth:`Forge.search`."""
        return json.loads(await self._native.search_async(query, limit))  # type: ignore[no-any-return]

    async def working_set(self) -> list[str]:
        """See :meth:`Forge.working_set`."""
        return json.loads(await self._native.working_set_async())  # type: ignore[no-any-return]

    async def meta_tools(self) -> list[dict[str, Any]]:
        """See :meth:`Forge.meta_tools`."""
        return json.loads(await self._native.meta_tools_async())  # type: ignore[no-any-return]

    async def stats(self, name: str) -> dict[str, Any]:
        """See :meth:`Forge.stats`."""
        return json.loads(await self._native.stats_async(name))  # type: ignore[no-any-return]

    async def promote(self, name: str, source: str | None = None) -> dict[str, Any]:
        """See :meth:`Forge.promote`."""
        return json.loads(await self._native.promote_async(name, source))  # type: ignore[no-any-return]

    async def delete(self, name: str) -> dict[str, Any]:
        """See :meth:`Forge.delete`."""
        return json.loads(await self._native.delete_async(name))  # type: ignore[no-any-return]

    async def approve(self, name: str, *, by: str, note: str | None = None) -> dict[str, Any]:
        """See :meth:`Forge.approve`."""
        return json.loads(await self._native.approve_async(name, by, note))  # type: ignore[no-any-return]

    async def run_code(self, code: str, tools: Sequence[str] | None = None) -> dict[str, Any]:
        """See :meth:`Forge.run_code`."""
        return json.loads(await self._native.run_code_async(code, None if tools is None else list(tools)))  # type: ignore[no-any-return]

    async def export(self, name: str, path: str | os.PathLike[str], *, with_source: bool = False) -> dict[str, Any]:
        """See :meth:`Forge.export`."""
        return json.loads(await self._native.export_async(name, os.fspath(path), with_source))  # type: ignore[no-any-return]

    async def import_artifact(self, path: str | os.PathLike[str], *, tier: str = "session") -> dict[str, Any]:
        """See :meth:`Forge.import_artifact`."""
        return json.loads(await self._native.import_artifact_async(os.fspath(path), tier))  # type: ignore[no-any-return]

    async def end_session(self) -> int:
        """See :meth:`Forge.end_session`."""
        return int(json.loads(await self._native.end_session_async())["discarded"])

    async def flush(self) -> None:
        """See :meth:`Forge.flush`."""
        await self._native.flush_async()

    def sync(self) -> Forge:
        """The same forge, with blocking methods."""
        return Forge._wrap(self._native)  # type: ignore[no-any-return]


class Tool:
    """A tool built by a :class:`Runtime` (``id``: its artifact's blake3)."""

    def __init__(self, native: _temper.NativeTool) -> None:
        self._native = native

    @property
    def id(self) -> str:
        """The artifact's blake3, hex."""
        return self._native.id


class Runtime:
    """The sandbox alone, under a host policy file (default: deny every
    capability): build JavaScript into a tool, call it in a fresh instance."""

    def __init__(self, policy: str | os.PathLike[str] | None = None) -> None:
        self._native = _temper.NativeRuntime(_path(policy))

    def build(self, js: str) -> Tool:
        """Builds JavaScript defining ``execute(input)`` into a tool."""
        return Tool(self._native.build(js))

    def call(self, tool: Tool, input: Any, grants: Sequence[str] = ()) -> Any:
        """Calls ``tool`` with ``input`` and the capabilities in ``grants``
        (each allowed by the host policy): its output."""
        return json.loads(self._native.call(tool._native, json.dumps(input), list(grants)))["output"]

    async def build_async(self, js: str) -> Tool:
        """See :meth:`build`, awaitable."""
        return Tool(await self._native.build_async(js))

    async def call_async(self, tool: Tool, input: Any, grants: Sequence[str] = ()) -> Any:
        """See :meth:`call`, awaitable."""
        return json.loads(await self._native.call_async(tool._native, json.dumps(input), list(grants)))["output"]
