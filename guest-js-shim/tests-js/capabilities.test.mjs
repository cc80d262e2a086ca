// Tests for guest-js-shim/src/capabilities.js: loads prelude.js + capabilities.js
// into a bare node:vm context (string code generation disabled, like the Temper
// runtime) with a FAKE `__temper_host` (Node crypto for digests, a table of fake
// files, a table of fake HTTP routes) that checks the host contract strictly.
// Run: node --test guest-js-shim/tests-js/
import test from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';
import nodeFs from 'node:fs';
import nodeCrypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const src = (f) => nodeFs.readFileSync(fileURLToPath(new URL(`../src/${f}`, import.meta.url)), 'utf8');
const PRELUDE = src('prelude.js');
const CAPS = src('capabilities.js');

// ------------------------------------------------------------------ fake host
const tagOf = (v) => Object.prototype.toString.call(v).slice(8, -1);
const toAB = (buf) => { const u = new Uint8Array(buf.length); u.set(buf); return u.buffer; };
const bufOf = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
const ALGS = ['sha1', 'sha256', 'sha384', 'sha512', 'md5'];
const FILES = new Map([
  ['/data/hello.txt', Buffer.from('héllo wörld\n')],
  ['/data/bin', Buffer.from([0, 1, 2, 0x7f, 0x80, 0xfe, 0xff])],
  ['/data/bom.txt', Buffer.from('\uFEFFbom')],
  ['/data/obj.json', Buffer.from('{"a":[1,2,{"b":"ü"}]}')],
]);
const DIRS = new Set(['/data', '/data/sub']);

function makeHost() {
  const grants = { fetch: true, crypto: true, fs: true };
  const calls = { fetch: [], randomBytes: [], hash: [] };
  const bytesArg = (v, what) => {
    if (tagOf(v) !== 'Uint8Array' && tagOf(v) !== 'ArrayBuffer') throw new TypeError(`${what} must be a Uint8Array or ArrayBuffer`);
    return Buffer.from(tagOf(v) === 'ArrayBuffer' ? new Uint8Array(v) : bufOf(v));
  };
  const reply = (status, statusText, url, headers, body, redirected = false) =>
    ({ status, statusText, url, redirected, headers, body: toAB(Buffer.from(body)) });
  const ROUTES = {
    '/echo': (r) => reply(200, 'OK', r.url, [['content-type', 'application/json'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2'], ['x-multi', 'one']],
      JSON.stringify({ method: r.method, headers: r.headers, body: r.body === undefined ? null : r.body.toString('base64'), redirect: r.redirect })),
    '/bytes': (r) => reply(200, 'OK', r.url, [['content-type', 'application/octet-stream']], [0, 1, 2, 255]),
    '/text': (r) => reply(200, 'OK', r.url, [['content-type', 'text/plain; charset=utf-8']], '\uFEFFhi ✓'),
    '/nocontent': (r) => reply(204, 'No Content', r.url, [], ''),
    '/missing': (r) => reply(404, 'Not Found', r.url, [['content-type', 'text/plain']], 'nope'),
    '/redirect': (r) => {
      if (r.redirect === 'error') throw new TypeError('redirect not allowed (redirect: error): https://api.example.test/redirect');
      if (r.redirect === 'manual') return reply(302, 'Found', r.url, [['location', '/final']], '');
      return reply(200, 'OK', 'https://api.example.test/final', [['content-type', 'text/plain']], 'landed', true);
    },
  };
  const host = {
    fetch(method, url, headers, body, redirect) {
      if (!grants.fetch) throw new TypeError('capability not granted: fetch');
      if (typeof method !== 'string' || typeof url !== 'string') throw new TypeError('method and url must be strings');
      if (!Array.isArray(headers) || !headers.every((p) => Array.isArray(p) && p.length === 2 && p.every((x) => typeof x === 'string'))) {
        throw new TypeError('fetch: headers must be [name, value] pairs');
      }
      if (body !== undefined && tagOf(body) !== 'Uint8Array') throw new TypeError('body must be a Uint8Array');
      if (!['follow', 'error', 'manual'].includes(redirect)) throw new TypeError('bad redirect');
      const r = { method, url, headers: headers.map((p) => [...p]), body: body === undefined ? undefined : bufOf(body), redirect };
      calls.fetch.push(r);
      const u = new URL(url);
      if (u.hostname !== 'api.example.test') throw new TypeError(`host not allowed: ${u.hostname} (allowed: api.example.test)`);
      const route = ROUTES[u.pathname];
      const sent = { ...r, url: url.replace(/#[^]*$/, '') }; // like the host: the fragment is not sent
      const out = route ? route(sent) : reply(404, 'Not Found', sent.url, [], '');
      if (method === 'HEAD') out.body = new ArrayBuffer(0); // like HTTP: no body on HEAD
      return out;
    },
    hash(alg, data) {
      if (!grants.crypto) throw new TypeError('capability not granted: crypto');
      if (!ALGS.includes(alg)) throw new TypeError(`unsupported hash: ${alg}`);
      calls.hash.push(alg);
      return toAB(nodeCrypto.createHash(alg).update(bytesArg(data, 'data')).digest());
    },
    hmac(alg, key, data) {
      if (!grants.crypto) throw new TypeError('capability not granted: crypto');
      if (!ALGS.includes(alg)) throw new TypeError(`unsupported hash: ${alg}`);
      return toAB(nodeCrypto.createHmac(alg, bytesArg(key, 'key')).update(bytesArg(data, 'data')).digest());
    },
    randomBytes(n) {
      if (!grants.crypto) throw new TypeError('capability not granted: crypto');
      if (!Number.isInteger(n) || n < 0 || n > 65536) throw new TypeError('randomBytes: size must be an integer from 0 to 65536');
      calls.randomBytes.push(n);
      return toAB(nodeCrypto.randomBytes(n));
    },
    readFile(path) {
      if (!grants.fs) throw new TypeError('capability not granted: fs.readFile');
      if (typeof path !== 'string') throw new TypeError('path must be a string');
      if (path.startsWith('/outside')) throw Object.assign(new Error(`path outside the granted directories: ${path}`), { code: 'ERR_ACCESS_DENIED' });
      if (path.startsWith('/ungranted')) throw Object.assign(new Error('capability not granted: fs.readFile'), { code: 'ECAPABILITY' });
      if (path.startsWith('/secret')) throw new TypeError(`EACCES: permission denied, open '${path}'`);
      if (DIRS.has(path)) throw new TypeError(`EISDIR: illegal operation on a directory, read '${path}'`);
      if (!FILES.has(path)) throw new TypeError(`ENOENT: no such file or directory, open '${path}'`);
      return toAB(FILES.get(path));
    },
  };
  return { host, grants, calls };
}

function load({ withHost = true } = {}) {
  const ctx = vm.createContext({}, { codeGeneration: { strings: false, wasm: false } });
  const fake = makeHost();
  if (withHost) vm.runInContext('globalThis', ctx).__temper_host = fake.host;
  vm.runInContext(PRELUDE, ctx, { filename: 'prelude.js' });
  vm.runInContext(CAPS, ctx, { filename: 'capabilities.js' });
  const run = (code) => vm.runInContext(code, ctx);
  // Runs an async body in the context and returns its JSON result in this realm.
  const runAsync = async (body) => JSON.parse(await run(`(async () => JSON.stringify(await (async () => { ${body} })()))()`));
  return { ctx, run, runAsync, ...fake, G: run('globalThis') };
}

async function rejection(p) {
  try { await p; } catch (e) { return e; }
  assert.fail('expected the promise to reject');
}
const E = load();

// ------------------------------------------------------------------ loading
test('host object is captured and deleted; globals are non-enumerable, writable, configurable', () => {
  const { run, G, ctx } = E;
  assert.equal(run('typeof __temper_host'), 'undefined');
  assert.equal(Object.prototype.hasOwnProperty.call(G, '__temper_host'), false);
  assert.equal('__temper_host' in ctx, false);
  const desc = run(`n => { const d = Object.getOwnPropertyDescriptor(globalThis, n); return d && [typeof d.value, d.enumerable, d.writable, d.configurable].join(); }`);
  for (const n of ['fetch', 'Headers', 'Request', 'Response']) assert.equal(desc(n), 'function,false,true,true', n);
  for (const n of ['crypto', 'fs']) assert.equal(desc(n), 'object,false,true,true', n);
  assert.equal(run('Object.keys(globalThis).length'), 0);
});

test('script is strict, uses no eval/Function/with and loads with code generation disabled', () => {
  const code = CAPS.replace(/\/\/.*$/gm, '');
  assert.match(code, /^\s*\(function \(\) \{\s*'use strict';/);
  assert.doesNotMatch(code, /\beval\s*\(|\bnew\s+Function\b|\bFunction\s*\(|\bwith\s*\(|\bimport\b|\bexport\b/);
  assert.throws(() => E.run('eval("1")'), /Code generation from strings disallowed/);
});

test('fs exposes no write functions', () => {
  const names = E.run(`[...Object.keys(fs), ...Object.keys(fs.promises).map(k => 'promises.' + k)].sort()`);
  assert.deepEqual([...names], ['promises', 'promises.readFile', 'readFile', 'readFileSync']);
  for (const n of ['writeFile', 'writeFileSync', 'appendFile', 'appendFileSync', 'unlink', 'unlinkSync', 'mkdir', 'mkdirSync', 'rm', 'rmSync', 'createWriteStream']) {
    assert.equal(E.run(`typeof fs.${n}`), 'undefined', n);
  }
  assert.equal(E.run('typeof fs.promises.writeFile'), 'undefined');
});

test('without a host object every capability is denied', async () => {
  const { run } = load({ withHost: false });
  const e = await rejection(run('fetch("https://api.example.test/echo")'));
  assert.equal(e.name, 'TypeError');
  assert.equal(e.message, 'capability not granted: fetch');
  assert.throws(() => run('crypto.randomUUID()'), { name: 'TypeError', message: 'capability not granted: crypto' });
  assert.equal(run('(() => { try { fs.readFileSync("/data/x"); } catch (e) { return e.code + "|" + e.message; } })()'),
    'ECAPABILITY|capability not granted: fs.readFile');
});

// ------------------------------------------------------------------ fetch
test('fetch GET: response fields, case-insensitive headers, json(), settles in the microtask queue', async () => {
  const { runAsync, calls } = load();
  const r = await runAsync(`
    let state = 'pending';
    const p = fetch('https://api.example.test/echo?q=1#frag').then(res => { state = 'settled'; return res; });
    const sync = state;
    const res = await p;
    return { sync, state, status: res.status, ok: res.ok, statusText: res.statusText, url: res.url, type: res.type,
      redirected: res.redirected, ct: res.headers.get('Content-Type'), CT: res.headers.get('CONTENT-TYPE'),
      has: res.headers.has('X-Multi'), isHeaders: res.headers instanceof Headers, isResponse: res instanceof Response,
      used0: res.bodyUsed, json: await res.json(), used1: res.bodyUsed };`);
  assert.equal(r.sync, 'pending');
  assert.equal(r.state, 'settled');
  assert.equal(r.status, 200);
  assert.equal(r.ok, true);
  assert.equal(r.statusText, 'OK');
  assert.equal(r.url, 'https://api.example.test/echo?q=1');
  assert.equal(r.type, 'basic');
  assert.equal(r.redirected, false);
  assert.equal(r.ct, 'application/json');
  assert.equal(r.CT, 'application/json');
  assert.equal(r.has, true);
  assert.equal(r.isHeaders && r.isResponse, true);
  assert.deepEqual([r.used0, r.used1], [false, true]);
  assert.deepEqual(r.json, { method: 'GET', headers: [], body: null, redirect: 'follow' });
  assert.equal(calls.fetch[0].url, 'https://api.example.test/echo?q=1#frag', 'the host gets the URL as written (it drops the fragment)');
  assert.equal(calls.fetch[0].body, undefined);
});

test('fetch POST with every body type', async () => {
  const { runAsync, calls } = load();
  const r = await runAsync(`
    const post = async (body, headers) => (await (await fetch('https://api.example.test/echo', { method: 'post', body, headers })).json());
    const u8 = new Uint8Array([9, 1, 2, 3, 4, 9]);
    return [
      await post('héllo'),
      await post(new Uint8Array([1, 2, 255]).buffer),
      await post(u8.subarray(1, 5)),
      await post(new DataView(u8.buffer, 2, 2)),
      await post(new Uint16Array([0x0201])),
      await post(new URLSearchParams({ a: '1 2', b: 'é&' })),
      await post({ a: 1 }),
      await post(JSON.stringify({ a: 1 }), { 'Content-Type': 'application/json' }),
      await post('x', [['X-Custom', ' v1 '], ['x-custom', 'v2']]),
      await post('y', new Headers({ Accept: 'text/plain' })),
    ];`);
  const b64 = (s) => Buffer.from(s).toString('base64');
  const ct = (x) => (x.headers.find((p) => p[0] === 'content-type') || [])[1];
  assert.equal(r[0].method, 'POST');
  assert.equal(r[0].body, b64('héllo'));
  assert.equal(ct(r[0]), 'text/plain;charset=UTF-8');
  assert.equal(r[1].body, Buffer.from([1, 2, 255]).toString('base64'));
  assert.equal(ct(r[1]), undefined, 'buffers get no content-type');
  assert.equal(r[2].body, Buffer.from([1, 2, 3, 4]).toString('base64'), 'only the view bytes are sent');
  assert.equal(r[3].body, Buffer.from([2, 3]).toString('base64'));
  assert.equal(r[4].body, Buffer.from([1, 2]).toString('base64'));
  assert.equal(Buffer.from(r[5].body, 'base64').toString(), 'a=1+2&b=%C3%A9%26');
  assert.equal(ct(r[5]), 'application/x-www-form-urlencoded;charset=UTF-8');
  assert.equal(Buffer.from(r[6].body, 'base64').toString(), '[object Object]', 'plain objects are stringified like browsers');
  assert.equal(ct(r[7]), 'application/json', 'an explicit content-type is kept');
  assert.equal(r[7].headers.filter((p) => p[0] === 'content-type').length, 1);
  assert.deepEqual(r[8].headers.filter((p) => p[0] === 'x-custom'), [['x-custom', 'v1'], ['x-custom', 'v2']]);
  assert.deepEqual(r[9].headers.find((p) => p[0] === 'accept'), ['accept', 'text/plain']);
  assert.ok(calls.fetch.every((c) => c.method === 'POST'));
});

test('fetch methods: normalized to uppercase, unsupported ones and GET/HEAD bodies refused', async () => {
  const { run, runAsync, calls } = load();
  const methods = await runAsync(`
    const out = [];
    for (const m of ['get', 'Put', 'patch', 'DELETE', 'options']) out.push((await (await fetch('https://api.example.test/echo', { method: m })).json()).method);
    return out;`);
  assert.deepEqual(methods, ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
  const n = calls.fetch.length;
  const TE = run('TypeError');
  for (const [code, re] of [
    [`fetch('https://api.example.test/echo', { method: 'HEAD', body: 'x' })`, /GET\/HEAD method cannot have body/],
    [`fetch('https://api.example.test/echo', { body: 'x' })`, /GET\/HEAD method cannot have body/],
    [`fetch('https://api.example.test/echo', { method: 'CONNECT' })`, /not a supported HTTP method/],
    [`fetch('https://api.example.test/echo', { method: 'BREW' })`, /not a supported HTTP method/],
    [`fetch('https://api.example.test/echo', { redirect: 'sometimes' })`, /not a valid redirect mode/],
    [`fetch('/relative')`, /Failed to parse URL from \/relative/],
    [`fetch('https://user:pw@api.example.test/')`, /includes credentials/],
    [`fetch('https://api.example.test/echo', { headers: { 'bad name': 'x' } })`, /invalid header name/],
    [`fetch('https://api.example.test/echo', { headers: { 'x-a': 'a\\r\\nb' } })`, /invalid header value/],
    [`fetch()`, /1 argument required/],
  ]) {
    const p = run(code);
    assert.equal(typeof p.then, 'function', `${code} returns a promise instead of throwing`);
    const e = await rejection(p);
    assert.ok(e instanceof TE, code);
    assert.match(e.message, re, code);
  }
  assert.equal(calls.fetch.length, n, 'refused requests never reach the host');
  const head = await runAsync(`const r = await fetch('https://api.example.test/bytes', { method: 'HEAD' }); return [r.status, await r.text(), r.bodyUsed];`);
  assert.deepEqual(head, [200, '', false], 'HEAD responses have a null body');
});

test('fetch rejects with the host reason as a TypeError of the tool realm', async () => {
  const { run, grants } = load();
  const TE = run('TypeError');
  let e = await rejection(run(`fetch('https://evil.test/x')`));
  assert.ok(e instanceof TE);
  assert.equal(e.message, 'host not allowed: evil.test (allowed: api.example.test)');
  grants.fetch = false;
  e = await rejection(run(`fetch('https://api.example.test/echo')`));
  assert.ok(e instanceof TE);
  assert.equal(e.name, 'TypeError');
  assert.equal(e.message, 'capability not granted: fetch');
  assert.equal(run(`fetch('https://api.example.test/echo').catch(e => String(e))`) instanceof run('Promise'), true);
  assert.equal(await run(`fetch('https://api.example.test/echo').catch(e => String(e))`), 'TypeError: capability not granted: fetch');
});

test('redirect mode reaches the host; redirected/url pass through', async () => {
  const { runAsync, calls } = load();
  const r = await runAsync(`
    const f = await fetch('https://api.example.test/redirect');
    const m = await fetch('https://api.example.test/redirect', { redirect: 'manual' });
    let err; try { await fetch('https://api.example.test/redirect', { redirect: 'error' }); } catch (e) { err = e.name + ': ' + e.message; }
    return [f.redirected, f.url, await f.text(), m.status, m.redirected, m.headers.get('location'), err];`);
  assert.deepEqual(r, [true, 'https://api.example.test/final', 'landed', 302, false, '/final',
    'TypeError: redirect not allowed (redirect: error): https://api.example.test/redirect']);
  assert.deepEqual(calls.fetch.map((c) => c.redirect), ['follow', 'manual', 'error']);
});

test('response bodies: text/arrayBuffer/bytes, single read, clone, 204 and 404', async () => {
  const { runAsync } = load();
  const r = await runAsync(`
    const a = await fetch('https://api.example.test/bytes');
    const c = a.clone();
    const ab = await a.arrayBuffer();
    let again; try { await a.text(); } catch (e) { again = [e instanceof TypeError, e.message]; }
    let clone2; try { a.clone(); } catch (e) { clone2 = e.name; }
    const bytes = await c.bytes();
    const t = await fetch('https://api.example.test/text');
    const nc = await fetch('https://api.example.test/nocontent');
    const miss = await fetch('https://api.example.test/missing');
    return { abIsAB: ab instanceof ArrayBuffer, ab: Array.from(new Uint8Array(ab)), again, clone2, bytesIsU8: bytes instanceof Uint8Array,
      bytes: Array.from(bytes), text: await t.text(), nc: [nc.status, nc.ok, await nc.text(), nc.bodyUsed],
      miss: [miss.status, miss.ok, miss.statusText, await miss.text()] };`);
  assert.equal(r.abIsAB, true);
  assert.deepEqual(r.ab, [0, 1, 2, 255]);
  assert.deepEqual(r.again, [true, 'text: Body is unusable: Body has already been read']);
  assert.equal(r.clone2, 'TypeError');
  assert.equal(r.bytesIsU8, true);
  assert.deepEqual(r.bytes, [0, 1, 2, 255]);
  assert.equal(r.text, 'hi ✓', 'text() decodes UTF-8 and drops a BOM');
  assert.deepEqual(r.nc, [204, true, '', false]);
  assert.deepEqual(r.miss, [404, false, 'Not Found', 'nope']);
});

test('Headers: case-insensitive, combined, sorted iteration, getSetCookie, immutability', async () => {
  const { run, runAsync } = load();
  const r = JSON.parse(run(`JSON.stringify((() => {
    const h = new Headers([['B', '2'], ['a', '1']]);
    h.append('X-Val', 'one'); h.append('x-val', 'two');
    const out = { get: h.get('X-VAL'), has: h.has('x-val'), missing: h.get('nope') };
    h.set('X-Val', 'only'); out.set = h.get('x-val');
    h.append('Set-Cookie', 'c=1'); h.append('set-cookie', 'd=2');
    out.entries = [...h]; out.keys = [...h.keys()]; out.values = [...h.values()];
    out.cookies = h.getSetCookie();
    const fe = []; h.forEach((v, k, o) => fe.push(k + '=' + v + (o === h))); out.forEach = fe;
    h.delete('A'); out.deleted = h.has('a');
    out.fromObj = [...new Headers({ 'Content-Type': 'x/y' })];
    out.copy = new Headers(h).get('b');
    try { new Headers([['only-one']]); } catch (e) { out.badPair = e.name; }
    out.tag = Object.prototype.toString.call(h);
    return out; })())`));
  assert.equal(r.get, 'one, two');
  assert.equal(r.has, true);
  assert.equal(r.missing, null);
  assert.equal(r.set, 'only');
  assert.deepEqual(r.entries, [['a', '1'], ['b', '2'], ['set-cookie', 'c=1'], ['set-cookie', 'd=2'], ['x-val', 'only']]);
  assert.deepEqual(r.keys, ['a', 'b', 'set-cookie', 'set-cookie', 'x-val']);
  assert.deepEqual(r.values, ['1', '2', 'c=1', 'd=2', 'only']);
  assert.deepEqual(r.cookies, ['c=1', 'd=2']);
  assert.deepEqual(r.forEach, ['a=1true', 'b=2true', 'set-cookie=c=1true', 'set-cookie=d=2true', 'x-val=onlytrue']);
  assert.equal(r.deleted, false);
  assert.deepEqual(r.fromObj, [['content-type', 'x/y']]);
  assert.equal(r.copy, '2');
  assert.equal(r.badPair, 'TypeError');
  assert.equal(r.tag, '[object Headers]');
  const resp = await runAsync(`
    const res = await fetch('https://api.example.test/echo');
    let err; try { res.headers.set('x', 'y'); } catch (e) { err = e.name; }
    return [res.headers.getSetCookie(), res.headers.get('set-cookie'), err];`);
  assert.deepEqual(resp, [['a=1', 'b=2'], 'a=1, b=2', 'TypeError']);
});

test('Response constructor, Response.json, Response.error/redirect', async () => {
  const { run, runAsync } = load();
  const r = await runAsync(`
    const a = new Response('hi', { status: 201, statusText: 'Created', headers: { 'X-A': '1' } });
    const j = Response.json({ ok: [1] }, { status: 202 });
    const e = new Response();
    const b = new Response(new Uint8Array([104, 105]));
    const rd = Response.redirect('https://api.example.test/x', 301);
    return { a: [a.status, a.ok, a.statusText, a.headers.get('x-a'), a.headers.get('content-type'), a.type, await a.text()],
      j: [j.status, j.headers.get('content-type'), await j.json()],
      e: [e.status, e.statusText, await e.text(), e.bodyUsed], b: [b.headers.get('content-type'), await b.text()],
      err: [Response.error().type, Response.error().status], rd: [rd.status, rd.headers.get('location')] };`);
  assert.deepEqual(r.a, [201, true, 'Created', '1', 'text/plain;charset=UTF-8', 'default', 'hi']);
  assert.deepEqual(r.j, [202, 'application/json', { ok: [1] }]);
  assert.deepEqual(r.e, [200, '', '', false]);
  assert.deepEqual(r.b, [null, 'hi']);
  assert.deepEqual(r.err, ['error', 0]);
  assert.deepEqual(r.rd, [301, 'https://api.example.test/x']);
  assert.throws(() => run('new Response("x", { status: 99 })'), { name: 'RangeError' });
  assert.throws(() => run('new Response("x", { status: 204 })'), { name: 'TypeError' });
  assert.throws(() => run('Response.json(undefined)'), { name: 'TypeError' });
});

test('Request objects and Request-like inputs are accepted by fetch', async () => {
  const { runAsync, calls } = load();
  const r = await runAsync(`
    const req = new Request('https://api.example.test/echo', { method: 'put', headers: { 'X-R': '1' }, body: 'payload' });
    const fields = [req.url, req.method, req.headers.get('x-r'), req.redirect, req.bodyUsed];
    const echoed = await (await fetch(req)).json();
    let reuse; try { await fetch(req); } catch (e) { reuse = e.name; }
    const viaUrl = await (await fetch(new URL('https://api.example.test/echo?u=1'))).json();
    const like = await (await fetch({ url: 'https://api.example.test/echo', method: 'DELETE' })).json();
    const over = await (await fetch(new Request('https://api.example.test/echo'), { method: 'POST', body: 'o' })).json();
    return { fields, used: req.bodyUsed, echoed, reuse, viaUrl: viaUrl.method, like: like.method, over: over.method };`);
  assert.deepEqual(r.fields, ['https://api.example.test/echo', 'PUT', '1', 'follow', false]);
  assert.equal(r.echoed.method, 'PUT');
  assert.equal(Buffer.from(r.echoed.body, 'base64').toString(), 'payload');
  assert.deepEqual(r.echoed.headers, [['x-r', '1'], ['content-type', 'text/plain;charset=UTF-8']]);
  assert.equal(r.used, true);
  assert.equal(r.reuse, 'TypeError');
  assert.deepEqual([r.viaUrl, r.like, r.over], ['GET', 'DELETE', 'POST']);
  assert.equal(calls.fetch[1].url, 'https://api.example.test/echo?u=1');
});

// ------------------------------------------------------------------ crypto
const nodeHash = (alg, data, enc) => nodeCrypto.createHash(alg).update(data).digest(enc);

test('createHash known answers, algorithm names and output encodings', () => {
  const { run } = load();
  assert.equal(run(`crypto.createHash('sha256').update('abc').digest('hex')`),
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  for (const name of ['SHA-256', 'SHA256', 'sha-256']) {
    assert.equal(run(`crypto.createHash('${name}').update('abc').digest('hex')`), nodeHash('sha256', 'abc', 'hex'), name);
  }
  assert.equal(run(`crypto.createHash('md5').update('').digest('hex')`), 'd41d8cd98f00b204e9800998ecf8427e');
  assert.equal(run(`crypto.createHash('sha1').update('abc').digest('hex')`), 'a9993e364706816aba3e25717850c26c9cd0d89d');
  for (const alg of ['sha384', 'sha512', 'SHA-1']) {
    const a = alg.toLowerCase().replace('-', '');
    assert.equal(run(`crypto.createHash('${alg}').update('héllo ✓ 😀').digest('base64')`), nodeHash(a, 'héllo ✓ 😀', 'base64'), alg);
  }
  assert.equal(run(`crypto.createHash('sha256').update('abc').digest('base64')`), 'ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=');
  assert.equal(run(`crypto.createHash('sha256').update('abc').digest('base64url')`), nodeHash('sha256', 'abc', 'base64url'));
  assert.equal(run(`crypto.createHash('sha256').update('abc').digest('latin1')`), nodeHash('sha256', 'abc', 'latin1'));
  const raw = run(`(() => { const d = crypto.createHash('sha256').update('abc').digest(); return [d instanceof Uint8Array, d.length, d.toString('hex'), d[0]]; })()`);
  assert.deepEqual([...raw], [true, 32, nodeHash('sha256', 'abc', 'hex'), 0xba]);
  assert.deepEqual([...run(`crypto.getHashes()`)], ['md5', 'sha1', 'sha256', 'sha384', 'sha512']);
});

test('createHash: chained updates with mixed input encodings and binary inputs, copy, finalization', () => {
  const { run } = load();
  const expected = nodeCrypto.createHash('sha256').update('ab').update(Buffer.from('63', 'hex')).update(Buffer.from([0xff, 0x00]))
    .update(Buffer.from('aGk=', 'base64')).update(Buffer.from('é', 'latin1')).update(new Uint8Array([1, 2, 3])).digest('hex');
  assert.equal(run(`(() => {
    const h = crypto.createHash('sha256');
    const same = h.update('ab') === h;
    h.update('63', 'hex').update(new Uint8Array([0xff, 0]).buffer).update('aGk=', 'base64').update('é', 'latin1')
      .update(new DataView(new Uint8Array([9, 1, 2, 3, 9]).buffer, 1, 3));
    return same && h.digest('hex'); })()`), expected);
  const big = Buffer.alloc(300000, 7);
  assert.equal(run(`crypto.createHash('sha512').update(new Uint8Array(300000).fill(7)).digest('hex')`), nodeHash('sha512', big, 'hex'));
  const copied = run(`(() => { const h = crypto.createHash('sha256').update('a'); const c = h.copy(); h.update('bc'); c.update('x');
    return [h.digest('hex'), c.digest('hex')]; })()`);
  assert.deepEqual([...copied], [nodeHash('sha256', 'abc', 'hex'), nodeHash('sha256', 'ax', 'hex')]);
  const fin = run(`(() => { const h = crypto.createHash('sha256'); h.digest(); const out = [];
    for (const f of [() => h.update('x'), () => h.digest('hex'), () => h.copy()]) { try { f(); out.push('no throw'); } catch (e) { out.push(e.constructor.name + ':' + e.message + ':' + e.code); } }
    return out; })()`);
  assert.deepEqual([...fin], Array(3).fill('Error:Digest already called:ERR_CRYPTO_HASH_FINALIZED'));
  assert.throws(() => run(`crypto.createHash('sha3-999')`), { name: 'TypeError', message: /Digest method not supported/ });
  assert.throws(() => run(`crypto.createHash('sha256').update(42)`), { name: 'TypeError' });
  assert.throws(() => run(`crypto.createHash('sha256').update('x', 'klingon')`), { name: 'TypeError', message: /Unknown encoding/ });
});

test('createHmac: RFC 4231 vectors and key types', () => {
  const { run } = load();
  // RFC 4231 test case 1: key = 0x0b * 20, data = "Hi There"
  assert.equal(run(`crypto.createHmac('sha256', new Uint8Array(20).fill(0x0b)).update('Hi There').digest('hex')`),
    'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7');
  assert.equal(run(`crypto.createHmac('SHA-512', new Uint8Array(20).fill(0x0b)).update('Hi There').digest('hex')`),
    '87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854');
  // RFC 4231 test case 2: key = "Jefe" (string key)
  assert.equal(run(`crypto.createHmac('sha256', 'Jefe').update('what do ya ').update('want for nothing?').digest('hex')`),
    '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
  assert.equal(run(`crypto.createHmac('sha1', 'k').update('d').digest('base64')`), nodeCrypto.createHmac('sha1', 'k').update('d').digest('base64'));
  assert.throws(() => run(`crypto.createHmac('sha256')`), { name: 'TypeError' });
  assert.throws(() => run(`crypto.createHmac('sha256', 5)`), { name: 'TypeError' });
});

test('randomUUID, getRandomValues, randomBytes', async () => {
  const { run, calls, grants } = load();
  const uuids = [...run(`Array.from({ length: 50 }, () => crypto.randomUUID())`)];
  for (const u of uuids) assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(new Set(uuids).size, 50);
  const grv = run(`(() => { const a = new Uint8Array(64), b = new Uint32Array(8), c = new BigUint64Array(2);
    return [crypto.getRandomValues(a) === a, a.some(x => x !== 0), crypto.getRandomValues(b) === b, b.some(x => x !== 0),
      crypto.getRandomValues(c) === c, crypto.getRandomValues(new Uint8Array(65536)).length]; })()`);
  assert.deepEqual([...grv], [true, true, true, true, true, 65536]);
  const quota = run(`(() => { try { crypto.getRandomValues(new Uint8Array(65537)); } catch (e) { return [e.name, e.code, e instanceof Error, e.message]; } })()`);
  assert.deepEqual([...quota].slice(0, 3), ['QuotaExceededError', 22, true]);
  assert.match(quota[3], /65537/);
  assert.throws(() => run(`crypto.getRandomValues(new Float64Array(2))`), { name: 'TypeError' });
  assert.throws(() => run(`crypto.getRandomValues(new DataView(new ArrayBuffer(4)))`), { name: 'TypeError' });
  calls.randomBytes.length = 0;
  const rb = run(`(() => { const b = crypto.randomBytes(200000); return [b instanceof Uint8Array, b.length, crypto.randomBytes(16).toString('hex').length, crypto.randomBytes(6).toString('base64').length]; })()`);
  assert.deepEqual([...rb], [true, 200000, 32, 8]);
  assert.deepEqual(calls.randomBytes.slice(0, 4), [65536, 65536, 65536, 3392], 'large requests are split into host-sized chunks');
  assert.throws(() => run(`crypto.randomBytes(-1)`), { name: 'RangeError' });
  assert.throws(() => run(`crypto.randomBytes('8')`), { name: 'TypeError' });
  const viaCb = await run(`new Promise(res => { let sync = true; crypto.randomBytes(8, (err, buf) => res([err, buf.length, sync])); sync = false; })`);
  assert.deepEqual([...viaCb], [null, 8, false]);
  grants.crypto = false;
  assert.throws(() => run(`crypto.randomUUID()`), { name: 'TypeError', message: 'capability not granted: crypto' });
  assert.throws(() => run(`crypto.createHash('sha256').update('x').digest('hex')`), { message: 'capability not granted: crypto' });
});

// ------------------------------------------------------------------ fs
test('fs.readFileSync: encodings and bytes', () => {
  const { run } = load();
  assert.equal(run(`fs.readFileSync('/data/hello.txt', 'utf8')`), 'héllo wörld\n');
  assert.equal(run(`fs.readFileSync('/data/hello.txt', 'utf-8')`), 'héllo wörld\n');
  assert.equal(run(`fs.readFileSync('/data/hello.txt', { encoding: 'utf8' })`), 'héllo wörld\n');
  assert.equal(run(`fs.readFileSync('/data/bom.txt', 'utf8')`), '\uFEFFbom', 'a BOM is kept, like Node');
  const raw = run(`(() => { const b = fs.readFileSync('/data/bin'); return [b instanceof Uint8Array, Array.from(b), b.toString('hex')]; })()`);
  assert.deepEqual([raw[0], [...raw[1]], raw[2]], [true, [0, 1, 2, 0x7f, 0x80, 0xfe, 0xff], '0001027f80feff']);
  assert.equal(run(`fs.readFileSync('/data/hello.txt').toString()`), 'héllo wörld\n');
  const bin = FILES.get('/data/bin');
  assert.equal(run(`fs.readFileSync('/data/bin', 'base64')`), bin.toString('base64'));
  assert.equal(run(`fs.readFileSync('/data/bin', { encoding: 'hex' })`), bin.toString('hex'));
  assert.equal(run(`fs.readFileSync('/data/bin', 'latin1')`), bin.toString('latin1'));
  assert.equal(run(`fs.readFileSync('/data/bin', 'base64url')`), bin.toString('base64url'));
  assert.deepEqual(run(`JSON.parse(fs.readFileSync(new URL('file:///data/obj.json'), 'utf8'))`).a[2].b, 'ü');
  assert.throws(() => run(`fs.readFileSync('/data/hello.txt', 'klingon')`), { name: 'TypeError' });
  assert.throws(() => run(`fs.readFileSync('/data/hello.txt', { flag: 'w' })`), { name: 'TypeError' });
  assert.throws(() => run(`fs.readFileSync(42)`), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
});

test('fs errors carry Node-style codes and the host message', async () => {
  const { run, grants } = load();
  const err = (path) => run(`(() => { try { fs.readFileSync(${JSON.stringify(path)}); } catch (e) {
    return { ctor: e.constructor.name, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path, message: e.message }; } })()`);
  assert.deepEqual({ ...err('/data/nope') }, { ctor: 'Error', code: 'ENOENT', errno: -2, syscall: 'open', path: '/data/nope',
    message: "ENOENT: no such file or directory, open '/data/nope'" });
  assert.equal(err('/data').code, 'EISDIR');
  assert.equal(err('/data').message, "EISDIR: illegal operation on a directory, read '/data'");
  assert.equal(err('/secret/key').code, 'EACCES');
  assert.equal(err('/secret/key').errno, -13);
  grants.fs = false;
  const denied = err('/data/hello.txt');
  assert.equal(denied.code, 'ECAPABILITY');
  assert.equal(denied.message, 'capability not granted: fs.readFile');
  const p = await rejection(run(`fs.promises.readFile('/data/hello.txt')`));
  assert.equal(p.code, 'ECAPABILITY');
});

test('fs.readFile promise and callback forms, fs.promises.readFile', async () => {
  const { run } = load();
  assert.equal(await run(`fs.readFile('/data/hello.txt', 'utf8')`), 'héllo wörld\n');
  assert.equal(await run(`fs.promises.readFile('/data/hello.txt', { encoding: 'utf8' })`), 'héllo wörld\n');
  const bytes = await run(`fs.promises.readFile('/data/bin')`);
  assert.deepEqual([...bytes], [0, 1, 2, 0x7f, 0x80, 0xfe, 0xff]);
  const e = await rejection(run(`fs.readFile('/data/none')`));
  assert.equal(e.code, 'ENOENT');
  const cb = await run(`new Promise(res => { let sync = true;
    fs.readFile('/data/hello.txt', 'utf8', (err, data) => res([err, data, sync])); sync = false; })`);
  assert.deepEqual([...cb], [null, 'héllo wörld\n', false]);
  const cb2 = await run(`new Promise(res => fs.readFile('/data/bin', (err, data) => res([err, data instanceof Uint8Array, data.length])))`);
  assert.deepEqual([...cb2], [null, true, 7]);
  const cbErr = await run(`new Promise(res => fs.readFile('/secret/x', {}, (err, data) => res([err.code, err.message, data])))`);
  assert.deepEqual([...cbErr], ['EACCES', "EACCES: permission denied, open '/secret/x'", undefined]);
  assert.throws(() => run(`fs.readFile('/data/hello.txt', 'utf8', 'not a function')`), { name: 'TypeError' });
});

test('Request URL fast path serializes exactly like WHATWG URL (Node as oracle)', () => {
  const { G } = load();
  const urls = [
    'http://api.example.test/json', 'https://api.example.test', 'http://api.example.test:8080/a/b?x=1&y=2',
    'https://a.cdn.example.test/lib.js?v=1.2.3', 'http://api.example.test:80/', 'https://api.example.test:443/x',
    'http://API.example.test/', 'http://api.example.test./', 'http://127.0.0.1:18765/v1/items.json',
    'http://0x7f.1/', 'http://api.example.test/a/../b', 'http://api.example.test/./a', 'http://api.example.test/%2e%2e/x',
    "http://api.example.test/it's", 'http://api.example.test/a%zz', 'http://api.example.test/a b',
    'http://api.example.test/q?a=%20b', 'http://api.example.test:08080/', 'http://xn--bcher-kva.example.test/',
    'http://api.example.test/a?b#frag', 'http://user@api.example.test/'.replace('user@', ''),
    'https://api.example.test/~user/(x)/[y]', 'http://api.example.test/a/.hidden', 'http://api.example.test/a/..b',
  ];
  for (const u of urls) {
    assert.equal(new G.Request(u).url, new URL(u).href, u);
  }
  assert.throws(() => new G.Request('http://user:pw@api.example.test/'), /credentials/);
  assert.throws(() => new G.Request('/relative'), /Failed to parse URL/);
});

// ------------------------------------------------------------------ issue 14
test('the host is sent the URL exactly as the tool wrote it; the guest never decides', async () => {
  const { runAsync, calls } = load();
  const urls = ['http://%61pi.example.test/echo', 'http://*.cdn.example.test/echo', 'HTTP://API.EXAMPLE.TEST./echo',
    'http://api.example.test/a/../echo', 'https://api.example.test/echo?q=a b#frag'];
  for (const u of urls) await runAsync(`try { await fetch(${JSON.stringify(u)}); } catch (_) {} return 1;`);
  await runAsync(`await fetch(new URL('http://api.example.test/echo?u=1')).catch(() => 0); return 1;`);
  await runAsync(`await fetch(new Request('http://%61pi.example.test/echo')).catch(() => 0); return 1;`);
  assert.deepEqual(calls.fetch.map(r => r.url), [...urls, 'http://api.example.test/echo?u=1', 'http://%61pi.example.test/echo']);
  // Request#url is still the WHATWG serialization.
  assert.equal(E.run(`new Request('http://%61pi.example.test/echo').url`), 'http://api.example.test/echo');
});

test('capability refusals are known by identity, not by their words', async () => {
  const { run, runAsync, grants } = load();
  grants.fetch = false; grants.crypto = false;
  const denied = fn => run(`(() => { try { ${fn}; } catch (e) { return [__temper_internal.deniedCapability(e), e.code, e.message]; } })()`);
  assert.deepEqual([...denied('crypto.randomUUID()')], ['crypto', 'ECAPABILITY', 'capability not granted: crypto']);
  assert.deepEqual([...denied('fs.readFileSync("/ungranted/x")')], ['fs.readFile', 'ECAPABILITY', 'capability not granted: fs.readFile']);
  const viaFetch = await runAsync(`try { await fetch('https://api.example.test/echo'); } catch (e) { return __temper_internal.deniedCapability(e); }`);
  assert.equal(viaFetch, 'fetch');
  // A tool's own error with the same words is not a refusal, nor are other values.
  assert.equal(run(`__temper_internal.deniedCapability(new TypeError('capability not granted: fetch'))`), undefined);
  assert.equal(run(`__temper_internal.deniedCapability('capability not granted: fetch')`), undefined);
  assert.equal(run(`__temper_internal.deniedCapability(undefined)`), undefined);
  // Other host failures are plain errors; the lookup cannot be replaced.
  assert.deepEqual([...denied('fs.readFileSync("/secret/x")')], [undefined, 'EACCES', "EACCES: permission denied, open '/secret/x'"]);
  assert.equal(run(`(() => { 'use strict'; try { globalThis.__temper_internal.deniedCapability = () => 'fetch'; } catch (e) { return e.name; } })()`), 'TypeError');
  assert.equal(run(`(() => { try { WeakMap.prototype.get = () => 'fetch'; return __temper_internal.deniedCapability({}); } finally {} })()`), undefined);
});

test('fs: paths outside the grants carry ERR_ACCESS_DENIED, like Node\'s permission model', () => {
  const { run } = load();
  const r = run(`(() => { try { fs.readFileSync('/outside/x'); } catch (e) { return [e.code, e.message, e.permission, e.resource, e.syscall]; } })()`);
  assert.deepEqual([...r], ['ERR_ACCESS_DENIED', 'path outside the granted directories: /outside/x', 'FileSystemRead', '/outside/x', undefined]);
});
