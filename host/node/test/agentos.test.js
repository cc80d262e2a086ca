// AgentOS 0.9.164's own EmergentCapabilityEngine on Temper: built with
// TemperSandboxForge, it forges and runs the seed's sandbox examples; the
// hostile cases are contained and the host serves the next call; built
// tools are cached by code and allowlist.
import test from 'node:test'
import assert from 'node:assert/strict'
import {
  ComposableToolBuilder,
  DEFAULT_EMERGENT_CONFIG,
  EmergentCapabilityEngine,
  EmergentJudge,
  EmergentToolRegistry,
} from '@framers/agentos'
import { TemperSandboxForge, policyFor } from 'temper-forge/agentos'
import { CASES, NEXT_CALL, redirectServers, runCase } from './hostile.js'
import { seed } from './helpers.js'

/** AgentOS's judge with a scripted model standing in for the LLM (no
 * network): it answers in the JSON the judge parses, passing correctness
 * only when every test in the prompt ran with `success=true`. */
function scriptedJudge () {
  const prompts = []
  const generateText = async (model, prompt) => {
    prompts.push(prompt)
    const passed = /success=true/.test(prompt) && !/success=false/.test(prompt)
    return JSON.stringify({
      safety: { passed: true, score: 0.9 },
      correctness: { passed, score: passed ? 0.9 : 0 },
      determinism: { likely: true },
      bounded: { likely: true },
      confidence: 0.9,
      reasoning: passed ? 'every test ran' : 'a test failed',
    })
  }
  return { judge: new EmergentJudge({ judgeModel: 'scripted', promotionModel: 'scripted', generateText }), prompts }
}

function engineWith (sandboxForge) {
  const config = { ...DEFAULT_EMERGENT_CONFIG, enabled: true, allowSandboxTools: true }
  const { judge, prompts } = scriptedJudge()
  const engine = new EmergentCapabilityEngine({
    config,
    composableBuilder: new ComposableToolBuilder(async () => ({ success: false, error: 'no tools' })),
    sandboxForge,
    judge,
    registry: new EmergentToolRegistry(config),
  })
  return { engine, prompts }
}

test("AgentOS's engine forges and runs the seed's sandbox examples on Temper", async () => {
  const sandbox = new TemperSandboxForge()
  const { engine, prompts } = engineWith(sandbox)
  const calls = {
    slugify: [{ text: 'Hello AgentOS on Temper' }, { slug: 'hello-agentos-on-temper' }],
    parse_csv: [{ csv: 'x;y\n1;2', delimiter: ';' }, { headers: ['x', 'y'], rows: [{ x: '1', y: '2' }] }],
    convert_temperature: [{ value: 212, from: 'F', to: 'C' }, { result: 100 }],
  }
  for (const [name, [input, expected]] of Object.entries(calls)) {
    const result = await engine.forge(seed(name), { agentId: 'agent-1', sessionId: 's1' })
    assert.equal(result.success, true, `${name}: ${result.error}`)
    const tool = engine.createExecutableTool(result.tool)
    const out = await tool.execute(input, { gmiId: 'agent-1', personaId: 'p', userContext: { userId: 'u' } })
    assert.equal(out.success, true, `${name}: ${out.error}`)
    assert.deepEqual(out.output, expected)
  }
  // The judge saw the test results Temper produced.
  assert.equal(prompts.length, 3)
  assert.match(prompts[0], /output=\{"slug":"hello-world"\} success=true/)
  // Each (code, allowlist) was built once: the tests and the call reused it.
  const stats = sandbox.cacheStats()
  assert.equal(stats.builds, 3)
  assert.ok(stats.hits >= 5, JSON.stringify(stats))
  // A tool whose test throws on Temper is rejected by AgentOS's judge.
  const bad = { ...seed('slugify'), name: 'slugify_bad' }
  bad.implementation = { ...bad.implementation, code: "function execute(input) { throw new Error('nope') }" }
  const rejected = await engine.forge(bad, { agentId: 'agent-1', sessionId: 's1' })
  assert.equal(rejected.success, false)
  assert.match(prompts[3], /success=false error=ETOOL: .*nope/)
})

test('AgentOS run(input) entry points and async code run', async () => {
  const sandbox = new TemperSandboxForge()
  const r = await sandbox.execute({ code: 'async function run(input) { return { twice: input.n * 2 }; }', input: { n: 21 }, allowlist: [], memoryMB: 128, timeoutMs: 1000 })
  assert.deepEqual(r.output, { twice: 42 })
  assert.equal(r.success, true)
  const thrown = await sandbox.execute({ code: "function execute(input) {\n  throw new Error('nope')\n}", input: {}, allowlist: [], memoryMB: 128, timeoutMs: 1000 })
  assert.equal(thrown.success, false)
  assert.equal(thrown.errorCode, 'ETOOL')
  assert.match(thrown.error, /nope/)
})

test('the hostile cases are contained by the drop-in and the host serves the next call', async () => {
  const servers = await redirectServers()
  try {
    const sandbox = new TemperSandboxForge({
      timeoutMs: 2000,
      fetchDomainAllowlist: [`localhost:${servers.outerPort}`],
      allowPrivateNetwork: true,
      fsReadRoots: [servers.root],
    })
    for (const c of CASES) {
      const { result, after, contained, rssMB } = await runCase(sandbox, c, servers)
      assert.ok(contained, `${c.name}: ${JSON.stringify({ result, after, rssMB })}`)
      const next = await sandbox.execute({ ...NEXT_CALL, memoryMB: 128, timeoutMs: 2000 })
      assert.deepEqual(next.output, NEXT_CALL.expected, `${c.name}: the next call`)
    }
    // What each refusal was.
    const codes = {}
    const errors = {}
    for (const c of CASES) {
      const { result } = await runCase(sandbox, c, servers)
      codes[c.name] = result.errorCode
      errors[c.name] = result.error
    }
    assert.equal(codes['memory bomb'], 'EMEMORY')
    // A busy promise chain allocates as it spins: the memory cap or the
    // timeout ends it, whichever comes first.
    assert.ok(['ETIMEOUT', 'EMEMORY'].includes(codes['busy .then chain']), codes['busy .then chain'])
    // The redirect hop is checked like a request: the host refuses it and
    // the tool's fetch throws.
    assert.equal(codes['fetch redirect to loopback'], 'ETOOL')
    assert.match(errors['fetch redirect to loopback'], /not allowed: 127\.0\.0\.1/)
    // The read root itself is readable; the symlink out of it is not.
    const inside = await sandbox.execute({ code: "async function execute(input) { return String(await fs.readFile(input.path, 'utf8')) }", input: { path: `${servers.root}/inside.txt` }, allowlist: ['fs.readFile'], memoryMB: 128, timeoutMs: 2000 })
    assert.equal(inside.output, 'inside')
    assert.equal(codes['symlink in the read root to a file outside it'], 'ETOOL')
  } finally {
    servers.close()
  }
})

test('AgentOS settings map onto a deny-by-default policy', async () => {
  assert.deepEqual(policyFor({}).fetch.domains, [])
  const sandbox = new TemperSandboxForge()
  // An empty fetchDomainAllowlist allows no host (AgentOS: every host):
  // fetch is granted, and the host refuses the URL, which the tool sees
  // as a thrown TypeError.
  const r = await sandbox.execute({ code: "async function execute() { return (await fetch('http://127.0.0.1:9/')).status }", input: {}, allowlist: ['fetch'], memoryMB: 128, timeoutMs: 1000 })
  assert.equal(r.success, false)
  assert.equal(r.errorCode, 'ETOOL')
  assert.match(r.error, /not allowed: 127\.0\.0\.1/)
  // Without `fetch` in the code's allowlist, fetch is a capability denied.
  const denied = await sandbox.execute({ code: "async function execute() { return (await fetch('http://127.0.0.1:9/')).status }", input: {}, allowlist: [], memoryMB: 128, timeoutMs: 1000 })
  assert.equal(denied.errorCode, 'ECAPABILITY')
  // A capability the code's allowlist does not name is not granted.
  const c = await sandbox.execute({ code: "function execute() { return crypto.createHash('sha256').update('x').digest('hex') }", input: {}, allowlist: [], memoryMB: 128, timeoutMs: 1000 })
  assert.equal(c.errorCode, 'ECAPABILITY')
  const ok = await sandbox.execute({ code: "function execute() { return crypto.createHash('sha256').update('x').digest('hex') }", input: {}, allowlist: ['crypto'], memoryMB: 128, timeoutMs: 1000 })
  assert.equal(ok.output, '2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881')
  assert.deepEqual(sandbox.validateCode('function execute() {}', ['fetch']), { valid: true, violations: [] })
  assert.equal(sandbox.validateCode('function execute() {}', ['shell']).valid, false)
})

test('validateCode refuses blocked APIs with the static check the forge runs', async () => {
  const sandbox = new TemperSandboxForge()
  const code = 'function execute(input) { return eval(input.expr) }'
  const checked = sandbox.validateCode(code, [])
  assert.deepEqual(checked, {
    valid: false,
    violations: ['blocked API `eval` at 1:34 (arbitrary code execution)'],
  })
  // The same text the runtime's own validation (static check and compile) gives.
  const validated = await sandbox.runtime.validate(code)
  assert.equal(validated.valid, false)
  assert.match(validated.violations[0], /blocked API `eval` at 1:34 \(arbitrary code execution\)/)
  const many = sandbox.validateCode("function execute() { require('fs'); return new Function('x') }", ['shell'])
  assert.equal(many.valid, false)
  assert.equal(many.violations[0], 'unknown API in the allowlist: shell')
  assert.equal(many.violations.length, 3, many.violations.join('; '))
  assert.match(many.violations[1], /^blocked API `require` at 1:22 /)
  assert.match(many.violations[2], /^blocked API `Function` at 1:\d+ /)
  assert.deepEqual(sandbox.validateCode('function execute(input) { return input.a + 1 }'), { valid: true, violations: [] })
})

test('the build cache is bounded', async () => {
  const sandbox = new TemperSandboxForge({ cacheEntries: 2 })
  for (let i = 0; i < 4; i++) {
    const r = await sandbox.execute({ code: `function execute() { return ${i} }`, input: {}, allowlist: [], memoryMB: 128, timeoutMs: 1000 })
    assert.equal(r.output, i)
  }
  const s = sandbox.cacheStats()
  assert.equal(s.entries, 2)
  assert.equal(s.capacity, 2)
  assert.equal(s.builds, 4)
})

test('examples/agentos-engine.js wires the engine with the drop-in and runs', async () => {
  const { execFileSync } = await import('node:child_process')
  const { fileURLToPath } = await import('node:url')
  const example = fileURLToPath(new URL('../examples/agentos-engine.js', import.meta.url))
  const out = execFileSync(process.execPath, [example], { encoding: 'utf8' })
  assert.match(out, /forged: true emergent_/)
  assert.match(out, /output: \{ slug: 'agentos-on-temper' \}/)
})
