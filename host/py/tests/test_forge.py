"""Forge the seed requests and call them, from sync and async code."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from conftest import SEEDS, seed, temper_bin

from temper_forge import AsyncForge, Forge, ForgeRefused, InvalidInput, ToolNotFound

PURE = ["add_numbers", "convert_temperature", "parse_csv", "slugify"]


def contains(expected: object, actual: object) -> bool:
    """The seed's expectedOutput is matched as a subset of objects."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and contains(v, actual[k]) for k, v in expected.items())
    return expected == actual


def test_forge_and_call_every_seed_sync(store: str) -> None:
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    for name in PURE:
        request = seed(name)
        result = forge.forge(request)
        assert result["success"] is True, result
        assert result["tool"]["name"] == name
        assert len(result["tool"]["id"]) == 64
        for case in request["testCases"]:
            out = forge.call(name, case["input"])
            assert contains(case["expectedOutput"], out), (name, case, out)
    listed = {t["name"] for t in forge.tools()}
    assert listed == set(PURE)
    assert forge.stats("slugify")["totalCalls"] == 2
    assert forge.call("slugify", {"text": "Hello World"}) == {"slug": "hello-world"}


def test_forge_and_call_async(store: str) -> None:
    async def main() -> None:
        aforge = await AsyncForge.open(store, judge="rules", agent="agent-1", session="s1")
        assert (aforge.agent, aforge.session) == ("agent-1", "s1")
        for name in PURE:
            result = await aforge.forge(seed(name))
            assert result["success"] is True, result
        outs = await asyncio.gather(*(aforge.call("add_numbers", {"a": i, "b": 1}) for i in range(20)))
        assert [o["sum"] for o in outs] == [i + 1 for i in range(20)]
        assert await aforge.call("slugify", {"text": "A b"}) == {"slug": "a-b"}
        assert {t["name"] for t in await aforge.tools()} == set(PURE)
        assert await aforge.end_session() == len(PURE)
        with pytest.raises(ToolNotFound):
            await aforge.call("slugify", {"text": "x"})

    asyncio.run(main())


def test_search_finds_tools_and_they_join_the_working_set(store: str) -> None:
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    for name in PURE:
        assert forge.forge(seed(name))["success"] is True
    # The tools forged are the working set, most recent first.
    assert forge.working_set() == list(reversed(PURE))
    found = forge.search("make a url friendly slug out of a title", limit=2)
    assert found[0]["name"] == "slugify", found
    assert found[0]["tier"] == "session"
    assert found[0]["signature"].startswith("slugify(input: ")
    assert len(found) <= 2
    assert forge.working_set()[0] == "slugify"
    # Another agent finds nothing of agent-1's session.
    other = Forge(store=store, judge="rules", agent="agent-2", session="s1")
    assert other.search("url friendly slug title") == []

    async def main() -> list[dict[str, object]]:
        return await forge.aio().search("celsius fahrenheit", limit=1)

    hits = asyncio.run(main())
    assert [h["name"] for h in hits] == ["convert_temperature"]


def test_judge_none_fails_closed(store: str) -> None:
    forge = Forge(store=store)  # no judge
    with pytest.raises(ForgeRefused) as e:
        forge.forge(seed("slugify"))
    assert e.value.stage == "judge"
    assert e.value.result is not None and e.value.result["success"] is False
    assert forge.tools() == []


def test_refusals_and_input_errors_are_typed(store: str) -> None:
    forge = Forge(store=store, judge="rules")
    # fetch is not allowed by the (default, deny-all) host policy.
    with pytest.raises(ForgeRefused) as refused:
        forge.forge(seed("check_http_status"))
    assert refused.value.stage == "validate"
    forge.forge(seed("slugify"))
    with pytest.raises(InvalidInput) as bad:
        forge.call("slugify", {"text": 7})
    assert bad.value.schema == "inputSchema"
    assert bad.value.where == "/text"
    assert isinstance(bad.value, ValueError)
    with pytest.raises(ToolNotFound) as missing:
        forge.call("nope", {})
    assert missing.value.name == "nope"
    broken = dict(seed("slugify"), name="slugify_broken")
    broken["testCases"] = [{"input": {"text": "A"}, "expectedOutput": {"slug": "b"}}]
    with pytest.raises(ForgeRefused) as failing:
        forge.forge(broken)
    assert failing.value.stage == "test"
    assert failing.value.result is not None
    assert failing.value.result["testResults"][0]["passed"] is False


def test_run_code_promote_export_import(store: str, tmp_path: Path) -> None:
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    forge.forge(seed("slugify"))
    run = forge.run_code("console.log('hi'); return await tools.slugify({text: 'A b'})", tools=["slugify"])
    assert run["result"] == {"slug": "a-b"}
    assert [line["message"] for line in run["logs"]] == ["hi"]
    wasm = tmp_path / "slugify.wasm"
    exported = forge.export("slugify", wasm)
    assert wasm.stat().st_size == exported["bytes"]
    other = Forge(store=str(tmp_path / "other"), judge="rules", agent="agent-2", session="s9")
    imported = other.import_artifact(wasm, tier="agent")
    assert imported["success"] is True
    assert imported["tool"]["id"] == exported["id"]
    assert other.call("slugify", {"text": "X y"}) == {"slug": "x-y"}
    approved = other.approve("slugify", by="alice")
    assert approved["tier"] == "shared"


def test_same_id_as_temper_forge(store: str, tmp_path: Path) -> None:
    binary = temper_bin()
    if not binary.exists():
        pytest.fail(f"{binary} not found: build it (cargo build --release -p temper-cli) or set TEMPER_BIN")
    cli_store = tmp_path / "cli-store"
    ids = {}
    for name in PURE:
        out = subprocess.run(
            [str(binary), "forge", str(SEEDS / f"{name}.json"), "--judge", "rules", "--store", str(cli_store), "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        import json

        ids[name] = json.loads(out.stdout)["tool"]["id"]
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    for name in PURE:
        assert forge.forge(seed(name))["tool"]["id"] == ids[name], name


def test_delete_frees_a_session_slot_sync_and_async(store: str) -> None:
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    forge.forge(seed("slugify"))
    forge.forge(seed("add_numbers"))
    deleted = forge.delete("slugify")
    assert deleted["deleted"]["name"] == "slugify"
    assert {t["name"] for t in forge.tools()} == {"add_numbers"}
    with pytest.raises(ToolNotFound) as missing:
        forge.delete("slugify")
    assert 'delete: session "s1" has no tool named "slugify"; its tools: add_numbers' in str(missing.value)
    with pytest.raises(ForgeRefused) as builtin:
        forge.delete("run_code")
    assert builtin.value.stage == "delete"
    assert 'delete: "run_code" is a built-in tool and cannot be deleted' in str(builtin.value)

    async def main() -> None:
        aforge = await AsyncForge.open(store, judge="rules", agent="agent-1", session="s1")
        gone = await aforge.delete("add_numbers")
        assert gone["deleted"]["name"] == "add_numbers"
        assert await aforge.tools() == []

    asyncio.run(main())


def test_an_oversized_import_is_refused_before_it_is_read(store: str, tmp_path: Path) -> None:
    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    big = tmp_path / "big.wasm"
    cap = 16 * 1024 * 1024
    with big.open("wb") as f:
        f.truncate(cap + 1)
    with pytest.raises(ForgeRefused) as refused:
        forge.import_artifact(big)
    assert refused.value.stage == "import"
    assert (
        f"import: the artifact is {cap + 1} bytes, over the {cap}-byte cap (maxArtifactBytes in --forge-config)"
        in str(refused.value)
    )
    assert forge.tools() == []
