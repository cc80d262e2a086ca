// The hostile tool requests of issue 39, each as AgentOS's sandbox takes
// them (`{code, input, allowlist}`), with what counts as contained. Run
// against AgentOS's own SandboxedToolForge and against TemperSandboxForge
// by bench/hostile.js (each case in a fresh Node process, for the table in
// docs/src/typescript.md) and against TemperSandboxForge alone by
// test/agentos.test.js (all in one process, the host serving a call after
// each).
import http from 'node:http'

/** A normal call made after each case: the host must still serve it. */
export const NEXT_CALL = {
  code: "function execute(input) { return { slug: input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') }; }",
  input: { text: 'Still Serving' },
  allowlist: [],
  expected: { slug: 'still-serving' },
}

/**
 * Two loopback servers: `outer` (the host the tool may fetch) answers every
 * request with a redirect to `inner` (a service on 127.0.0.1 the tool may
 * not reach), which answers with a secret.
 */
export async function redirectServers () {
  const inner = http.createServer((req, res) => res.end('internal-secret-42'))
  await new Promise((resolve) => inner.listen(0, '127.0.0.1', resolve))
  const innerPort = inner.address().port
  const outer = http.createServer((req, res) => {
    res.writeHead(302, { location: `http://127.0.0.1:${innerPort}/secret` })
    res.end()
  })
  await new Promise((resolve) => outer.listen(0, '127.0.0.1', resolve))
  const outerPort = outer.address().port
  return {
    outerPort,
    innerPort,
    close: () => { inner.close(); outer.close() },
  }
}

/**
 * The cases. `run(sandbox, ctx)` executes the case through `sandbox` (an
 * object with AgentOS's `execute`) and returns what the tool achieved;
 * `contained(result)` says whether the sandbox held.
 */
export const CASES = [
  {
    name: 'memory bomb',
    code: 'function execute(input) { const keep = []; for (;;) { keep.push(new Array(1 << 24).fill(7)); } }',
    input: {},
    allowlist: [],
    // Refused, and the process did not grow past 1 GiB (the request asks
    // for 128 MiB).
    contained: (r, after, rssMB) => r.success === false && rssMB < 1024,
  },
  {
    name: "Object.constructor('return process')()",
    code: "function execute(input) { const p = Object.constructor('return process')(); return { pid: p && p.pid ? p.pid : null, envKeys: p && p.env ? Object.keys(p.env).length : 0 }; }",
    input: {},
    allowlist: [],
    contained: (r) => !(r.success && r.output && r.output.pid),
  },
  {
    name: 'busy .then chain',
    code: 'function execute(input) { const spin = () => Promise.resolve().then(spin); spin(); return new Promise(() => {}); }',
    input: {},
    allowlist: [],
    contained: (r) => r.success === false,
  },
  {
    name: 'unhandled rejection',
    code: "function execute(input) { Promise.reject(new Error('boom')); return { ok: true }; }",
    input: {},
    allowlist: [],
    // Either result is fine; the host must live on (checked by the next call).
    contained: () => true,
  },
  {
    name: 'fetch redirect to loopback',
    code: 'async function execute(input) { const r = await fetch(input.url); return { status: r.status, body: await r.text() }; }',
    input: (ctx) => ({ url: `http://localhost:${ctx.outerPort}/go` }),
    allowlist: ['fetch'],
    contained: (r) => !(r.success && JSON.stringify(r.output).includes('internal-secret-42')),
  },
  {
    name: 'Object.prototype pollution, then another call',
    code: "function execute(input) { Object.prototype.polluted = 'yes'; Array.prototype.map = function () { return ['pwned']; }; return { done: true }; }",
    input: {},
    allowlist: [],
    // The call after it, in the same sandbox: does its world still hold?
    after: {
      code: 'function execute(input) { return { literal: ({}).polluted ?? null, viaObject: new Object().polluted ?? null, map: [1, 2].map((x) => x * 2) }; }',
      input: {},
      allowlist: [],
    },
    contained: (r, after) =>
      after.success === true &&
      after.output.literal === null &&
      after.output.viaObject === null &&
      JSON.stringify(after.output.map) === '[2,4]' &&
      ({}).polluted === undefined,
  },
]

/** The process's peak resident set so far, MiB. */
export const peakRssMB = () => Math.round(process.resourceUsage().maxRSS / 1024)

/** Runs `c` through `sandbox`: the result, and the follow-up's if any. */
export async function runCase (sandbox, c, ctx) {
  const input = typeof c.input === 'function' ? c.input(ctx) : c.input
  const request = { code: c.code, input, allowlist: c.allowlist, memoryMB: 128, timeoutMs: 2000 }
  const result = await sandbox.execute(request)
  let after = null
  if (c.after) {
    after = await sandbox.execute({ ...c.after, memoryMB: 128, timeoutMs: 2000 })
  }
  const rssMB = peakRssMB()
  return { result, after, rssMB, contained: c.contained(result, after, rssMB) }
}
