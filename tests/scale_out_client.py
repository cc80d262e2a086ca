"""The scale-out client: the official MCP Python SDK (PyPI `mcp`, 2.x)
driving several `temper mcp --http` hosts through a load balancer.

Run by tests/all/scale_out.rs with the venv from scripts/mcp-venv.sh:

    python tests/scale_out_client.py MODE URL TOKEN SLUGIFY_SEED_JSON CALLS [HOLD]

MODE is the protocol revision the client speaks:
- `2025-06-18`: the legacy handshake (initialize, then `Mcp-Session-Id` on
  every request), pinned to that revision;
- `2026-07-28`: the stateless revision (no handshake), as a standard
  client speaks it: no `_meta["dev.temper/session"]`, so every request
  runs in the token's agent's default session, whichever host serves it.

Flow: forge the slugify seed through the balancer, call it CALLS times
(8 calls in flight), then end the session (legacy: the SDK's DELETE when
the client closes). A request that was in flight on a host that died fails
with a connection error (HAProxy closes the client's connection without an
answer when the host's connection breaks) or a 502/503: the client retries
it, at the HTTP layer for a connection error (`RetryingTransport`, under
the SDK's transport, which would otherwise end the session on it) and at
the call for a 5xx, up to RETRIES times each; any other failure, or a wrong
answer, fails the run. A retried `tools/call` may have run on the dead
host: slugify has no side effects.

Prints `progress N` (N calls done) on stdout as calls complete, so the test
can kill and restart a host midway. With HOLD, no call past the first HOLD
starts until a line arrives on stdin (`hold HOLD` is printed when the
first HOLD are done): the test brings a host back meanwhile. A last line of
JSON:
`{"calls": CALLS, "retried": R, "retry_errors": [...], "session": SID}`.
Exits non-zero (with a traceback) on the first failed check.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# The `_meta` key a 2026-07-28 request names its session with (namespaced
# by the token's agent on the server).
SESSION_META_KEY = "dev.temper/session"

IN_FLIGHT = 8
RETRIES = 20
HANG_SECONDS = 900

# What a request that died with its host looks like to this client: the
# SDK maps a non-JSON 5xx answer (the balancer's 502/503) to this error.
TRANSIENT_MESSAGES = ("Server returned an error response",)


class RetryingTransport(httpx2.AsyncBaseTransport):
    """httpx's transport, retrying a request whose connection failed (the
    request was sent again through the balancer, to a live host)."""

    def __init__(self, run_stats):
        self.inner = httpx2.AsyncHTTPTransport()
        self.stats = run_stats

    async def handle_async_request(self, request):
        for attempt in range(RETRIES + 1):
            try:
                return await self.inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                if attempt == RETRIES or isinstance(exc, httpx2.TimeoutException):
                    raise
                self.stats.note(exc)
                await anyio.sleep(0.05)
        raise AssertionError("unreachable")

    async def aclose(self):
        await self.inner.aclose()


class RetryStats:
    def __init__(self):
        self.retried = 0
        self.errors = []

    def note(self, exc):
        self.retried += 1
        if len(self.errors) < 20:
            self.errors.append(f"{type(exc).__name__}: {exc}")


def transient(exc):
    if isinstance(exc, MCPError):
        return any(m in str(exc) for m in TRANSIENT_MESSAGES)
    return isinstance(exc, (httpx2.TransportError, anyio.BrokenResourceError))


def out(line):
    print(line, flush=True)


class Run:
    def __init__(self, client, mode, stats):
        self.client = client
        self.mode = mode
        # 2026-07-28: no session named (the agent's default session, which
        # forge_tool's result names).
        self.session = None
        self.stats = stats

    def meta(self):
        return None

    async def call(self, name, arguments):
        for attempt in range(RETRIES + 1):
            try:
                return await self.client.call_tool(name, arguments, meta=self.meta())
            except Exception as exc:  # noqa: BLE001 - classified below
                if not transient(exc) or attempt == RETRIES:
                    raise
                self.stats.note(exc)
                await anyio.sleep(0.05)
        raise AssertionError("unreachable")


async def flow(mode, url, token, seed, calls, hold):
    stats = RetryStats()
    # What create_mcp_http_client makes, with the retrying transport.
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
        transport=RetryingTransport(stats),
    )
    if mode == "2025-06-18":
        # The SDK's handshake offers its latest revision; pin the one this
        # run is about (the server answers in the revision offered).
        import mcp.client.session as session_module

        session_module.LATEST_HANDSHAKE_VERSION = "2025-06-18"
        connect_mode = "legacy"
    elif mode == "2026-07-28":
        connect_mode = "2026-07-28"
    else:
        raise SystemExit(f"unknown mode {mode!r}: 2025-06-18 or 2026-07-28")
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=connect_mode) as c:
            assert c.protocol_version == mode, c.protocol_version
            run = Run(c, mode, stats)
            forged = await run.call("forge_tool", seed)
            assert not forged.is_error, forged
            if mode == "2026-07-28":
                run.session = (forged.meta or {}).get(SESSION_META_KEY)
                assert run.session == "default", forged
            assert forged.structured_content["success"] is True, forged
            assert forged.structured_content["tool"]["name"] == "slugify", forged
            done = 0
            next_index = 0
            lock = anyio.Lock()
            resumed = anyio.Event()
            held = anyio.Event()

            async def resume():
                await held.wait()
                out(f"hold {hold}")
                await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                resumed.set()

            async def worker():
                nonlocal done, next_index
                while True:
                    async with lock:
                        if next_index >= calls:
                            return
                        i = next_index
                        next_index += 1
                    if hold is not None and i >= hold and not resumed.is_set():
                        await resumed.wait()
                    result = await run.call("slugify", {"text": f"Hello, World {i}!"})
                    assert not result.is_error, result
                    slug = result.structured_content["slug"]
                    assert slug == f"hello-world-{i}", (i, slug)
                    async with lock:
                        done += 1
                        if done % 10 == 0 or done == calls:
                            out(f"progress {done}")
                        if done == hold:
                            held.set()

            async with anyio.create_task_group() as tg:
                if hold is not None:
                    tg.start_soon(resume)
                for _ in range(IN_FLIGHT):
                    tg.start_soon(worker)
            assert done == calls, done
            session = run.session or getattr(c.session, "session_id", None)
            # Leaving the context ends the session (legacy: DELETE).
    out(
        json.dumps(
            {
                "calls": calls,
                "retried": stats.retried,
                "retry_errors": stats.errors,
                "session": session,
            }
        )
    )


def main():
    mode, url, token, seed_path, calls = sys.argv[1:6]
    hold = int(sys.argv[6]) if len(sys.argv) > 6 else None
    with open(seed_path) as f:
        seed = json.load(f)

    async def limited():
        with anyio.fail_after(HANG_SECONDS):
            await flow(mode, url, token, seed, int(calls), hold)

    anyio.run(limited)


if __name__ == "__main__":
    main()
