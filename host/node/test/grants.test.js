// A grant narrows at every depth, through the Node package: a forge opened
// with `allowTools` reaches a hub tool outside it through no tool (a code
// tool calling it, a code tool calling that one, a compose tool whose step
// is a compose tool with it as a step, `runCode` calling any of them). The
// upstream (tests/fixtures/hub/recording_upstream.py) records every call:
// the narrowed forge's never reach it, the unnarrowed one's do.
import test from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Forge, TemperError } from 'temper-forge'
import { root, tempDir } from './helpers.js'

const REFUSED = '"nice.admin" is not callable by this caller (outside its grant: context\'s tools narrowing)'
const FORGED = ['admin_call', 'admin_wrap', 'admin_step', 'admin_nest']

const marker = { type: 'object', properties: { marker: { type: 'string' } }, required: ['marker'] }

function codeTool (name, code, grant) {
  return {
    name,
    description: 'Runs the administrative action through a tool call.',
    inputSchema: marker,
    outputSchema: { type: 'object' },
    implementation: { mode: 'sandbox', code, allowlist: [`tool:${grant}`] },
    testCases: [{ input: { marker: 'forge-test' } }]
  }
}

function composeTool (name, step) {
  return {
    name,
    description: 'Runs the administrative action as a pipeline step.',
    inputSchema: marker,
    implementation: { mode: 'compose', steps: [{ name: 'act', tool: step, inputMapping: { marker: '$input.marker' } }] },
    testCases: [{ input: { marker: 'forge-test' } }]
  }
}

test('allowTools narrows the hub tools at every depth', async () => {
  const dir = tempDir()
  try {
    const log = join(dir.dir, 'upstream.log')
    const tools = join(dir.dir, 'tools.toml')
    const command = JSON.stringify(['python3', join(root, 'tests', 'fixtures', 'hub', 'recording_upstream.py'), log])
    // The forges' tests call nice.admin for real (allow_live_tests): what is
    // checked here is the calls made after the narrowing.
    writeFileSync(tools, `[upstream.nice]\ncommand = ${command}\ntools = ["*"]\nprefix = "nice."\nallow_live_tests = true\n`)
    const policy = { tools: { allow: ['nice.*'] } }
    const markers = () => existsSync(log)
      ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((c) => c.tool === 'admin').map((c) => c.arguments.marker)
      : []
    const common = { store: join(dir.dir, 'store'), judge: 'rules', agent: 'alice', session: 's1', policy, tools }
    const owner = await Forge.open(common)
    for (const request of [
      codeTool('admin_call', 'async function execute(input) { return await callTool("nice.admin", { marker: input.marker }); }', 'nice.admin'),
      codeTool('admin_wrap', 'async function execute(input) { return await tools.admin_call({ marker: input.marker }); }', 'admin_call'),
      composeTool('admin_step', 'nice.admin'),
      composeTool('admin_nest', 'admin_step')
    ]) {
      assert.equal((await owner.forge(request)).success, true, request.name)
    }

    const narrowed = await Forge.open({ ...common, allowTools: ['nice.echo'] })
    const names = (await narrowed.tools()).map((t) => t.name)
    for (const name of [...FORGED, 'nice.echo']) assert.ok(names.includes(name), name)
    assert.ok(!names.includes('nice.admin'))
    for (const tool of FORGED) {
      await assert.rejects(narrowed.call(tool, { marker: `narrow-direct-${tool}` }), (e) => {
        assert.ok(e instanceof TemperError)
        assert.ok(e.message.includes(REFUSED), e.message)
        return true
      })
      await assert.rejects(narrowed.runCode(`return await tools.${tool}({ marker: 'narrow-run-${tool}' })`), (e) => {
        assert.ok(e.message.includes(REFUSED), e.message)
        return true
      })
    }
    // A hidden hub tool is not found, as one that does not exist.
    await assert.rejects(narrowed.call('nice.admin', { marker: 'narrow-hidden' }), (e) => e.code === 'ENOTFOUND')
    await assert.rejects(narrowed.call('nice.nothing', { marker: 'narrow-missing' }), (e) => e.code === 'ENOTFOUND')
    assert.deepEqual(await narrowed.runCode("return await tools['nice.echo']({ text: 'hi' })"), { text: 'hi' })
    assert.deepEqual(markers().filter((m) => m.startsWith('narrow-')), [])

    // The positive control: the unnarrowed forge reaches it, at every depth.
    for (const tool of FORGED) await owner.call(tool, { marker: `full-${tool}` })
    assert.deepEqual(markers().filter((m) => m.startsWith('full-')).sort(), FORGED.map((t) => `full-${t}`).sort())
  } finally {
    dir.remove()
  }
})
