// The Vercel AI SDK's generateText loop, with the SDK's own mock model
// (ai/test): step 1 forges a tool through `forge_tool`, step 2 calls it
// (re-read from the forge between the steps), step 3 answers.
import test from 'node:test'
import assert from 'node:assert/strict'
import { generateText, stepCountIs } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'
import { Forge } from 'temper-forge'
import { aiSdkTools } from 'temper-forge/ai-sdk'
import { seed, tempDir } from './helpers.js'

const store = tempDir()
test.after(() => store.remove())

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
}
const toolCall = (id, toolName, input) => ({
  content: [{ type: 'tool-call', toolCallId: id, toolName, input: JSON.stringify(input) }],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage,
  warnings: [],
})

test('a generateText loop forges a tool, then calls it in the next step', async () => {
  const forge = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-1', session: 's1' })
  const tools = await aiSdkTools(forge)
  assert.deepEqual(Object.keys(tools).sort(), ['forge_tool', 'run_code', 'search_tools'])
  const offered = []
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      offered.push((options.tools ?? []).map((t) => t.name).sort())
      switch (offered.length) {
        case 1: return toolCall('call-1', 'forge_tool', seed('slugify'))
        case 2: return toolCall('call-2', 'slugify', { text: 'Forged In Step One' })
        default: return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      }
    },
  })
  const result = await generateText({ model, tools, prepareStep: tools.refresh, prompt: 'make a slug', stopWhen: stepCountIs(5) })
  assert.equal(result.text, 'done')
  assert.equal(result.steps.length, 3)
  // The tool did not exist in step 1 and was offered in step 2.
  assert.deepEqual(offered[0], ['forge_tool', 'run_code', 'search_tools'])
  assert.deepEqual(offered[1], ['forge_tool', 'run_code', 'search_tools', 'slugify'])
  const forged = result.steps[0].toolResults[0]
  assert.equal(forged.toolName, 'forge_tool')
  assert.equal(forged.output.success, true)
  const called = result.steps[1].toolResults[0]
  assert.equal(called.toolName, 'slugify')
  assert.deepEqual(called.output, { slug: 'forged-in-step-one' })
})

test('a refused forge and a failing call come back to the model as results', async () => {
  const forge = await Forge.open({ store: store.dir, judge: 'rules', agent: 'agent-1', session: 's2', timeoutMs: 1000 })
  const tools = await aiSdkTools(forge)
  const bad = { ...seed('slugify'), name: 'bad slug' }
  const refused = await tools.forge_tool.execute(bad, { toolCallId: 'x', messages: [] })
  assert.equal(refused.success, false)
  assert.equal(refused.code, 'EFORGE_REFUSED')
  assert.equal(refused.stage, 'validate')
  const run = await tools.run_code.execute({ code: 'for (;;) {}' }, { toolCallId: 'y', messages: [] })
  assert.equal(run.success, false)
  assert.equal(run.code, 'ETIMEOUT')
})
