// Shared by the tests: the seed requests and fresh stores.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

/** The seed request `name` (tests/fixtures/seeds/NAME.json), parsed. */
export function seed (name) {
  return JSON.parse(readFileSync(join(root, 'tests', 'fixtures', 'seeds', `${name}.json`), 'utf8'))
}

/** A fresh directory, removed by the returned function. */
export function tempDir (prefix = 'temper-node-') {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Counts the ticks of a timer every `everyMs` and its longest gap while
 * `f` runs (a blocked event loop shows one gap as long as the block). */
export async function heartbeat (f, everyMs = 2) {
  let ticks = 0
  let last = performance.now()
  let maxGap = 0
  const timer = setInterval(() => {
    const now = performance.now()
    maxGap = Math.max(maxGap, now - last)
    last = now
    ticks++
  }, everyMs)
  const started = performance.now()
  try {
    await f()
  } finally {
    clearInterval(timer)
  }
  return { ticks, maxGap, elapsed: performance.now() - started }
}
