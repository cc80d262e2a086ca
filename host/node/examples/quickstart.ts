// The README's example, type-checked against the generated index.d.ts by
// test/types.test.js (`tsc --noEmit`).
import { Forge, TemperError } from 'temper-forge'
import { readFileSync } from 'node:fs'

const forge = await Forge.open({ store: process.argv[2] ?? '/tmp/temper-store', judge: 'rules', agent: 'agent-1', session: 's1' })
await forge.forge(JSON.parse(readFileSync('tests/fixtures/seeds/slugify.json', 'utf8')))
const out = await forge.call('slugify', { text: 'Hi there' }, { signal: AbortSignal.timeout(1000) })
try { await forge.call('slugify', { text: 42 }) } catch (e) { if (e instanceof TemperError) console.log(e.code, e.at) }
console.log(out, (await forge.tools()).map((t) => t.name))
