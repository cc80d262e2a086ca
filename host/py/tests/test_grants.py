"""A grant narrows at every depth, through the Python package: a forge
opened with ``allow_tools`` reaches a hub tool outside it through no tool
(a code tool calling it, a code tool calling that one, a compose tool
whose step is a compose tool with it as a step, ``run_code`` calling any
of them). The upstream (tests/fixtures/hub/recording_upstream.py) records
every call: the narrowed forge's never reach it, the unnarrowed one's do."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from temper_forge import Forge, TemperError, ToolNotFound

from conftest import ROOT

UPSTREAM = ROOT / "tests" / "fixtures" / "hub" / "recording_upstream.py"
REFUSED = "\"nice.admin\" is not callable by this caller (outside its grant: context's tools narrowing)"
FORGED = ["admin_call", "admin_wrap", "admin_step", "admin_nest"]


def _marker() -> dict[str, Any]:
    return {"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]}


def _code_tool(name: str, code: str, grant: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Runs the administrative action through a tool call.",
        "inputSchema": _marker(),
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": code, "allowlist": [f"tool:{grant}"]},
        "testCases": [{"input": {"marker": "forge-test"}}],
    }


def _compose_tool(name: str, step: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Runs the administrative action as a pipeline step.",
        "inputSchema": _marker(),
        "implementation": {"mode": "compose", "steps": [
            {"name": "act", "tool": step, "inputMapping": {"marker": "$input.marker"}}
        ]},
        "testCases": [{"input": {"marker": "forge-test"}}],
    }


def _markers(log: Path) -> list[str]:
    if not log.exists():
        return []
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [c["arguments"]["marker"] for c in calls if c["tool"] == "admin"]


@pytest.fixture
def hub(tmp_path: Path) -> tuple[str, str, Path]:
    """A tools file exposing the recording upstream as `nice.*`, a policy
    allowing it, and the upstream's log."""
    log = tmp_path / "upstream.log"
    tools = tmp_path / "tools.toml"
    command = json.dumps([sys.executable, str(UPSTREAM), str(log)])
    # The forges' tests call nice.admin for real (allow_live_tests): what
    # is checked here is the calls made after the narrowing.
    tools.write_text(
        f'[upstream.nice]\ncommand = {command}\ntools = ["*"]\nprefix = "nice."\n'
        "allow_live_tests = true\n"
    )
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools]\nallow = ["nice.*"]\n')
    return str(tools), str(policy), log


def test_allow_tools_narrows_at_every_depth(store: str, hub: tuple[str, str, Path]) -> None:
    tools, policy, log = hub
    owner = Forge(store, judge="rules", agent="alice", session="s1", policy=policy, tools=tools)
    owner.forge(_code_tool(
        "admin_call",
        'async function execute(input) { return await callTool("nice.admin", { marker: input.marker }); }',
        "nice.admin",
    ))
    owner.forge(_code_tool(
        "admin_wrap",
        "async function execute(input) { return await tools.admin_call({ marker: input.marker }); }",
        "admin_call",
    ))
    owner.forge(_compose_tool("admin_step", "nice.admin"))
    owner.forge(_compose_tool("admin_nest", "admin_step"))

    # The same agent and session, narrowed to nice.echo.
    narrowed = Forge(
        store, judge="rules", agent="alice", session="s1", policy=policy, tools=tools,
        allow_tools=["nice.echo"],
    )
    names = {t["name"] for t in narrowed.tools()}
    assert {"nice.echo", *FORGED} <= names and "nice.admin" not in names
    for tool in FORGED:
        with pytest.raises(TemperError) as direct:
            narrowed.call(tool, {"marker": f"narrow-direct-{tool}"})
        assert REFUSED in str(direct.value), str(direct.value)
        with pytest.raises(TemperError) as run:
            narrowed.run_code(f"return await tools.{tool}({{ marker: 'narrow-run-{tool}' }});")
        assert REFUSED in str(run.value), str(run.value)
    # A hidden hub tool is not found, as one that does not exist.
    with pytest.raises(TemperError) as hidden:
        narrowed.call("nice.admin", {"marker": "narrow-hidden"})
    with pytest.raises(TemperError) as missing:
        narrowed.call("nice.nothing", {"marker": "narrow-missing"})
    assert type(hidden.value) is type(missing.value) is ToolNotFound
    # What it may use still works through a tool.
    echoed = narrowed.run_code("return await tools['nice.echo']({ text: 'hi' });")
    assert echoed["result"] == {"text": "hi"}
    assert [m for m in _markers(log) if m.startswith("narrow-")] == []

    # The positive control: the unnarrowed forge reaches it, at every depth.
    for tool in FORGED:
        owner.call(tool, {"marker": f"full-{tool}"})
    assert sorted(m for m in _markers(log) if m.startswith("full-")) == sorted(f"full-{t}" for t in FORGED)
