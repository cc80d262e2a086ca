"""Typed errors of ``temper_forge``.

Every failure is a :class:`TemperError`; its subclass says what kind of
failure it is, and its attributes carry the details, so no caller has to
match a message. The kind comes from the Rust side's typed errors
(``temper_embed::ErrorKind``), never from their text.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
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


class TemperError(Exception):
    """Base class of every error ``temper_forge`` raises.

    ``message`` is the error's text (for people); ``logs`` the console lines
    the tool printed before it failed, as ``{"level", "message"}`` dicts.
    """

    def __init__(self, message: str, *, logs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.logs: list[dict[str, Any]] = list(logs or [])


class ForgeRefused(TemperError):
    """A stage refused: ``stage`` is ``validate``, ``build``, ``test``,
    ``judge``, ``register``, ``import``, ``promote``, ``approve`` or
    ``export``; ``reason`` says why; ``result`` is the seed-shaped forge
    result (with ``testResults`` and ``verdict``) for a refused forge or
    import, else ``None``."""

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        result: dict[str, Any] | None = None,
        logs: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, logs=logs)
        self.stage = stage
        self.reason = message
        self.result = result


class ToolTimeout(TemperError, TimeoutError):
    """The call ran past its wall-clock limit (``limit_ms``)."""

    def __init__(self, message: str, *, limit_ms: int, logs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, logs=logs)
        self.limit_ms = limit_ms


class MemoryLimitExceeded(TemperError, MemoryError):
    """The call hit the memory cap (``limit_bytes``)."""

    def __init__(self, message: str, *, limit_bytes: int, logs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, logs=logs)
        self.limit_bytes = limit_bytes


class CapabilityDenied(TemperError, PermissionError):
    """The tool used a capability it was not granted (``capability``:
    ``fetch``, ``fs.readFile``, ``crypto`` or ``tool:NAME``)."""

    def __init__(self, message: str, *, capability: str, logs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, logs=logs)
        self.capability = capability


class ToolFailed(TemperError):
    """The tool failed: ``js_message`` is the JavaScript error's message (or
    what went wrong: a bad output, a trap), ``line`` and ``column`` its
    1-based position in the tool's source when known."""

    def __init__(
        self,
        message: str,
        *,
        js_message: str,
        line: int | None = None,
        column: int | None = None,
        logs: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, logs=logs)
        self.js_message = js_message
        self.line = line
        self.column = column


class ToolNotFound(TemperError, LookupError):
    """No tool named ``name`` is visible to this agent and session."""

    def __init__(self, message: str, *, name: str, logs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, logs=logs)
        self.name = name


class InvalidInput(TemperError, ValueError):
    """The input does not fit: ``schema`` is ``"inputSchema"`` when the
    tool's schema refused it (``None``: not JSON, or over the input cap), and
    ``where`` the JSON pointer of the first offending value (``""``: the
    whole input)."""

    def __init__(
        self,
        message: str,
        *,
        schema: str | None = None,
        where: str | None = None,
        logs: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, logs=logs)
        self.schema = schema
        self.where = where


class Busy(TemperError):
    """Too much work in flight on this host; try again later."""


def _from_native(doc: str) -> TemperError:
    """The exception for a failure the native module reports (JSON with
    ``kind``, ``message``, ``logs`` and ``result``)."""
    d = json.loads(doc)
    kind: dict[str, Any] = d["kind"]
    message: str = d["message"]
    logs: list[dict[str, Any]] = d.get("logs") or []
    k = kind["kind"]
    if k == "refused":
        return ForgeRefused(message, stage=kind["stage"], result=d.get("result"), logs=logs)
    if k == "timeout":
        return ToolTimeout(message, limit_ms=kind["limit_ms"], logs=logs)
    if k == "memory":
        return MemoryLimitExceeded(message, limit_bytes=kind["limit_bytes"], logs=logs)
    if k == "capability":
        return CapabilityDenied(message, capability=kind["capability"], logs=logs)
    if k == "tool_failed":
        return ToolFailed(
            message, js_message=kind["message"], line=kind.get("line"), column=kind.get("column"), logs=logs
        )
    if k == "not_found":
        return ToolNotFound(message, name=kind["name"], logs=logs)
    if k == "invalid_input":
        return InvalidInput(message, schema=kind.get("schema"), where=kind.get("at"), logs=logs)
    if k == "busy":
        return Busy(message, logs=logs)
    return TemperError(message, logs=logs)
