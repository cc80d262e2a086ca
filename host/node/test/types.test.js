// The README's TypeScript example type-checks against the package's
// generated index.d.ts (TypeScript from the pinned devDependencies).
import test from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))

test('examples/quickstart.ts type-checks against index.d.ts', () => {
  const require = createRequire(import.meta.url)
  const tsc = join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc')
  let out = ''
  try {
    out = execFileSync(process.execPath, [tsc, '-p', join(here, '..', 'examples', 'tsconfig.json')], { encoding: 'utf8' })
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`)
  }
  assert.equal(out.trim(), '')
})

test('a misuse of the API does not type-check', () => {
  const require = createRequire(import.meta.url)
  const tsc = join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc')
  // call() takes a string name: a number is a type error.
  let failed = null
  try {
    execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', '--types', 'node', join(here, 'fixtures', 'misuse.ts')], { encoding: 'utf8', stdio: 'pipe' })
  } catch (e) {
    failed = `${e.stdout}${e.stderr}`
  }
  assert.ok(failed, 'tsc accepted a number as a tool name')
  assert.match(failed, /misuse\.ts\(4,18\): error TS2345: Argument of type 'number' is not assignable to parameter of type 'string'/)
})
