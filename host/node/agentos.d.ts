import type { Runtime } from './index.js'

/** AgentOS's `SandboxedToolForgeConfig`, plus Temper's options. */
export interface TemperSandboxForgeConfig {
  /** Linear memory per call, MiB (default 128; enforced). */
  memoryMB?: number
  /** Wall clock per call, ms (default 5000; holds inside promise chains). */
  timeoutMs?: number
  /** Temper domain rules; an empty list allows no host (AgentOS: every host). */
  fetchDomainAllowlist?: string[]
  /** Directories `fs.readFile` may read, at their absolute paths (default: none). */
  fsReadRoots?: string[]
  /** Allow names that resolve to loopback or private addresses (default false). */
  allowPrivateNetwork?: boolean
  /** Built tools kept in the cache (default 256). */
  cacheEntries?: number
}

/** AgentOS's `SandboxExecutionRequest`. */
export interface SandboxExecutionRequest {
  code: string
  input: unknown
  allowlist: Array<'fetch' | 'fs.readFile' | 'crypto'>
  memoryMB: number
  timeoutMs: number
}

/** AgentOS's `SandboxExecutionResult`, plus Temper's error code. */
export interface SandboxExecutionResult {
  success: boolean
  output?: unknown
  error?: string
  errorCode?: string
  executionTimeMs: number
  memoryUsedBytes: number
}

/** The Temper host policy for AgentOS-style settings. */
export declare function policyFor (config?: TemperSandboxForgeConfig): Record<string, unknown>

/** A drop-in for AgentOS's `SandboxedToolForge` on Temper's runtime. */
export declare class TemperSandboxForge {
  constructor (config?: TemperSandboxForgeConfig)
  readonly runtime: Runtime
  readonly memoryMB: number
  readonly timeoutMs: number
  validateCode (code: string, allowlist?: string[]): { valid: boolean, violations: string[] }
  execute (request: SandboxExecutionRequest): Promise<SandboxExecutionResult>
  cacheStats (): { entries: number, capacity: number, hits: number, builds: number }
}
