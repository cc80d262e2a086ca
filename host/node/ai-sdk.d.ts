import type { ToolSet } from 'ai'
import type { Forge } from './index.js'

/** The JSON Schema of `forge_tool`'s input (the seed's request format). */
export declare const FORGE_TOOL_SCHEMA: Record<string, unknown>

/** A live AI SDK tool set: `forge_tool`, `run_code`, `search_tools` and one
 * `dynamicTool` per tool of the session's working set (the tools found,
 * reused or forged in it). `refresh` re-reads the working set (pass it as
 * `prepareStep` to re-read it at every step). */
export type TemperToolSet = ToolSet & { readonly refresh: () => Promise<undefined> }

export declare function aiSdkTools (
  forge: Forge,
  options?: { forgeTool?: boolean, runCode?: boolean, searchTools?: boolean },
): Promise<TemperToolSet>
