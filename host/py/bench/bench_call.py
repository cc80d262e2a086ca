"""One run, from Python, of an isolated slugify call four ways:

1. ``Forge.call`` of the forged slugify tool (in-process; the GIL released);
   ``Runtime.call`` of the same JavaScript (the sandbox alone) beside it;
2. pydantic-monty: a fresh session per call of an equivalent Python snippet
   (its worker pool kept warm);
3. ``temper mcp`` over stdio with the official MCP SDK client (``tools/call``
   round trips);
4. the Rust figure of ``cargo bench --bench foundation`` (the request path
   with a pre-warmed instance), read from target/bench-foundation.md, which
   the calling script ran just before.

Prints a Markdown table (p50, p90, p99, mean in µs) and the two targets.
Usage: python bench_call.py ROOT [CALLS]
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(sys.argv[1]).resolve()
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
WARMUP = 500
SEED = json.loads((ROOT / "tests/fixtures/seeds/slugify.json").read_text())
INPUT = {"text": "Hello World!"}
EXPECTED = {"slug": "hello-world"}

MONTY_SLUGIFY = """
out = []
prev = True
for ch in text.lower():
    if ('a' <= ch <= 'z') or ('0' <= ch <= '9'):
        out.append(ch)
        prev = False
    elif not prev:
        out.append('-')
        prev = True
s = ''.join(out)
if s.endswith('-'):
    s = s[:-1]
{'slug': s}
"""


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def row(name: str, samples: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "n": len(samples),
        "p50": pct(samples, 50),
        "p90": pct(samples, 90),
        "p99": pct(samples, 99),
        "mean": statistics.fmean(samples),
    }


def timed(fn: Callable[[], Any], n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        assert fn() == EXPECTED
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        r = fn()
        out.append((time.perf_counter_ns() - t0) / 1000)
        assert r == EXPECTED, r
    return out


def bench_forge(store: str) -> tuple[list[float], list[float]]:
    from temper_forge import Forge, Runtime

    forge = Forge(store=store, judge="rules", agent="bench", session="bench")
    forge.forge(SEED)
    call = timed(lambda: forge.call("slugify", INPUT), CALLS, WARMUP)
    rt = Runtime()
    tool = rt.build(SEED["implementation"]["code"])
    runtime = timed(lambda: rt.call(tool, INPUT), CALLS, WARMUP)
    return call, runtime


def bench_monty() -> list[float]:
    from pydantic_monty import Monty

    with Monty(min_processes=1, max_processes=1) as pool:

        def once() -> Any:
            with pool.checkout() as session:
                return session.feed_run(MONTY_SLUGIFY, inputs={"text": INPUT["text"]})

        return timed(once, min(CALLS, 2000), 100)


def bench_mcp(store: str, temper: Path) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main() -> list[float]:
        params = StdioServerParameters(
            command=str(temper),
            args=["mcp", "--store", store, "--judge", "rules", "--agent", "bench-mcp"],
            env={**os.environ},
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            forged = await session.call_tool("forge_tool", SEED)
            assert not forged.is_error, forged
            samples: list[float] = []
            n = min(CALLS, 2000)
            for i in range(n + 100):
                t0 = time.perf_counter_ns()
                res = await session.call_tool("slugify", INPUT)
                took = (time.perf_counter_ns() - t0) / 1000
                assert not res.is_error, res
                assert res.structured_content == EXPECTED, res
                if i >= 100:
                    samples.append(took)
            return samples

    return asyncio.run(main())


def rust_figure() -> float | None:
    report = ROOT / "target" / "bench-foundation.md"
    if not report.exists():
        return None
    for line in report.read_text().splitlines():
        if "pre-warmed" in line and "request path" in line:
            m = re.search(r"p50[^0-9]*([0-9.]+)\s*µs", line) or re.findall(r"([0-9.]+)\s*µs", line)
            if isinstance(m, re.Match):
                return float(m.group(1))
            if m:
                return float(m[0])
    return None


def main() -> None:
    temper = Path(os.environ.get("TEMPER_BIN", ROOT / "target/release/temper"))
    with tempfile.TemporaryDirectory() as d:
        forge_call, runtime_call = bench_forge(str(Path(d) / "py"))
        monty = bench_monty()
        mcp = bench_mcp(str(Path(d) / "mcp"), temper)
    rows = [
        row("temper_forge `Forge.call` (in-process)", forge_call),
        row("temper_forge `Runtime.call` (sandbox alone)", runtime_call),
        row("pydantic-monty, fresh session per call", monty),
        row("`temper mcp` stdio, MCP SDK `call_tool`", mcp),
    ]
    rust = rust_figure()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| path | calls | p50 µs | p90 µs | p99 µs | mean µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['n']} | {r['p50']:.1f} | {r['p90']:.1f} | {r['p99']:.1f} | {r['mean']:.1f} |")
    if rust is not None:
        print(f"| Rust `--bench foundation`, request path, pre-warmed (p50) | | {rust:.1f} | | | |")
    p50 = rows[0]["p50"]
    if rust is not None:
        print(f"target: Forge.call p50 within 15 µs of Rust: {p50:.1f} - {rust:.1f} = {p50 - rust:.1f} µs -> {'MET' if p50 - rust <= 15 else 'MISSED'}")
    ratio = rows[2]["p50"] / p50
    print(f"target: >= 5x faster than pydantic-monty's fresh session: {ratio:.1f}x -> {'MET' if ratio >= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
