// One run, one process: the slugify call timed inside Rust
// (`temper_embed::Opened::call`, forge.timeCalls) and from Node through
// `forge.call`; the same code run inside Rust (runtime.timeExecutes, the
// cached build in a fresh instance), through `TemperSandboxForge.execute`,
// and through AgentOS's own `SandboxedToolForge.execute`; plus the addon's
// direct path (its napi `async fn call`, without the call pump) for
// comparison. With TEMPER_BENCH_BEFORE=DIR (a copy of the package as it was
// before: its index.js, agentos.js and .node), that package's forge.call
// and TemperSandboxForge.execute run in the same process too, on the same
// store and session.
//
// Every path does the same work: the same tool, input and warm state, each
// call awaited before the next. The paths take turns in ROUNDS rounds of N
// calls each (so a burst of load from other processes falls on all of
// them); per path, the median and p95 over all its calls and the best
// round's median. `node bench/calls.js [N] [ROUNDS]`.
import { readFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { SandboxedToolForge } from '@framers/agentos'
import { Forge } from '../index.js'
import { TemperSandboxForge } from '../agentos.js'
import { seed, tempDir } from '../test/helpers.js'

const N = Number(process.argv[2] ?? 500)
const ROUNDS = Number(process.argv[3] ?? 8)
const WARM = 200
const request = seed('slugify')
const input = { text: 'Hello Bench World' }
const inputText = JSON.stringify(input)
const native = createRequire(import.meta.url)('../native.cjs')

/** Jiffies: the machine's busy and total (/proc/stat), this process's
 * own (/proc/self/stat, every thread). */
function cpuTimes () {
  const [, ...f] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/)
  const n = f.slice(0, 8).map(Number)
  const total = n.reduce((a, b) => a + b, 0)
  const idle = n[3] + n[4]
  const self = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')
  return { busy: total - idle, total, self: Number(self[11]) + Number(self[12]) }
}

/** The share of the machine's CPU time other processes used between `a`
 * and `b`, %. */
function othersShare (a, b) {
  return Math.max(0, (100 * ((b.busy - a.busy) - (b.self - a.self))) / (b.total - a.total))
}

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
  const expected = JSON.stringify((await agentos.execute(exec)).output)
  const same = (label, out) => {
    if (JSON.stringify(out) !== expected) throw new Error(`${label}: ${JSON.stringify(out)}, not ${expected}`)
  }
  same('forge.call', await forge.call('slugify', input))
  same('forge.call (direct)', await native.Forge.prototype.call.call(forge, 'slugify', input))
  same('TemperSandboxForge.execute', (await temper.execute(exec)).output)

  const paths = [
    ['Rust: Opened::call (forge.timeCalls)', (n) => forge.timeCalls('slugify', input, n)],
    ['forge.call from Node (call pump)', (n) => timeAsync(() => forge.call('slugify', input), n)],
    ['forge.call from Node (direct napi async fn)', (n) => timeAsync(() => native.Forge.prototype.call.call(forge, 'slugify', input), n)],
    ['Rust: the cached build run (runtime.timeExecutes)', (n) => temper.runtime.timeExecutes(exec.code, inputText, [], n)],
    ['TemperSandboxForge.execute (call pump)', (n) => timeAsync(() => temper.execute(exec), n)],
    ['AgentOS SandboxedToolForge.execute (node:vm)', (n) => timeAsync(() => agentos.execute(exec), n)],
  ]
  if (process.env.TEMPER_BENCH_BEFORE) {
    const dir = resolve(process.env.TEMPER_BENCH_BEFORE)
    const before = await import(pathToFileURL(join(dir, 'index.js')))
    const beforeAgentos = await import(pathToFileURL(join(dir, 'agentos.js')))
    const old = await before.Forge.open({ store: store.dir, judge: 'rules', agent: 'bench', session: 'b1' })
    const oldTemper = new beforeAgentos.TemperSandboxForge()
    same('before: forge.call', await old.call('slugify', input))
    same('before: TemperSandboxForge.execute', (await oldTemper.execute(exec)).output)
    paths.push(
      ['before: Rust (its forge.timeCalls)', (n) => old.timeCalls('slugify', input, n)],
      ['before: forge.call from Node', (n) => timeAsync(() => old.call('slugify', input), n)],
      ['before: TemperSandboxForge.execute', (n) => timeAsync(() => oldTemper.execute(exec), n)],
    )
  }
  for (const [, run] of paths) await run(WARM)
  const all = paths.map(() => [])
  const best = paths.map(() => Infinity)
  const load = [loadavg()[0]]
  const cpu0 = cpuTimes()
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < paths.length; i++) {
      const us = await paths[i][1](N)
      all[i].push(...us)
      best[i] = Math.min(best[i], stats(us).p50)
    }
  }
  load.push(loadavg()[0])
  const others = othersShare(cpu0, cpuTimes())
  console.log(`Node ${process.version}, ${ROUNDS} rounds of ${N} calls per path after ${WARM} warm-up calls, one process; on ${cpus().length} cores, other processes used ${others.toFixed(1)}% of the machine's CPU time during the rounds (load average ${load.map((l) => l.toFixed(2)).join(' -> ')}, which counts this bench's own threads); TEMPER_NODE_SPIN_US=${native.spinUs()}, TEMPER_NODE_RETIRE_AFTER=${process.env.TEMPER_NODE_RETIRE_AFTER ?? 'unset'}\n`)
  console.log('| path | p50 | p95 | best round p50 | calls |\n|---|---:|---:|---:|---:|')
  const rows = paths.map(([name], i) => ({ name, ...stats(all[i]), best: best[i] }))
  for (const r of rows) console.log(`| ${r.name} | ${r.p50.toFixed(1)} µs | ${r.p95.toFixed(1)} µs | ${r.best.toFixed(1)} µs | ${r.n} |`)
  const [rust, call, direct, rustExec, drop, aos] = rows
  const gap = (a, b) => `${(a.p50 - b.p50).toFixed(1)} µs (best rounds: ${(a.best - b.best).toFixed(1)} µs)`
  const ratio = (a, b) => `${(a.p50 / b.p50).toFixed(1)}x (best rounds: ${(a.best / b.best).toFixed(1)}x)`
  console.log(`\nforge.call - Rust: ${gap(call, rust)}; direct path - Rust: ${gap(direct, rust)}`)
  console.log(`TemperSandboxForge.execute - Rust: ${gap(drop, rustExec)}; AgentOS / TemperSandboxForge: ${ratio(aos, drop)}`)
  if (rows.length > 6) {
    const [oldRust, oldCall, oldDrop] = rows.slice(6)
    console.log(`before: forge.call - its Rust: ${gap(oldCall, oldRust)}; forge.call - Rust (this run's): ${gap(oldCall, rust)}; AgentOS / its TemperSandboxForge: ${ratio(aos, oldDrop)}`)
    console.log(`before / after: forge.call ${ratio(oldCall, call)}; TemperSandboxForge.execute ${ratio(oldDrop, drop)}`)
  }
  console.log(`TemperSandboxForge build cache: ${JSON.stringify(temper.cacheStats())}`)
} finally {
  store.remove()
}
