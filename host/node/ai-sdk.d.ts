import type { ToolSet } from 'ai'
import type { Forge } from './index.js'

/** The JSON Schema of `forge_tool`'s input (the seed's request format). */
export declare const FORGE_TOOL_SCHEMA: Record<string, unknown>

/** A live AI SDK tool set: `forge_tool`, `run_code` and one `dynamicTool`
 * per tool the forge's caller can call. `refresh` re-reads the forge's
 * tools (pass it as `prepareStep` to re-read them at every step). */
export type TemperToolSet = ToolSet & { readonly refresh: () => Promise<undefined> }

export declare function aiSdkTools (
  forge: Forge,
  options?: { forgeTool?: boolean, runCode?: boolean },
): Promise<TemperToolSet>
