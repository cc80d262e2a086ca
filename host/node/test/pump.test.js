// The call pump (src/pump.rs, index.cjs): `forge.call` and
// `runtime.execute` answer through it with the event loop left free; the
// process stays alive while a call is pending and exits once none is, with
// the spin and without it; concurrent calls and calls from a worker thread
// get their own answers.
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { Forge, Runtime } from 'temper-forge'
import { heartbeat, root, seed, tempDir } from './helpers.js'

const store = tempDir()
test.after(() => store.remove())

let forge
test.before(async () => {
  forge = await Forge.open({ store: store.dir, judge: 'rules', agent: 'pump', session: 's1' })
  assert.equal((await forge.forge(seed('slugify'))).success, true)
})

const entry = pathToFileURL(join(root, 'host', 'node', 'index.js')).href
// A guest that runs for a while (well past the spin): the answer comes
// while the JS side sleeps.
const slow = 'function execute(input) { let x = 0; for (let i = 0; i < input.n; i++) x = (x + i) % 1000003; return { x } }'

/** Runs `f(0..n)` with `width` calls in flight at all times. */
async function pool (n, width, f) {
  let next = 0
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await f(next++)
  }))
}

test('timers keep firing through thousands of back-to-back calls', async () => {
  const runtime = Runtime.create()
  const code = seed('slugify').implementation.code
  // One call after another, and four in flight at all times (so that
  // some call is always pending while the JS side polls for answers).
  const beat = await heartbeat(async () => {
    for (let i = 0; i < 1000; i++) {
      assert.deepEqual(await forge.call('slugify', { text: `A ${i}` }), { slug: `a-${i}` })
      assert.deepEqual(await runtime.execute(code, { text: `B ${i}` }, []), { slug: `b-${i}` })
    }
    await pool(4000, 4, async (i) => {
      assert.deepEqual(await forge.call('slugify', { text: `C ${i}` }), { slug: `c-${i}` })
      assert.deepEqual(await runtime.execute(code, { text: `D ${i}` }, []), { slug: `d-${i}` })
    })
  })
  // Polling for answers from microtasks instead of the event loop would
  // starve the timers: one gap as long as the calls.
  assert.ok(beat.maxGap < 150, `the event loop stalled for ${beat.maxGap} ms in ${beat.elapsed} ms of calls`)
  assert.ok(beat.ticks >= beat.elapsed / 20, `${beat.ticks} ticks of a 2 ms timer in ${beat.elapsed} ms`)
})

test('the event loop runs while a guest spins in execute, and an AbortSignal stops it', async () => {
  const runtime = Runtime.create({ timeoutMs: 1500 })
  let out
  const beat = await heartbeat(async () => {
    out = await runtime.execute('function execute() { for (;;) {} }', {}, [], { signal: AbortSignal.timeout(300) }).catch((e) => e)
  })
  assert.equal(out.name, 'TimeoutError')
  assert.ok(beat.elapsed < 1200, `aborted after ${beat.elapsed} ms, not at the 1500 ms limit`)
  assert.ok(beat.ticks >= 20, `only ${beat.ticks} timer ticks while the guest ran`)
  assert.ok(beat.maxGap < 150, `the event loop stalled for ${beat.maxGap} ms while the guest ran`)
  // The executor serves the next call.
  assert.deepEqual(await runtime.execute('function execute(i) { return i }', { ok: 1 }, []), { ok: 1 })
})

test('concurrent calls each get their own answer, slow ones beside fast ones', async () => {
  const runtime = Runtime.create()
  const fast = Array.from({ length: 40 }, (_, i) => forge.call('slugify', { text: `Item ${i}` }))
  const slowOnes = Array.from({ length: 4 }, (_, i) => runtime.execute(slow, { n: 200000 + i }, []))
  const outs = await Promise.all(fast)
  assert.deepEqual(outs.map((o) => o.slug), Array.from({ length: 40 }, (_, i) => `item-${i}`))
  const xs = (await Promise.all(slowOnes)).map((o) => o.x)
  assert.equal(new Set(xs).size, 4)
})

for (const spin of ['0', '200']) {
  test(`a script whose only work is a pending call stays alive until it answers, then exits (TEMPER_NODE_SPIN_US=${spin})`, () => {
    const script = `
      import { Runtime } from ${JSON.stringify(entry)}
      const runtime = Runtime.create()
      const out = await runtime.execute(${JSON.stringify(slow)}, { n: 3000000 }, [])
      const again = await runtime.execute('function execute(i) { return i }', { n: 1 }, [])
      console.log(JSON.stringify([out, again]))
    `
    const started = Date.now()
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60000,
      env: { ...process.env, TEMPER_NODE_SPIN_US: spin },
    })
    assert.equal(child.signal, null, `killed after ${Date.now() - started} ms: the process did not exit`)
    assert.equal(child.status, 0, child.stderr)
    const [out, again] = JSON.parse(child.stdout)
    assert.equal(typeof out.x, 'number')
    assert.deepEqual(again, { n: 1 })
  })
}

test('a worker thread calls through its own channel beside the main thread', async () => {
  const code = seed('slugify').implementation.code
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads')
    import(workerData.entry).then(async ({ Runtime }) => {
      const runtime = Runtime.create()
      const outs = []
      for (let i = 0; i < 200; i++) outs.push((await runtime.execute(workerData.code, { text: 'W ' + i }, [])).slug)
      parentPort.postMessage(outs)
    }).catch((e) => parentPort.postMessage(String(e)))
  `, { eval: true, workerData: { entry, code } })
  const fromWorker = new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  const runtime = Runtime.create()
  const mine = []
  for (let i = 0; i < 200; i++) mine.push((await runtime.execute(code, { text: `M ${i}` }, [])).slug)
  const theirs = await fromWorker
  await worker.terminate()
  assert.deepEqual(mine, Array.from({ length: 200 }, (_, i) => `m-${i}`))
  assert.deepEqual(theirs, Array.from({ length: 200 }, (_, i) => `w-${i}`))
})

test('aborting a call in one thread does not cancel a call of another thread', async () => {
  // Each environment numbers its calls from 1: the ids must not meet in
  // the addon's process-wide cancellation table.
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads')
    import(workerData.entry).then(async ({ Runtime }) => {
      const runtime = Runtime.create({ timeoutMs: 5000 })
      const controller = new AbortController()
      parentPort.postMessage('started')
      const out = await runtime.execute(workerData.slow, { n: 3000000 }, [], { signal: controller.signal })
        .then((o) => 'done ' + typeof o.x, (e) => 'failed ' + e.name)
      parentPort.postMessage(out)
    }).catch((e) => parentPort.postMessage(String(e)))
  `, { eval: true, workerData: { entry, slow } })
  const messages = []
  const finished = new Promise((resolve, reject) => {
    worker.on('message', (m) => { messages.push(m); if (m !== 'started') resolve(m) })
    worker.once('error', reject)
  })
  while (!messages.includes('started')) await new Promise((resolve) => setTimeout(resolve, 5))
  // The main thread's first abortable call, aborted while the worker's runs.
  const runtime = Runtime.create({ timeoutMs: 5000 })
  const mine = await runtime.execute('function execute() { for (;;) {} }', {}, [], { signal: AbortSignal.timeout(50) }).catch((e) => e)
  assert.equal(mine.name, 'TimeoutError')
  assert.equal(await finished, 'done number')
  await worker.terminate()
})
