// temper-forge/agentos: `TemperSandboxForge`, a drop-in for AgentOS
// 0.9.164's `SandboxedToolForge` (`execute({code, input, allowlist,
// memoryMB, timeoutMs})` -> `SandboxExecutionResult`, `validateCode(code,
// allowlist)`) that runs the code on Temper's runtime: each call in a fresh
// WebAssembly instance with a memory cap, a timeout that holds inside
// promise chains, no host objects, and capabilities that are denied unless
// granted. Hand it to AgentOS's engine:
//
//   new EmergentCapabilityEngine({ ..., sandboxForge: new TemperSandboxForge() })
//
// AgentOS's settings map onto Temper's host policy, deny by default:
// - `fetchDomainAllowlist`: each entry is a Temper domain rule (an exact
//   host, `*.example.com`, `host:port`, an IP). An empty list allows NO
//   host (AgentOS: every host); a rule without a port allows only the
//   scheme's default port (AgentOS: any port); names resolving to
//   loopback/private addresses are refused unless `allowPrivateNetwork`
//   (AgentOS: no such check); every redirect hop is checked (AgentOS: only
//   the first URL).
// - `fsReadRoots`: each directory (resolved from the working directory) is
//   readable by `fs.readFile` at the same absolute path. Default: none
//   (AgentOS: the working directory). A symlink out of a root is not
//   followed (AgentOS checks the path's text, then follows it).
// - `memoryMB`, `timeoutMs`: the runtime's caps (default 128 MiB, 5000 ms);
//   a request may shorten the timeout, not raise it, and its `memoryMB` is
//   reported, not applied (the constructor's cap holds).
import { resolve } from 'node:path'
import { Runtime, TemperError } from './index.js'

const DEFAULT_MEMORY_MB = 128
const DEFAULT_TIMEOUT_MS = 5000

/** The Temper host policy for AgentOS-style settings. */
export function policyFor (config = {}) {
  const domains = (config.fetchDomainAllowlist ?? []).map((d) => String(d).toLowerCase())
  const roots = (config.fsReadRoots ?? []).map((root) => resolve(root))
  const policy = { allow: ['fetch', 'fs.readFile', 'crypto'] }
  policy.fetch = { domains, allow_private: config.allowPrivateNetwork === true }
  if (roots.length > 0) {
    policy.read = roots.map((root) => ({ host: root, guest: root }))
  }
  return policy
}

export class TemperSandboxForge {
  /**
   * @param {object} [config] AgentOS's `SandboxedToolForgeConfig`
   *   (`memoryMB`, `timeoutMs`, `fetchDomainAllowlist`, `fsReadRoots`), plus
   *   `allowPrivateNetwork` (default false) and `cacheEntries` (built tools
   *   kept, default 256).
   */
  constructor (config = {}) {
    this.memoryMB = config.memoryMB ?? DEFAULT_MEMORY_MB
    this.timeoutMs = config.timeoutMs ?? DEFAULT_TIMEOUT_MS
    this.runtime = Runtime.create({
      policy: policyFor(config),
      memoryMb: this.memoryMB,
      timeoutMs: this.timeoutMs,
      cacheEntries: config.cacheEntries ?? 256,
    })
  }

  /**
   * AgentOS's static check, with Temper's: the one the forge runs (eval,
   * Function, require, import, process and the other blocked APIs), so
   * AgentOS's engine refuses such code at validation, as it does with its
   * own sandbox, with one violation per blocked use in Temper's words
   * (`blocked API \`eval\` at 1:30 (arbitrary code execution)`). Also
   * reported: an allowlist naming an API AgentOS does not know, and empty
   * code. Syntax is checked when the code is built (`runtime.validate`
   * checks both, asynchronously).
   * @returns {{ valid: boolean, violations: string[] }}
   */
  validateCode (code, allowlist = []) {
    const known = new Set(['fetch', 'fs.readFile', 'crypto'])
    const violations = allowlist.filter((a) => !known.has(a)).map((a) => `unknown API in the allowlist: ${a}`)
    if (typeof code !== 'string' || code.trim() === '') {
      violations.push('code is empty')
    } else {
      violations.push(...this.runtime.staticCheck(code))
    }
    return { valid: violations.length === 0, violations }
  }

  /**
   * Runs `code` (defining `execute(input)` or `run(input)`) with `input` in a
   * fresh sandbox. Never throws: failures are `{ success: false, error }`,
   * with `errorCode` (Temper's `code`) added.
   * @returns {Promise<{success: boolean, output?: unknown, error?: string, errorCode?: string, executionTimeMs: number, memoryUsedBytes: number}>}
   */
  async execute (request) {
    const started = performance.now()
    const timeoutMs = request.timeoutMs ?? this.timeoutMs
    try {
      const output = await this.runtime.execute(request.code, request.input ?? null, request.allowlist ?? [], { timeoutMs })
      return { success: true, output, executionTimeMs: Math.round(performance.now() - started), memoryUsedBytes: 0 }
    } catch (e) {
      const error = e instanceof TemperError ? `${e.code}: ${e.message}` : String(e && e.message ? e.message : e)
      return {
        success: false,
        error,
        errorCode: e && e.code,
        executionTimeMs: Math.round(performance.now() - started),
        memoryUsedBytes: 0,
      }
    }
  }

  /** The build cache's counters (`entries`, `capacity`, `hits`, `builds`). */
  cacheStats () {
    return this.runtime.cacheStats()
  }
}
