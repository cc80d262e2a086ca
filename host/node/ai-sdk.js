// temper-forge/ai-sdk: a Temper forge as Vercel AI SDK tools.
//
//   const tools = await aiSdkTools(forge)
//   await generateText({ model, tools, prepareStep: tools.refresh, stopWhen: stepCountIs(5) })
//
// `tools` is a live tool set of `dynamicTool`s: `forge_tool` (forge a tool
// from the seed's request format), `run_code` (run a code-mode body once),
// `search_tools` (find the tools the caller can call) and one per tool of
// the session's working set (found, reused or forged in it; every other
// tool is found with `search_tools`). The AI SDK reads the set at every
// step, and the set is re-read from the forge at every step (`prepareStep:
// tools.refresh`) and right after a forge, so a tool forged in one step is
// callable in the next. A refused forge or a failed call is returned to
// the model as `{ success: false, code, error, ... }`, not thrown.
import { dynamicTool, jsonSchema } from 'ai'

/** The JSON Schema of `forge_tool`'s input: the seed's request format. */
export const FORGE_TOOL_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'snake_case tool name' },
    description: { type: 'string' },
    inputSchema: { type: 'object' },
    outputSchema: { type: 'object' },
    implementation: {
      type: 'object',
      description: "{ mode: 'sandbox', code: 'function execute(input) { ... }', allowlist: [] } or { mode: 'compose', steps: [...] }",
    },
    testCases: {
      type: 'array',
      items: { type: 'object', properties: { input: {}, expectedOutput: {} }, required: ['input'] },
    },
  },
  required: ['name', 'description', 'inputSchema', 'implementation', 'testCases'],
}

const SEARCH_TOOLS_SCHEMA = {
  type: 'object',
  properties: {
    query: { type: 'string', description: 'what the tool should do, in words' },
    limit: { type: 'integer', minimum: 1, maximum: 50, description: 'most results (default 5)' },
  },
  required: ['query'],
}

const RUN_CODE_SCHEMA = {
  type: 'object',
  properties: {
    code: { type: 'string', description: 'the body of an async function; `return` gives the result; `await tools.NAME(input)` calls a tool' },
    tools: { type: 'array', items: { type: 'string' } },
  },
  required: ['code'],
}

/** A failure as the model sees it. */
function failure (e) {
  const out = { success: false, code: e && e.code, error: String(e && e.message ? e.message : e) }
  for (const k of ['stage', 'capability', 'jsMessage', 'line', 'limitMs', 'at']) {
    if (e && e[k] != null) out[k] = e[k]
  }
  if (e && e.result && Array.isArray(e.result.errors)) out.errors = e.result.errors
  return out
}

/**
 * The forge's tools as an AI SDK tool set. `options.forgeTool`,
 * `options.runCode` and `options.searchTools` (default true) include the
 * built-in tools.
 */
export async function aiSdkTools (forge, options = {}) {
  const tools = {}
  const builtins = {}
  if (options.forgeTool !== false) {
    builtins.forge_tool = dynamicTool({
      description: 'Forge a new tool from JavaScript (function execute(input) {...}) with its schemas and test cases; it is tested, judged and, if approved, callable in the next step.',
      inputSchema: jsonSchema(FORGE_TOOL_SCHEMA),
      execute: async (request) => {
        try {
          const result = await forge.forge(request)
          await refresh()
          return result
        } catch (e) {
          return failure(e)
        }
      },
    })
  }
  if (options.runCode !== false) {
    builtins.run_code = dynamicTool({
      description: 'Run a JavaScript body once in a fresh sandbox; `await tools.NAME(input)` calls the tools.',
      inputSchema: jsonSchema(RUN_CODE_SCHEMA),
      execute: async ({ code, tools: names }, { abortSignal } = {}) => {
        try {
          return await forge.runCode(code, { tools: names, signal: abortSignal })
        } catch (e) {
          return failure(e)
        }
      },
    })
  }
  if (options.searchTools !== false) {
    builtins.search_tools = dynamicTool({
      description: 'Find tools you can call by what they do, before forging one; the tools found are callable in the next step.',
      inputSchema: jsonSchema(SEARCH_TOOLS_SCHEMA),
      execute: async ({ query, limit }) => {
        try {
          const found = await forge.search(query, { limit })
          await refresh()
          return { tools: found }
        } catch (e) {
          return failure(e)
        }
      },
    })
  }
  const made = new Map()
  const toolFor = (info) => dynamicTool({
    description: info.description,
    inputSchema: jsonSchema(info.inputSchema && Object.keys(info.inputSchema).length ? info.inputSchema : { type: 'object' }),
    execute: async (input, { abortSignal } = {}) => {
      try {
        return await forge.call(info.name, input, { signal: abortSignal })
      } catch (e) {
        return failure(e)
      }
    },
  })
  /**
   * Re-reads the forge's working set into the set (usable as
   * `prepareStep`).
   */
  async function refresh () {
    const working = new Set(await forge.workingSet())
    const list = (await forge.tools()).filter((info) => working.has(info.name))
    const names = new Set()
    for (const info of list) {
      if (info.name in builtins) continue
      names.add(info.name)
      const key = `${info.name}\0${info.id ?? info.tier}`
      if (!made.has(info.name) || made.get(info.name).key !== key) {
        made.set(info.name, { key, tool: toolFor(info) })
      }
      tools[info.name] = made.get(info.name).tool
    }
    for (const name of Object.keys(tools)) {
      if (!(name in builtins) && !names.has(name)) {
        delete tools[name]
        made.delete(name)
      }
    }
    Object.assign(tools, builtins)
    return undefined
  }
  Object.defineProperty(tools, 'refresh', { value: refresh, enumerable: false })
  await refresh()
  return tools
}
