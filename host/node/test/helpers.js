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
