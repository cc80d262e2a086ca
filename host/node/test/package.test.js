// AgentOS tool packages (agentos.emergent-tool.v1) both ways: a package
// AgentOS exported (buildEmergentToolPackage + serializeEmergentToolPackage)
// imports into Temper (its tests and the judge run); a Temper export parses
// in AgentOS (parseEmergentToolPackage) and runs in AgentOS's own sandbox.
import test from 'node:test'
import assert from 'node:assert/strict'
import {
  SandboxedToolForge,
  buildEmergentToolPackage,
  materializeEmergentToolFromPackage,
  parseEmergentToolPackage,
  serializeEmergentToolPackage,
} from '@framers/agentos'
import { Forge } from 'temper-forge'
import { seed, tempDir } from './helpers.js'

const stores = [tempDir(), tempDir()]
test.after(() => stores.forEach((s) => s.remove()))

/** An EmergentTool as AgentOS's engine registers one for `request`. */
function agentosTool (request, code = request.implementation.code) {
  return {
    id: 'emergent_1764320000000_abc123',
    name: request.name,
    description: request.description,
    inputSchema: request.inputSchema,
    outputSchema: request.outputSchema,
    implementation: { mode: 'sandbox', code, allowlist: request.implementation.allowlist },
    tier: 'session',
    createdBy: 'agent-7',
    createdAt: '2026-11-28T09:00:00.000Z',
    judgeVerdicts: [],
    usageStats: { totalUses: 0, successCount: 0, failureCount: 0, avgExecutionTimeMs: 0, lastUsedAt: null, confidenceScore: 0.9 },
    source: 'forged by agent agent-7 during session s1',
  }
}

test('a package AgentOS exported imports into Temper, in YAML and JSON', async () => {
  const forge = await Forge.open({ store: stores[0].dir, judge: 'rules', agent: 'agent-1', session: 's1' })
  const request = seed('parse_csv')
  const yaml = serializeEmergentToolPackage(buildEmergentToolPackage(agentosTool(request)), 'yaml')
  assert.match(yaml, /schemaVersion: agentos.emergent-tool.v1/)
  const imported = await forge.importAgentos(yaml, { tests: request.testCases })
  assert.equal(imported.success, true)
  assert.equal(imported.tool.tier, 'agent')
  assert.equal(imported.testResults.length, 1)
  assert.deepEqual(await forge.call('parse_csv', { csv: 'k\nv' }), { headers: ['k'], rows: [{ k: 'v' }] })

  const convert = seed('convert_temperature')
  const json = serializeEmergentToolPackage(buildEmergentToolPackage(agentosTool(convert)), 'json')
  const result = await forge.importAgentos(json, { tests: convert.testCases, tier: 'session' })
  assert.equal(result.tool.tier, 'session')
  assert.deepEqual(await forge.call('convert_temperature', { value: 0, from: 'C', to: 'F' }), { result: 32 })
})

test('a package whose tests fail is refused at the test stage, and nothing lands', async () => {
  const forge = await Forge.open({ store: stores[0].dir, judge: 'rules', agent: 'agent-1', session: 's3' })
  const request = { ...seed('slugify'), name: 'slugify_broken' }
  const text = serializeEmergentToolPackage(buildEmergentToolPackage(agentosTool(request, 'function execute(input) { return { slug: input.text } }')), 'yaml')
  await assert.rejects(forge.importAgentos(text, { tests: request.testCases }), (e) => e.code === 'EFORGE_REFUSED' && e.stage === 'test')
  await assert.rejects(forge.call('slugify_broken', { text: 'x' }), (e) => e.code === 'ENOTFOUND')
})

test('a package with redacted source is refused, saying so', async () => {
  const forge = await Forge.open({ store: stores[0].dir, judge: 'rules', agent: 'agent-1', session: 's1' })
  const request = { ...seed('slugify'), name: 'slugify_redacted' }
  // AgentOS's default (persistSandboxSource: false) keeps no source at rest.
  const manifest = buildEmergentToolPackage(agentosTool(request, ''))
  assert.equal(manifest.tool.implementation.redactedAtRest, true)
  const text = serializeEmergentToolPackage(manifest, 'yaml')
  await assert.rejects(forge.importAgentos(text, { tests: request.testCases }), (e) => {
    assert.equal(e.code, 'EFORGE_REFUSED')
    assert.equal(e.stage, 'import')
    assert.match(e.message, /sandbox source of "slugify_redacted" is redacted/)
    return true
  })
  // And a package without tests, given none, is refused too.
  const plain = serializeEmergentToolPackage(buildEmergentToolPackage(agentosTool({ ...request, name: 'slugify_untested' })), 'json')
  await assert.rejects(forge.importAgentos(plain), (e) => e.code === 'EFORGE_REFUSED' && /carries no test cases/.test(e.message))
})

test("a Temper export parses in AgentOS, runs in AgentOS's sandbox, and re-imports with its tests", async () => {
  const forge = await Forge.open({ store: stores[0].dir, judge: 'rules', agent: 'agent-1', session: 's2' })
  await forge.forge(seed('slugify'))
  const text = forge.exportAgentos('slugify')
  assert.equal(forge.exportAgentos('slugify'), text, 'the same tool exports the same bytes')
  const manifest = parseEmergentToolPackage(text)
  assert.equal(manifest.tool.name, 'slugify')
  assert.equal(manifest.portability.portable, true)
  const tool = materializeEmergentToolFromPackage(manifest, { createdBy: 'agent-9' })
  const run = await new SandboxedToolForge().execute({ code: tool.implementation.code, input: { text: 'Round Trip' }, allowlist: tool.implementation.allowlist, memoryMB: 128, timeoutMs: 2000 })
  assert.equal(run.success, true, run.error)
  assert.deepEqual(run.output, { slug: 'round-trip' })
  // Into another store, with the tests the package carries.
  const other = await Forge.open({ store: stores[1].dir, judge: 'rules', agent: 'agent-2', session: 's1' })
  const imported = await other.importAgentos(text)
  assert.equal(imported.success, true)
  assert.equal(imported.testResults.length, seed('slugify').testCases.length)
  assert.deepEqual(await other.call('slugify', { text: 'Elsewhere Too' }), { slug: 'elsewhere-too' })
})
