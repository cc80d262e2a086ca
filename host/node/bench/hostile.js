// The hostile cases of test/hostile.js against AgentOS's own
// SandboxedToolForge and against TemperSandboxForge, each case in a fresh
// Node process (a crash or a hang ends only that process), followed in the
// same process by a normal call. Prints a Markdown table and, with --json,
// the rows. `node bench/hostile.js [agentos|temper ...]`.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { CASES, NEXT_CALL, redirectServers, runCase } from '../test/hostile.js'

const HANG_MS = 15000
const self = fileURLToPath(import.meta.url)

async function sandboxFor (kind, servers) {
  if (kind === 'agentos') {
    const { SandboxedToolForge } = await import('@framers/agentos')
    // AgentOS's own defaults, the fetch allowlist naming the one host.
    return new SandboxedToolForge({ timeoutMs: 2000, fetchDomainAllowlist: ['localhost'] })
  }
  const { TemperSandboxForge } = await import('../agentos.js')
  return new TemperSandboxForge({
    timeoutMs: 2000,
    // The same one host (Temper's rules name the port; loopback needs
    // allowPrivateNetwork, off by default).
    fetchDomainAllowlist: [`localhost:${servers.outerPort}`],
    allowPrivateNetwork: true,
  })
}

async function child (kind, index) {
  const servers = await redirectServers()
  const sandbox = await sandboxFor(kind, servers)
  const c = CASES[index]
  const started = performance.now()
  const { result, after, contained, rssMB } = await runCase(sandbox, c, servers)
  const ms = Math.round(performance.now() - started)
  const next = await sandbox.execute({ ...NEXT_CALL, memoryMB: 128, timeoutMs: 2000 })
  const served = next.success === true && JSON.stringify(next.output) === JSON.stringify(NEXT_CALL.expected)
  process.stdout.write(JSON.stringify({ result, after, contained, served, ms, rssMB }) + '\n')
  // Let pending host work (a stray rejection, a timer) surface before exit.
  await new Promise((resolve) => setTimeout(resolve, 200))
  servers.close()
  process.exit(0)
}

function runChild (kind, index) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [self, '--child', kind, String(index)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => { out += d })
    p.stderr.on('data', (d) => { err += d })
    let hung = false
    const timer = setTimeout(() => { hung = true; p.kill('SIGKILL') }, HANG_MS)
    p.on('exit', (code, signal) => {
      clearTimeout(timer)
      const line = out.split('\n').find((l) => l.startsWith('{'))
      const report = line ? JSON.parse(line) : null
      resolve({ code, signal, hung, report, stderr: err.slice(-400) })
    })
  })
}

function verdict (r) {
  if (r.hung) return { contained: false, text: `host hung (killed after ${HANG_MS / 1000} s)` }
  let what = r.report
    ? (r.report.result.success ? `ran: ${JSON.stringify(r.report.result.output).slice(0, 60)}` : `refused: ${String(r.report.result.error).slice(0, 70)}`)
    : 'no result'
  if (r.report) what += ` (peak RSS ${r.report.rssMB} MiB)`
  if (r.code !== 0 || r.signal) {
    return { contained: false, text: `host crashed (exit ${r.code ?? r.signal}) after ${what}` }
  }
  if (!r.report.served) return { contained: false, text: `${what}; next call not served` }
  if (!r.report.contained) {
    const seen = r.report.after ? `; next call saw ${JSON.stringify(r.report.after.output)}` : ''
    return { contained: false, text: `not contained: ${what}${seen}` }
  }
  return { contained: true, text: `contained: ${what}; next call served` }
}

async function main () {
  const kinds = process.argv.slice(2).filter((a) => !a.startsWith('--'))
  const json = process.argv.includes('--json')
  const sandboxes = kinds.length ? kinds : ['agentos', 'temper']
  const rows = []
  for (let i = 0; i < CASES.length; i++) {
    const row = { case: CASES[i].name }
    for (const kind of sandboxes) row[kind] = verdict(await runChild(kind, i))
    rows.push(row)
  }
  if (json) {
    console.log(JSON.stringify(rows, null, 2))
    return
  }
  console.log(`| case | ${sandboxes.join(' | ')} |`)
  console.log(`|---|${sandboxes.map(() => '---').join('|')}|`)
  for (const row of rows) {
    console.log(`| ${row.case} | ${sandboxes.map((k) => row[k].text.replaceAll('|', '\\|')).join(' | ')} |`)
  }
  for (const kind of sandboxes) {
    const n = rows.filter((r) => r[kind].contained).length
    console.log(`\n${kind}: ${n} of ${rows.length} contained`)
  }
}

if (process.argv[2] === '--child') {
  child(process.argv[3], Number(process.argv[4])).catch((e) => {
    process.stderr.write(String(e && e.stack) + '\n')
    process.exit(3)
  })
} else {
  main()
}
