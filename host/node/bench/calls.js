// One run, one process: the slugify call from Node through
// `forge.call`, the same code through `TemperSandboxForge.execute`, through
// AgentOS's own `SandboxedToolForge.execute`, and the same `Forge::invoke`
// timed inside Rust (`forge.timeCalls`). The four paths take turns in
// ROUNDS rounds of N calls each (so a burst of load from other processes
// falls on all of them), each call awaited before the next; per path, the
// median and p95 over all its calls and the best round's median.
// `node bench/calls.js [N] [ROUNDS]`.
import { loadavg } from 'node:os'
import { SandboxedToolForge } from '@framers/agentos'
import { Forge } from '../index.js'
import { TemperSandboxForge } from '../agentos.js'
import { seed, tempDir } from '../test/helpers.js'

const N = Number(process.argv[2] ?? 500)
const ROUNDS = Number(process.argv[3] ?? 8)
const WARM = 200
const request = seed('slugify')
const input = { text: 'Hello Bench World' }

function stats (us) {
  const s = [...us].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))]
  return { p50: q(0.5), p95: q(0.95), n: s.length }
}

async function timeAsync (f, n) {
  const us = []
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    await f()
    us.push(Number(process.hrtime.bigint() - t) / 1000)
  }
  return us
}

const store = tempDir()
try {
  const forge = await Forge.open({ store: store.dir, judge: 'rules', agent: 'bench', session: 'b1' })
  await forge.forge(request)
  const temper = new TemperSandboxForge()
  const agentos = new SandboxedToolForge()
  const exec = { code: request.implementation.code, input, allowlist: [], memoryMB: 128, timeoutMs: 5000 }
  const check = await temper.execute(exec)
  const checkA = await agentos.execute(exec)
  if (JSON.stringify(check.output) !== JSON.stringify(checkA.output)) throw new Error('outputs differ')

  const paths = [
    ['Forge::invoke timed inside Rust (forge.timeCalls)', (n) => forge.timeCalls('slugify', input, n)],
    ['forge.call from Node', (n) => timeAsync(() => forge.call('slugify', input), n)],
    ['TemperSandboxForge.execute (cached build)', (n) => timeAsync(() => temper.execute(exec), n)],
    ['AgentOS SandboxedToolForge.execute (node:vm)', (n) => timeAsync(() => agentos.execute(exec), n)],
  ]
  for (const [, run] of paths) await run(WARM)
  const all = paths.map(() => [])
  const best = paths.map(() => Infinity)
  const load = [loadavg()[0]]
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < paths.length; i++) {
      const us = await paths[i][1](N)
      all[i].push(...us)
      best[i] = Math.min(best[i], stats(us).p50)
    }
  }
  load.push(loadavg()[0])
  console.log(`Node ${process.version}, ${ROUNDS} rounds of ${N} calls per path after ${WARM} warm-up calls, one process; load average ${load.map((l) => l.toFixed(1)).join(' -> ')} on ${(await import('node:os')).cpus().length} cores\n`)
  console.log('| path | p50 | p95 | best round p50 | calls |\n|---|---:|---:|---:|---:|')
  const rows = paths.map(([name], i) => ({ name, ...stats(all[i]), best: best[i] }))
  for (const r of rows) console.log(`| ${r.name} | ${r.p50.toFixed(1)} µs | ${r.p95.toFixed(1)} µs | ${r.best.toFixed(1)} µs | ${r.n} |`)
  const [rust, call, drop, aos] = rows
  console.log(`\nforge.call - Rust: ${(call.p50 - rust.p50).toFixed(1)} µs (best rounds: ${(call.best - rust.best).toFixed(1)} µs); AgentOS / TemperSandboxForge: ${(aos.p50 / drop.p50).toFixed(1)}x (best rounds: ${(aos.best / drop.best).toFixed(1)}x)`)
  console.log(`TemperSandboxForge build cache: ${JSON.stringify(temper.cacheStats())}`)
} finally {
  store.remove()
}
