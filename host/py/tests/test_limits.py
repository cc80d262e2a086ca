"""Limits raise their typed errors, and the next call is served."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import seed

from temper_forge import (
    AsyncForge,
    CapabilityDenied,
    Forge,
    MemoryLimitExceeded,
    Runtime,
    TemperError,
    ToolFailed,
    ToolTimeout,
)

SPIN = "while (true) {}"
BOMB = "const a = []; while (true) { a.push(new Array(1 << 20).fill(1)); }"
FETCH = "return await fetch('http://127.0.0.1:9/')"


def test_limits_raise_typed_errors_and_the_next_call_is_served(store: str, policy: str) -> None:
    forge = Forge(store=store, judge="rules", policy=policy)
    forge.forge(seed("slugify"))

    started = time.monotonic()
    with pytest.raises(ToolTimeout) as timeout:
        forge.run_code(SPIN)
    took = time.monotonic() - started
    assert timeout.value.limit_ms == 500
    assert isinstance(timeout.value, TimeoutError)
    assert 0.4 < took < 3.0, took
    assert forge.call("slugify", {"text": "After Timeout"}) == {"slug": "after-timeout"}

    with pytest.raises(MemoryLimitExceeded) as memory:
        forge.run_code(BOMB)
    assert memory.value.limit_bytes == 32 * 1024 * 1024
    assert forge.call("slugify", {"text": "After Memory"}) == {"slug": "after-memory"}

    with pytest.raises(CapabilityDenied) as denied:
        forge.run_code(FETCH)
    assert denied.value.capability == "fetch"
    assert forge.call("slugify", {"text": "After Fetch"}) == {"slug": "after-fetch"}

    with pytest.raises(ToolFailed) as threw:
        forge.run_code("\n\nthrow new TypeError('bad thing')")
    assert "bad thing" in threw.value.js_message
    assert threw.value.line == 3
    assert forge.call("slugify", {"text": "After Throw"}) == {"slug": "after-throw"}


def test_runtime_alone_grants_and_limits(policy: str) -> None:
    rt = Runtime(policy=policy)
    tool = rt.build("function execute(input) { return { n: input.n * 2 }; }")
    assert len(tool.id) == 64
    assert rt.call(tool, {"n": 21}) == {"n": 42}
    fetcher = rt.build("async function execute(input) { return await fetch('http://127.0.0.1:9/'); }")
    with pytest.raises(CapabilityDenied) as denied:
        rt.call(fetcher, {})
    assert denied.value.capability == "fetch"
    spinner = rt.build("function execute(input) { while (true) {} }")
    with pytest.raises(ToolTimeout):
        rt.call(spinner, {})
    assert rt.call(tool, {"n": 1}) == {"n": 2}
    # A grant the host policy does not allow is refused before the call.
    with pytest.raises(TemperError):
        rt.call(fetcher, {}, grants=["fetch"])


def test_cancelling_the_task_cancels_the_call(store: str, tmp_path: object) -> None:
    # A 5 s limit: the spin would hold a core for 5 s unless cancelled.
    from pathlib import Path

    p = Path(str(tmp_path)) / "slow.toml"
    p.write_text("[limits]\ntimeout_ms = 5000\n")

    async def main() -> tuple[float, float]:
        aforge = AsyncForge(store=store, judge="rules", policy=str(p))
        await aforge.forge(seed("slugify"))
        task = asyncio.create_task(aforge.run_code(SPIN))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The guest no longer runs: the process's CPU time stops growing.
        cpu0 = time.process_time()
        await asyncio.sleep(1.0)
        spent = time.process_time() - cpu0
        started = time.monotonic()
        assert await aforge.call("slugify", {"text": "Still Here"}) == {"slug": "still-here"}
        return spent, time.monotonic() - started

    spent, call_took = asyncio.run(main())
    assert spent < 0.5, f"{spent:.2f} s of CPU in the second after the cancel: the call still runs"
    assert call_took < 1.0
