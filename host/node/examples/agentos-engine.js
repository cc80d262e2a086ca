// AgentOS's own EmergentCapabilityEngine with Temper as its sandbox: the
// engine forges the seed's slugify (its tests run on Temper), then the
// forged tool is called. The judge is AgentOS's, with a scripted model
// standing in for the LLM. `node examples/agentos-engine.js`
import {
  ComposableToolBuilder,
  DEFAULT_EMERGENT_CONFIG,
  EmergentCapabilityEngine,
  EmergentJudge,
  EmergentToolRegistry,
} from '@framers/agentos'
import { TemperSandboxForge } from 'temper-forge/agentos'

const config = { ...DEFAULT_EMERGENT_CONFIG, enabled: true, allowSandboxTools: true }
const engine = new EmergentCapabilityEngine({
  config,
  composableBuilder: new ComposableToolBuilder(async () => ({ success: false, error: 'no tools' })),
  // The one line that changes: Temper instead of node:vm.
  sandboxForge: new TemperSandboxForge({ memoryMB: 128, timeoutMs: 5000 }),
  judge: new EmergentJudge({
    judgeModel: 'scripted',
    promotionModel: 'scripted',
    // A real deployment passes its LLM call here; this one approves when
    // every test ran (the JSON the judge parses).
    generateText: async (model, prompt) => JSON.stringify({
      safety: { passed: true }, correctness: { passed: !/success=false/.test(prompt) },
      determinism: { likely: true }, bounded: { likely: true }, confidence: 0.9, reasoning: 'scripted',
    }),
  }),
  registry: new EmergentToolRegistry(config),
})

const forged = await engine.forge({
  name: 'slugify',
  description: 'Convert a string to a URL-friendly slug',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  outputSchema: { type: 'object', properties: { slug: { type: 'string' } } },
  implementation: {
    mode: 'sandbox',
    allowlist: [],
    code: "function execute(input) { return { slug: input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') }; }",
  },
  testCases: [{ input: { text: 'Hello World!' }, expectedOutput: { slug: 'hello-world' } }],
}, { agentId: 'agent-1', sessionId: 's1' })
console.log('forged:', forged.success, forged.toolId)
const tool = engine.createExecutableTool(forged.tool)
console.log(await tool.execute({ text: 'AgentOS on Temper' }, {}))
