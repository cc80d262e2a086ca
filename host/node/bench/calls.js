// One run, one process: the slugify call from Node through
// `forge.call`, the same code through `TemperSandboxForge.execute`, through
// AgentOS's own `SandboxedToolForge.execute`, and the same `Forge::invoke`
// timed inside Rust (`forge.timeCalls`). Medians and p95 over N calls after
// a warm-up, each call awaited before the next. `node bench/calls.js [N]`.
import { SandboxedToolForge } from '@framers/agentos'
import { Forge } from '../index.js'
import { TemperSandboxForge } from '../agentos.js'
import { seed, tempDir } from '../test/helpers.js'

const N = Number(process.argv[2] ?? 2000)
const WARM = 200
const request = seed('slugify')
const input = { text: 'Hello Bench World' }

function stats (us) {
  const s = [...us].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))]
  return { p50: q(0.5), p95: q(0.95), n: s.length }
}

async function timeAsync (f) {
  for (let i = 0; i < WARM; i++) await f()
  const us = []
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint()
    await f()
    us.push(Number(process.hrtime.bigint() - t) / 1000)
  }
  return stats(us)
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

  const rows = []
  await forge.timeCalls('slugify', input, WARM)
  rows.push(['Forge::invoke timed inside Rust (forge.timeCalls)', stats(await forge.timeCalls('slugify', input, N))])
  rows.push(['forge.call from Node', await timeAsync(() => forge.call('slugify', input))])
  rows.push(['TemperSandboxForge.execute (cached build)', await timeAsync(() => temper.execute(exec))])
  rows.push(["AgentOS SandboxedToolForge.execute (node:vm)", await timeAsync(() => agentos.execute(exec))])
  const line = (name, s) => `| ${name} | ${s.p50.toFixed(1)} µs | ${s.p95.toFixed(1)} µs | ${s.n} |`
  console.log(`Node ${process.version}, ${N} calls each after ${WARM} warm-up calls, one process\n`)
  console.log('| path | p50 | p95 | calls |\n|---|---:|---:|---:|')
  for (const [name, s] of rows) console.log(line(name, s))
  const [rust, call, drop, aos] = rows.map((r) => r[1].p50)
  console.log(`\nforge.call - Rust: ${(call - rust).toFixed(1)} µs; AgentOS / TemperSandboxForge: ${(aos / drop).toFixed(1)}x`)
  console.log(`TemperSandboxForge build cache: ${JSON.stringify(temper.cacheStats())}`)
} finally {
  store.remove()
}
