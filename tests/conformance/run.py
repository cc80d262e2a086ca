"""Runs the MCP conformance suite's tools, resources, prompts and completion
scenarios against the fixture server (fixture_server.py) directly, over
Streamable HTTP, and through `temper mcp --http` fronting it as a stdio
upstream (tools.toml, policy.toml), then prints a table per scenario and
protocol revision. Exits 1 when a scenario passes directly but not through
Temper (a regression of the gateway), unless it is listed in KNOWN_GAPS,
and when a scenario fails directly (the fixture server no longer serves
what the suite asks: the comparison would say nothing); a known gap that
now passes is reported so that it can be taken off.

Called by scripts/conformance.sh (`run`), which installs the suite first.
Usage: run.py --temper PATH --python PATH --suite DIR [--markdown FILE]
Every server is started on 127.0.0.1 and stopped at the end.
"""

import argparse
import json
import os
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# The scenarios run, by group. Each is run at the suite's default revision
# for it (2025-11-25, or 2026-07-28 for a scenario introduced then), and
# again at 2026-07-28 when it applies there (MODERN below).
SCENARIOS = {
    "tools": [
        "tools-list",
        "json-schema-2020-12",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-with-logging",
        "tools-call-sampling",
        "tools-call-elicitation",
    ],
    "resources": [
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "sep-2164-resource-not-found",
    ],
    "prompts": [
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
    ],
    "completion": ["completion-complete"],
}
# Scenarios the suite removed in 2026-07-28 (run at 2025-11-25 only), and
# the one introduced then (run at 2026-07-28 only).
LEGACY_ONLY = {"tools-call-with-logging", "tools-call-sampling", "tools-call-elicitation"}
MODERN_ONLY = {"sep-2164-resource-not-found"}
LEGACY, MODERN = "2025-11-25", "2026-07-28"

# Scenarios that pass directly and are known not to pass through Temper yet,
# each with its cause. They are reported, not failed on; take one off when
# the gateway learns it (run.py says so when it passes).
KNOWN_GAPS: dict[str, str] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"conformance: {what} exited ({proc.returncode}) before listening; log:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"conformance: {what} not listening on 127.0.0.1:{port} after {timeout:.0f} s; log:\n{log.read_text()}")


def run_scenario(suite: Path, url: str, scenario: str, revision: str, out: Path) -> dict:
    """Runs one scenario; returns its check counts and failure messages."""
    out.mkdir(parents=True)
    cmd = [
        "node",
        str(suite / "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--spec-version",
        revision,
        "--timeout",
        "20000",
        "-o",
        str(out),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=suite)
    except subprocess.TimeoutExpired:
        return {"ok": False, "pass": 0, "fail": 1, "warn": 0, "errors": ["the suite ran over 60 s"], "warnings": []}
    found = list(out.glob("*/checks.json"))
    if len(found) != 1:
        output = (proc.stdout + proc.stderr)[-1000:]
        return {"ok": False, "pass": 0, "fail": 1, "warn": 0, "errors": [f"no checks.json: {output}"], "warnings": []}
    checks = json.loads(found[0].read_text())
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in ("SUCCESS", "FAILURE", "WARNING")}
    errors = [f"{c['id']}: {c.get('errorMessage', '')}" for c in checks if c["status"] == "FAILURE"]
    warnings = [f"{c['id']}: {c.get('errorMessage', '')}" for c in checks if c["status"] == "WARNING"]
    return {
        "ok": counts["FAILURE"] == 0 and proc.returncode == 0,
        "pass": counts["SUCCESS"],
        "fail": counts["FAILURE"],
        "warn": counts["WARNING"],
        "errors": errors,
        "warnings": warnings,
    }


def cell(r: dict) -> str:
    text = f"{'pass' if r['ok'] else 'FAIL'} {r['pass']}/{r['pass'] + r['fail']}"
    if r["warn"]:
        text += f" ({r['warn']} warning{'s' if r['warn'] > 1 else ''})"
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--temper", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--suite", required=True, help="the directory with node_modules/@modelcontextprotocol/conformance")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--only", help="comma-separated scenarios (default: all of SCENARIOS)")
    args = ap.parse_args()
    suite = Path(args.suite).resolve()
    only = set(args.only.split(",")) if args.only else None

    # A SIGTERM (a CI timeout) still stops the servers below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="temper-conformance-"))
    procs: list[subprocess.Popen] = []
    try:
        # The fixture server, directly over Streamable HTTP.
        fx_port = free_port()
        fx_log = work / "fixture.log"
        fx = subprocess.Popen(
            [args.python, str(HERE / "fixture_server.py"), "--http", str(fx_port)],
            stdout=fx_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        procs.append(fx)
        # Temper fronting it over stdio (the tools file's paths are relative
        # to the repository's root).
        tm_log = work / "temper.log"
        tm_port = free_port()
        tm = subprocess.Popen(
            [
                args.temper, "mcp", "--http", f"127.0.0.1:{tm_port}", "--store", str(work / "store"),
                "--judge", "rules", "--tools", str(HERE / "tools.toml"), "--policy", str(HERE / "policy.toml"),
            ],
            cwd=ROOT,
            stdout=tm_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        procs.append(tm)
        wait_port(fx_port, fx, "the fixture server", fx_log)
        wait_port(tm_port, tm, "temper mcp", tm_log)
        temper_url = f"http://127.0.0.1:{tm_port}/mcp"
        direct_url = f"http://127.0.0.1:{fx_port}/mcp"

        rows = []
        started = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=2)
        for group, names in SCENARIOS.items():
            for scenario in names:
                if only and scenario not in only:
                    continue
                revisions = [MODERN] if scenario in MODERN_ONLY else [LEGACY] if scenario in LEGACY_ONLY else [LEGACY, MODERN]
                for rev in revisions:
                    # Both sides at once: two node processes, one per core.
                    direct_run = pool.submit(run_scenario, suite, direct_url, scenario, rev, work / "direct" / rev / scenario)
                    through_run = pool.submit(run_scenario, suite, temper_url, scenario, rev, work / "temper" / rev / scenario)
                    direct, through = direct_run.result(), through_run.result()
                    rows.append((group, scenario, rev, direct, through))
                    print(f"{scenario} @ {rev}: direct {cell(direct)}, through Temper {cell(through)}", flush=True)
        pool.shutdown()
        elapsed = time.monotonic() - started

        regressions, known, fixed, broken = [], [], [], []
        lines = [
            "| scenario | revision | directly | through Temper |",
            "|---|---|---|---|",
        ]
        for group, scenario, rev, direct, through in rows:
            lines.append(f"| {scenario} | {rev} | {cell(direct)} | {cell(through)} |")
            if not direct["ok"]:
                broken.append((scenario, rev, direct["errors"]))
            if direct["ok"] and not through["ok"]:
                (known if scenario in KNOWN_GAPS else regressions).append((scenario, rev, through["errors"]))
            if scenario in KNOWN_GAPS and through["ok"]:
                fixed.append((scenario, rev))
        table = "\n".join(lines)
        n_direct = sum(1 for r in rows if r[3]["ok"])
        n_temper = sum(1 for r in rows if r[4]["ok"])
        summary = f"{len(rows)} runs: {n_direct} pass directly, {n_temper} through Temper ({elapsed:.1f} s)"
        print("\n" + table + "\n\n" + summary)
        for scenario, rev, errors in known:
            print(f"known gap: {scenario} @ {rev}: {KNOWN_GAPS[scenario]}; checks: {'; '.join(errors)}")
        for scenario, rev in fixed:
            print(f"conformance: {scenario} @ {rev} now passes through Temper: take it off KNOWN_GAPS in {__file__}")
        for scenario, rev, errors in regressions:
            print(f"conformance: REGRESSION: {scenario} @ {rev} passes directly but not through Temper: {'; '.join(errors)}")
        for scenario, rev, errors in broken:
            print(f"conformance: the fixture server fails {scenario} @ {rev} directly (fix the fixture): {'; '.join(errors)}")
        for group, scenario, rev, direct, through in rows:
            for w in through.get("warnings", []):
                print(f"warning through Temper: {scenario} @ {rev}: {w}")
        if args.markdown:
            Path(args.markdown).write_text(table + "\n\n" + summary + "\n")
        if regressions or broken:
            (work / "keep").touch()
            print(f"conformance: logs kept in {work}")
            return 1
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if os.environ.get("TEMPER_CONFORMANCE_KEEP") != "1" and not (work / "keep").exists():
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
