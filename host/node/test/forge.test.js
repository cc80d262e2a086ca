// Forge and call the seed examples from Node: Promises, AbortSignal, the
// event loop left free while a guest runs, and typed errors.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { Forge, Runtime, TemperError } from 'temper-forge'
import { heartbeat, seed, tempDir } from './helpers.js'

const store = tempDir()
test.after(() => store.remove())

let forge
test.before(async () => {
  forge = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-1', session: 's1', timeoutMs: 1500 })
})

test('the ESM and CJS entry points export the same classes', () => {
  const require = createRequire(import.meta.url)
  const cjs = require('temper-forge')
  assert.equal(cjs.Forge, Forge)
  assert.equal(cjs.Runtime, Runtime)
  assert.equal(cjs.TemperError, TemperError)
})

test('the seed examples forge and answer their calls', async () => {
  for (const name of ['slugify', 'add_numbers', 'parse_csv', 'convert_temperature']) {
    const result = await forge.forge(seed(name))
    assert.equal(result.success, true, name)
    assert.equal(result.tool.name, name)
    assert.match(result.tool.id, /^[0-9a-f]{64}$/)
  }
  assert.deepEqual(await forge.call('slugify', { text: 'Hi there!' }), { slug: 'hi-there' })
  assert.deepEqual(await forge.call('add_numbers', { a: 2, b: 40 }), { sum: 42 })
  assert.deepEqual(await forge.call('convert_temperature', { value: 100, from: 'C', to: 'F' }), { result: 212 })
  const csv = await forge.call('parse_csv', { csv: 'a,b\n1,2' })
  assert.deepEqual(csv, { headers: ['a', 'b'], rows: [{ a: '1', b: '2' }] })
  // The JSON text of a request is accepted too.
  const again = await forge.forge(JSON.stringify({ ...seed('slugify'), name: 'slugify_text' }))
  assert.equal(again.success, true)
  const names = (await forge.tools()).map((t) => t.name).sort()
  assert.deepEqual(names, ['add_numbers', 'convert_temperature', 'parse_csv', 'slugify', 'slugify_text'])
})

test('calls run concurrently as Promises', async () => {
  const outs = await Promise.all(Array.from({ length: 32 }, (_, i) => forge.call('add_numbers', { a: i, b: 1 })))
  assert.deepEqual(outs.map((o) => o.sum), Array.from({ length: 32 }, (_, i) => i + 1))
})

test('a fetch tool is refused under the default deny-all policy, naming the stage', async () => {
  await assert.rejects(forge.forge(seed('check_http_status')), (e) => {
    assert.ok(e instanceof TemperError)
    assert.ok(e instanceof Error)
    assert.equal(e.code, 'EFORGE_REFUSED')
    assert.equal(e.stage, 'validate')
    assert.match(e.message, /fetch/)
    return true
  })
})

test('a refused forge carries its stage and result: failing tests, no judge', async () => {
  const bad = seed('slugify')
  bad.name = 'slugify_wrong'
  bad.testCases[0].expectedOutput = { slug: 'nope' }
  await assert.rejects(forge.forge(bad), (e) => e.code === 'EFORGE_REFUSED' && e.stage === 'test' && e.result.success === false)
  const unjudged = await Forge.open({ store: store.dir, agent: 'agent-2', session: 's9' })
  await assert.rejects(unjudged.forge(seed('add_numbers')), (e) => e.code === 'EFORGE_REFUSED' && e.stage === 'judge')
})

test('call errors are typed: not found, input, tool, timeout, memory, capability', async () => {
  await assert.rejects(forge.call('no_such_tool', {}), (e) => e.code === 'ENOTFOUND' && e.tool === 'no_such_tool')
  await assert.rejects(forge.call('slugify', { text: 42 }), (e) => e.code === 'EINPUT' && e.at === '/text')
  await assert.rejects(
    forge.runCode("const x = 1;\nthrow new Error('broken ' + x)"),
    (e) => e.code === 'ETOOL' && e.jsMessage.includes('broken 1') && e.line === 2,
  )
  await assert.rejects(forge.runCode('for (;;) {}'), (e) => e.code === 'ETIMEOUT' && e.limitMs === 1500)
  await assert.rejects(
    forge.runCode('const keep = []; for (;;) keep.push(new Array(1 << 20).fill(7));'),
    (e) => e.code === 'EMEMORY',
  )
  await assert.rejects(
    forge.runCode("return await fetch('https://example.com/')"),
    (e) => e.code === 'ECAPABILITY' && e.capability === 'fetch',
  )
  // The host still serves.
  assert.deepEqual(await forge.call('slugify', { text: 'ok' }), { slug: 'ok' })
})

test('runCode calls forged tools by name', async () => {
  const out = await forge.runCode("const a = await tools.slugify({ text: 'A B' }); const b = await tools.add_numbers({ a: 1, b: 2 }); return [a.slug, b.sum]", { tools: ['slugify', 'add_numbers'] })
  assert.deepEqual(out, ['a-b', 3])
})

test('the event loop runs while a guest spins, and an AbortSignal stops the call', async () => {
  const { ticks, maxGap, elapsed } = await heartbeat(async () => {
    const spin = forge.runCode('for (;;) {}', { signal: AbortSignal.timeout(300) })
    await assert.rejects(spin, (e) => e.name === 'TimeoutError')
  }, 5)
  assert.ok(elapsed < 1200, `aborted after ${elapsed} ms, not at the 1500 ms limit`)
  assert.ok(ticks >= 5, `only ${ticks} timer ticks while the guest ran`)
  assert.ok(maxGap < 150, `the event loop stalled for ${maxGap} ms while the guest ran`)
  const controller = new AbortController()
  const pending = forge.call('slugify', { text: 'x' }, { signal: controller.signal })
  assert.deepEqual(await pending, { slug: 'x' })
  controller.abort()
  await assert.rejects(forge.call('slugify', { text: 'x' }, { signal: controller.signal }), (e) => e.name === 'AbortError')
  assert.deepEqual(await forge.call('slugify', { text: 'After Abort' }), { slug: 'after-abort' })
})

test('promote moves a used session tool to the agent tier', async () => {
  for (let i = 0; i < 6; i++) await forge.call('convert_temperature', { value: i, from: 'C', to: 'K' })
  const info = await forge.promote('convert_temperature')
  assert.equal(info.tier, 'agent')
  // Another session of the same agent sees it now.
  const other = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-1', session: 's2' })
  assert.deepEqual(await other.call('convert_temperature', { value: 0, from: 'C', to: 'K' }), { result: 273.15 })
  await assert.rejects(other.call('slugify', { text: 'x' }), (e) => e.code === 'ENOTFOUND')
})

test('policy objects are checked like policy files', async () => {
  await assert.rejects(
    Forge.open({ store: store.dir, policy: { allow: ['teleport'] } }),
    (e) => e instanceof TemperError && e.code === 'EINPUT' && /unknown capability "teleport"/.test(e.message),
  )
  await assert.rejects(
    Forge.open({ store: store.dir, policy: { allow: ['fetch'], fetch: { domainz: [] } } }),
    (e) => e.code === 'EINPUT' && /domainz/.test(e.message),
  )
  await assert.rejects(Forge.open({ store: store.dir, judge: 'oracle' }), (e) => e instanceof TemperError && e.code === 'EHOST' && /oracle/.test(e.message))
  // A policy object that allows what the tool asks for lets it forge.
  const open = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-3', session: 's1', policy: { allow: ['crypto'] } })
  const hash = seed('add_numbers')
  hash.name = 'sha_hex'
  hash.implementation = { mode: 'sandbox', allowlist: ['crypto'], code: "function execute(input) { return { hex: crypto.createHash('sha256').update(input.text).digest('hex') } }" }
  hash.inputSchema = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }
  hash.outputSchema = { type: 'object', properties: { hex: { type: 'string' } } }
  hash.testCases = [{ input: { text: 'x' }, expectedOutput: { hex: '2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881' } }]
  assert.equal((await open.forge(hash)).success, true)
})

test('delete frees a session slot; what it cannot delete is refused clearly', async () => {
  const own = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-del', session: 's1' })
  assert.equal((await own.forge(seed('slugify'))).success, true)
  const info = await own.delete('slugify')
  assert.equal(info.name, 'slugify')
  assert.equal(info.tier, 'session')
  assert.deepEqual(await own.tools(), [])
  await assert.rejects(own.delete('slugify'), (e) => e.code === 'ENOTFOUND' &&
    e.message.includes('delete: session "s1" has no tool named "slugify"; it holds no tools (only session-tier tools can be deleted)'))
  await assert.rejects(own.delete('run_code'), (e) => e.code === 'EFORGE_REFUSED' &&
    e.message.includes('delete: "run_code" is a built-in tool and cannot be deleted'))
})

test('an AgentOS package over maxArtifactBytes is refused before it is parsed', async () => {
  const cap = 16 * 1024 * 1024
  const text = ' '.repeat(cap + 1)
  await assert.rejects(forge.importAgentos(text, { tier: 'session' }), (e) => e.code === 'EFORGE_REFUSED' &&
    e.message.includes(`import: the artifact is ${cap + 1} bytes, over the ${cap}-byte cap (maxArtifactBytes in --forge-config)`))
})
