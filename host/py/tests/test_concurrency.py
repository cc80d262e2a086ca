"""The event loop stays free; sync calls release the GIL."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from conftest import seed

from temper_forge import Forge, Runtime


COUNT = {
    "name": "count_to",
    "description": "Counts to n (work for the event-loop test)",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "outputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
    "implementation": {
        "mode": "sandbox",
        "code": "function execute(input) { let x = 0; for (let i = 0; i < input.n; i++) { x = (x + i) % 1000003; } return { x }; }",
        "allowlist": [],
    },
    "testCases": [{"input": {"n": 10}, "expectedOutput": {"x": 45}}],
}


def test_200_concurrent_awaits_beside_a_10ms_heartbeat(store: str) -> None:
    forge = Forge(store=store, judge="rules")
    forge.forge(seed("slugify"))
    forge.forge(COUNT)
    # Calibrate a call to take at least 5 ms: 200 of them would hold a
    # blocked event loop for a second or more.
    n = 1 << 12
    while True:
        t0 = time.monotonic()
        forge.call("count_to", {"n": n})
        if time.monotonic() - t0 >= 0.005 or n > 1 << 28:
            break
        n *= 2

    async def main() -> tuple[list[float], list[object], float]:
        aforge = forge.aio()
        beats: list[float] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            while not stop.is_set():
                beats.append(time.monotonic())
                await asyncio.sleep(0.01)

        hb = asyncio.create_task(heartbeat())
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        calls = [aforge.call("count_to", {"n": n}) for _ in range(100)]
        calls += [aforge.call("slugify", {"text": f"Item {i}"}) for i in range(100)]
        outs = await asyncio.gather(*calls)
        took = time.monotonic() - t0
        await asyncio.sleep(0.05)
        stop.set()
        await hb
        return beats, list(outs), took

    beats, outs, took = asyncio.run(main())
    assert outs[100:] == [{"slug": f"item-{i}"} for i in range(100)]
    assert len({json.dumps(o) for o in outs[:100]}) == 1
    gaps = [b - a for a, b in zip(beats, beats[1:])]
    assert took > 0.2, f"the calls took {took:.3f} s: too short to show a blocked loop"
    # Each tick sleeps 10 ms; a blocked loop would show a gap as long as the
    # calls take. 60 ms allows a loaded 2-core machine's scheduling.
    assert max(gaps) < 0.06, f"longest heartbeat gap {max(gaps) * 1000:.1f} ms while the calls took {took:.2f} s"


def test_threads_calling_the_sync_api_run_in_parallel() -> None:
    rt = Runtime()
    tool = rt.build(
        "function execute(input) { let x = 0; for (let i = 0; i < input.n; i++) { x = (x + i) % 7; } return { x }; }"
    )
    # Calibrate the loop to take at least 0.3 s in one thread.
    n = 1 << 16
    while True:
        t0 = time.monotonic()
        rt.call(tool, {"n": n})
        one = time.monotonic() - t0
        if one > 0.3 or n > 1 << 30:
            break
        n *= 2

    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def work() -> None:
        start = time.monotonic()
        rt.call(tool, {"n": n})
        with lock:
            spans.append((start, time.monotonic()))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    # The main thread keeps running Python while both calls run.
    ticks: list[float] = []
    while any(t.is_alive() for t in threads):
        ticks.append(time.monotonic())
        time.sleep(0.005)
    for t in threads:
        t.join()
    # Both calls were in the sandbox at once: a call holding the GIL would
    # keep the other thread from even starting its call until it ended.
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < one / 2, f"main thread stalled {max(gaps):.3f} s during {one:.3f} s calls"


def test_forge_from_threads(store: str) -> None:
    forge = Forge(store=store, judge="rules")
    forge.forge(seed("slugify"))
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                assert forge.call("slugify", {"text": f"T{i} {j}"}) == {"slug": f"t{i}-{j}"}
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
