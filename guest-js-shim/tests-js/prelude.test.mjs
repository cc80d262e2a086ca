// Tests for guest-js-shim/src/prelude.js: loads it into a bare node:vm context
// (only ES builtins, string code generation disabled like the Temper runtime)
// and compares every API with Node's own implementation.
// Run: node --test guest-js-shim/tests-js/
import test from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const PRELUDE = fs.readFileSync(fileURLToPath(new URL('../src/prelude.js', import.meta.url)), 'utf8');
const GLOBALS = ['URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'atob', 'btoa', 'structuredClone',
  'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'queueMicrotask'];

function freshContext() {
  const ctx = vm.createContext({}, { codeGeneration: { strings: false, wasm: false } });
  const missing = vm.runInContext(`${JSON.stringify(GLOBALS)}.filter(n => typeof globalThis[n] === 'undefined')`, ctx);
  assert.equal(missing.length, GLOBALS.length, 'bare context must lack the web globals');
  vm.runInContext(PRELUDE, ctx, { filename: 'prelude.js' });
  return ctx;
}
const ctx = freshContext();
const run = (code) => vm.runInContext(code, ctx);
const fn = (src) => run(`(${src})`);
// Values made in the context have the context's prototypes: copy them into this realm to compare.
const plain = (v) => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

// Same-realm structural description, evaluated in both realms so results compare as strings.
const DESCRIBE = `function describe(root) {
  const seen = new Map();
  const name = v => { const p = Object.getPrototypeOf(v); return p === null ? 'null' : (p.constructor && p.constructor.name) || '?'; };
  const keys = v => Object.keys(v).map(k => JSON.stringify(k) + ':' + d(v[k])).join(',');
  function d(v) {
    const t = typeof v;
    if (t === 'bigint') return v + 'n';
    if (t === 'number') return Object.is(v, -0) ? '-0' : String(v);
    if (t === 'string') return JSON.stringify(v);
    if (v === null || t !== 'object') return String(v);
    if (seen.has(v)) return '#' + seen.get(v);
    seen.set(v, seen.size);
    if (v instanceof Date) return 'Date(' + v.getTime() + ')';
    if (v instanceof RegExp) return 'RegExp(' + String(v) + ')';
    if (v instanceof Map) return 'Map{' + [...v].map(([k, x]) => d(k) + '=>' + d(x)).join(',') + '}';
    if (v instanceof Set) return 'Set{' + [...v].map(d).join(',') + '}';
    if (v instanceof ArrayBuffer) return 'ArrayBuffer[' + new Uint8Array(v).join(',') + ']';
    if (ArrayBuffer.isView(v)) return name(v) + '(' + d(v.buffer) + ',' + v.byteOffset + ',' + v.byteLength + ')';
    if (v instanceof Error) return name(v) + '(' + JSON.stringify(v.name) + ',' + JSON.stringify(v.message) + ',' + Object.prototype.hasOwnProperty.call(v, 'message') + '){' + keys(v) + '}';
    if (v instanceof Boolean || v instanceof Number || v instanceof String || v instanceof BigInt) return name(v) + '(' + d(v.valueOf()) + ')';
    if (Array.isArray(v)) return 'Array(' + v.length + ')[' + keys(v) + ']';
    return name(v) + '{' + keys(v) + '}';
  }
  return d(root);
}`;
const describeHere = vm.runInThisContext(`(${DESCRIBE})`);
const describeThere = fn(DESCRIBE);

test('globals are installed with browser-like property attributes', () => {
  const desc = fn(`n => { const d = Object.getOwnPropertyDescriptor(globalThis, n); return d && [typeof d.value, d.enumerable, d.writable, d.configurable].join(); }`);
  for (const n of [...GLOBALS, 'DOMException']) assert.equal(desc(n), 'function,false,true,true', n);
  // The shim's internals sit on one non-enumerable object (internals.js takes
  // it off globalThis in the real prelude); each is fixed.
  assert.equal(desc('__temper_internal'), 'object,false,false,true');
  const inner = fn(`n => { const d = Object.getOwnPropertyDescriptor(globalThis.__temper_internal, n); return d && [typeof d.value, d.writable, d.configurable].join(); }`);
  for (const n of ['fireNextTimer', 'pendingTimers', 'unserializable']) assert.equal(inner(n), 'function,false,false', n);
  assert.equal(run('Object.keys(globalThis).length'), 0, 'nothing enumerable leaks onto globalThis');
});

test('prelude does not use eval, Function or with, and runs with code generation disabled', () => {
  assert.throws(() => run('eval("1")'), /Code generation from strings disallowed/);
  const code = PRELUDE.replace(/\/\/.*$/gm, '');
  assert.doesNotMatch(code, /\beval\s*\(|\bnew\s+Function\b|\bFunction\s*\(|\bwith\s*\(/);
  assert.doesNotThrow(() => freshContext());
});

// ------------------------------------------------------------------ URL
const URL_CASES = [
  ['http://example.com'], ['HTTP://EXAMPLE.COM/Path'], ['https://example.com:443/'], ['http://example.com:80/'],
  ['http://example.com:8080/x'], ['https://example.com:0/'], ['ws://h:80/'], ['wss://h:443/c'], ['ftp://h:21/f'],
  ['http://user:pa ss@host/'], ['http://us@er:p@host/'], ['http://@host/'], ['http://:@host/'],
  ['http://[::1]/'], ['http://[2001:DB8:0:0:0:0:0:1]:8080/p'], ['http://[::ffff:192.168.0.1]/'], ['http://[1:0:0:2::3:0]/'],
  ['http://[::1/'], ['http://[:1]/'], ['http://192.168.0.1/'], ['http://0x7f.1/'], ['http://017.0.0.1/'], ['http://4294967295/'],
  ['http://4294967296/'], ['http://1.2.3.256/'], ['http://münchen.de/'], ['http://EXAMPLE.com./'], ['http://ex%41mple.com/'],
  ['http://exa mple.com/'], ['http://a<b/'], ['http://%zz/'], ['http:/example.com/x'], ['http:example.com/x'], ['http:\\\\h\\p\\q'],
  ['https://h/a b/ü/€?q=a b&r=ü#frag ment'], ['https://h/?a=1+2&b=%20&c=%2B'], ['https://h/%2e%2E/a/./b/../c'],
  ['https://h/a/b/..'], ['https://h/p?x=\'y\'&z="w"'], ['sc://h/p?x=\'y\''], ['https://h/{}`^|'], ['  https://h/trim  '],
  ['https://h/\t\nnew\rline'], ['https://h#'], ['https://h?'], ['https://h/?#'],
  ['mailto:someone@example.com'], ['javascript:alert(1)'], ['data:text/plain,hello world'], ['urn:isbn:0451450523'],
  ['blob:https://example.com/uuid'], ['blob:foo'], ['sc://Host:99/x'], ['sc:/path/./x/../y'], ['sc://h'], ['sc:'], ['sc://@/'],
  ['file:///etc/passwd'], ['file://localhost/x'], ['file:///C:/a/../..'], ['file:c:\\foo\\bar'], ['file://host/share'],
  ['non-special://[1:2::3]:80/'], ['https://h:65535'], ['https://h:65536'], ['https://h:12a'], ['https://h:'],
  ['foo'], [''], ['//h/x'], ['http://'], ['https://ex ample.org'], ['http://[www.example.com]/'], ['a:\t foo.com'],
  // relative resolution
  ['../x?y#z', 'http://a/b/c/d;p?q'], ['g', 'http://a/b/c/d;p?q'], ['./g', 'http://a/b/c/d;p?q'], ['g/', 'http://a/b/c/d;p?q'],
  ['/g', 'http://a/b/c/d;p?q'], ['//g', 'http://a/b/c/d;p?q'], ['?y', 'http://a/b/c/d;p?q'], ['#s', 'http://a/b/c/d;p?q'],
  ['', 'http://a/b/c/d;p?q#f'], ['../../../g', 'http://a/b/c/d;p?q'], ['g;x=1/../y', 'http://a/b/c/d;p?q'],
  ['\\x', 'http://a/b/c'], ['https:foo', 'http://a/b'], ['http:foo', 'http://a/b/c'], ['x', 'mailto:a@b'], ['#x', 'mailto:a@b'],
  ['path', 'sc://h/a/b'], ['..', 'sc://h/a/b'], ['/x', 'file:///C:/a/b'], ['d:', 'file:///C:/a/b'], ['x', 'not a url'],
  ['http://other/', 'http://a/b'], ['?q=ü', 'https://h/p'],
];
const urlSnapshot = (U, input, base) => {
  const URL_PROPS = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash', 'origin'];
  let u;
  try { u = base === undefined ? new U(input) : new U(input, base); } catch (e) { return 'throws ' + e.name; }
  const o = {};
  for (const k of URL_PROPS) o[k] = u[k];
  o.params = u.searchParams.toString(); o.json = JSON.stringify(u); o.str = String(u);
  return JSON.stringify(o);
};
const snapThere = fn(`(snap) => (i, b) => snap(URL, i, b)`)(fn(`${urlSnapshot}`));

test(`URL parsing matches Node for ${URL_CASES.length} inputs`, () => {
  assert.ok(URL_CASES.length >= 40);
  for (const [input, base] of URL_CASES) {
    assert.equal(snapThere(input, base), urlSnapshot(URL, input, base), `new URL(${JSON.stringify(input)}, ${JSON.stringify(base)})`);
  }
});

test('URL.canParse and URL errors', () => {
  const canParse = fn('(i, b) => URL.canParse(i, b)');
  for (const [input, base] of URL_CASES) assert.equal(canParse(input, base), URL.canParse(input, base), input);
  const msg = fn('(i) => { try { new URL(i); } catch (e) { return [e instanceof TypeError, e.message].join("|"); } }');
  assert.equal(msg('not a url'), 'true|Invalid URL: not a url');
  assert.equal(msg('http://[::1'), 'true|Invalid URL: http://[::1');
  assert.throws(() => run('new URL()'), { name: 'TypeError' });
  assert.equal(run('Object.prototype.toString.call(new URL("http://x"))'), '[object URL]');
});

const SETTER_CASES = [
  ['https://h/p?q#f', 'search', '?a=b c'], ['https://h/p?q#f', 'search', ''], ['https://h/p', 'search', 'x=ü#'],
  ['https://h/p?q#f', 'hash', 'new hash'], ['https://h/p#f', 'hash', ''], ['https://h/p', 'hash', '#x'],
  ['https://h/p', 'pathname', '/a b/../c?d#'], ['https://h/p', 'pathname', 'rel'], ['sc://h/p', 'pathname', 'x'],
  ['mailto:x', 'pathname', '/y'], ['https://h/p', 'protocol', 'HTTP'], ['https://h/p', 'protocol', 'sc'],
  ['sc://h/p', 'protocol', 'other:junk'], ['http://h:80/', 'protocol', 'ws'], ['https://h/p', 'host', 'EX.com:8080'],
  ['https://h:99/p', 'hostname', 'other'], ['https://h/p', 'hostname', 'a:1'], ['https://h/p', 'port', '8080'],
  ['https://h:8080/p', 'port', ''], ['https://h/p', 'port', '443'], ['https://h/p', 'port', '99999'], ['https://h/p', 'port', '12ab'],
  ['https://h/p', 'username', 'us er@'], ['https://h/p', 'password', 'p:w'], ['file:///x', 'username', 'u'],
  ['https://h/p', 'href', 'http://new/path?x=1'], ['data:text/plain,x #f', 'hash', ''], ['https://h/p', 'search', 'a\tb=c\n&d'], ['https://h/p', 'search', '\t?x=1'], ['https://h/p', 'search', '??a'],
];
test(`URL setters match Node for ${SETTER_CASES.length} cases`, () => {
  const setThere = fn(`(h, k, v) => { const u = new URL(h); u[k] = v; return u.href + ' ' + u.searchParams; }`);
  for (const [h, k, v] of SETTER_CASES) {
    const u = new URL(h); u[k] = v;
    assert.equal(setThere(h, k, v), u.href + ' ' + u.searchParams, `${h} .${k} = ${JSON.stringify(v)}`);
  }
  assert.throws(() => run('new URL("http://x").href = "nope"'), { name: 'TypeError' });
});

test('URL.searchParams is live-linked both ways', () => {
  const out = run(`(() => {
    const u = new URL('https://h/p?a=1&b=2#f');
    const sp = u.searchParams, log = [];
    sp.append('c', 'x y'); log.push(u.href);
    sp.delete('a'); log.push(u.search);
    u.search = '?z=9'; log.push(sp.get('z'), sp.has('b'), sp === u.searchParams);
    u.href = 'https://h/?k=v'; log.push(sp.get('k'));
    sp.delete('k'); log.push(u.href);
    sp.set('s', 'ü&='); sp.sort(); log.push(u.href);
    return JSON.stringify(log);
  })()`);
  assert.deepEqual(JSON.parse(out), ['https://h/p?a=1&b=2&c=x+y#f', '?b=2&c=x+y', '9', false, true, 'v', 'https://h/', 'https://h/?s=%C3%BC%26%3D']);
});

// ------------------------------------------------------------------ URLSearchParams
const QS_CASES = [
  '', '?', '?a=1&b=2', 'a=1&a=2&b', 'a+b=c+d', 'a%20b=c%2Bd', '=x&y=&&z', 'q=%zz%4', 'ü=€&x=%F0%9F%98%80',
  'a=b=c', '%FF%FE=1', '&&&', 'k=v;w', "sp ace='quote'&t=~!*()", '?%3F=%3D',
];
test(`URLSearchParams string parsing/serialising matches Node for ${QS_CASES.length} inputs`, () => {
  const there = fn('(s) => { const p = new URLSearchParams(s); return JSON.stringify([p.toString(), [...p], p.size]); }');
  for (const s of QS_CASES) {
    const p = new URLSearchParams(s);
    assert.equal(there(s), JSON.stringify([p.toString(), [...p], p.size]), s);
  }
});

test('URLSearchParams constructors and methods', () => {
  const res = JSON.parse(run(`JSON.stringify((() => {
    const out = [];
    out.push(new URLSearchParams({ a: '1', 'b c': 'd&e', n: 2 }).toString());
    out.push(new URLSearchParams([['x', '1'], ['x', '2'], ['y', 'ü']]).toString());
    out.push(new URLSearchParams(new Map([['m', 'v']])).toString());
    out.push(new URLSearchParams(new URLSearchParams('a=1&b=2')).toString());
    out.push(new URLSearchParams(null).toString());
    out.push(new URLSearchParams().toString());
    try { new URLSearchParams([['a']]); out.push('no throw'); } catch (e) { out.push(e.name); }
    const p = new URLSearchParams('z=3&a=1&b=2&a=0&c=\u{1F600}');
    out.push(p.get('a'), p.get('nope'), p.getAll('a'), p.has('b'), p.has('a', '0'), p.has('a', '9'));
    p.set('a', 'new'); out.push(p.toString());
    p.append('sp', 'a b+c'); out.push(p.toString());
    p.delete('b'); p.delete('sp', 'nope'); out.push(p.toString(), p.size);
    p.sort(); out.push(p.toString());
    const fe = []; p.forEach((v, k, o) => fe.push(k + '=' + v + (o === p))); out.push(fe);
    out.push([...p.keys()], [...p.values()], [...p.entries()], [...p]);
    out.push(Object.prototype.toString.call(p), typeof p[Symbol.iterator]);
    out.push(new URLSearchParams('a=\uD800').toString());
    out.push(new URLSearchParams('%FFü=1').toString()); // per spec: bytes FF C3 BC decode to U+FFFD + ü (Node 20 gives two U+FFFD)
    return out;
  })())`));
  const p = new URLSearchParams('z=3&a=1&b=2&a=0&c=\u{1F600}');
  const exp = [
    new URLSearchParams({ a: '1', 'b c': 'd&e', n: 2 }).toString(),
    new URLSearchParams([['x', '1'], ['x', '2'], ['y', 'ü']]).toString(), 'm=v', 'a=1&b=2',
    'null=', // WebIDL/browsers stringify null (Node 20 gives '')
    '', 'TypeError',
    p.get('a'), p.get('nope'), p.getAll('a'), p.has('b'), p.has('a', '0'), p.has('a', '9'),
  ];
  p.set('a', 'new'); exp.push(p.toString());
  p.append('sp', 'a b+c'); exp.push(p.toString());
  p.delete('b'); p.delete('sp', 'nope'); exp.push(p.toString(), p.size);
  p.sort(); exp.push(p.toString());
  const fe = []; p.forEach((v, k, o) => fe.push(k + '=' + v + (o === p))); exp.push(fe);
  exp.push([...p.keys()], [...p.values()], [...p.entries()], [...p], '[object URLSearchParams]', 'function');
  exp.push(new URLSearchParams('a=\uD800').toString());
  exp.push('%EF%BF%BD%C3%BC=1');
  assert.deepEqual(res, exp);
});

// ------------------------------------------------------------------ TextEncoder / TextDecoder
const STRINGS = ['', 'hello', 'héllo wörld', '€', '\u{1F600}', 'a\uD800b', '\uDC00', '\uD83D', 'x\uD83D\uDE00y\uDE00',
  '\0\x7f\x80\u07ff\u0800\uffff', '日本語テキスト', 'mixed ascii ✓ and 🎉 emoji'];
test(`TextEncoder matches Node for ${STRINGS.length} strings`, () => {
  const enc = fn('(s) => { const e = new TextEncoder(); return [e.encoding, Object.prototype.toString.call(e.encode(s)), Array.from(e.encode(s))]; }');
  for (const s of STRINGS) {
    const [encoding, tag, bytes] = plain(enc(s));
    assert.equal(encoding, 'utf-8');
    assert.equal(tag, '[object Uint8Array]');
    assert.deepEqual(bytes, Array.from(new TextEncoder().encode(s)), JSON.stringify(s));
  }
  assert.deepEqual(plain(run('Array.from(new TextEncoder().encode())')), []);
  const into = fn('(s, n) => { const d = new Uint8Array(n); const r = new TextEncoder().encodeInto(s, d); return [r.read, r.written, Array.from(d)]; }');
  for (const [s, n] of [['héllo', 3], ['\u{1F600}x', 3], ['\u{1F600}x', 5], ['abc', 10], ['a\uD800', 4], ['€€', 5]]) {
    const d = new Uint8Array(n), r = new TextEncoder().encodeInto(s, d);
    assert.deepEqual(plain(into(s, n)), [r.read, r.written, Array.from(d)], `${s}/${n}`);
  }
});

const BYTES = [[], [0x68, 0x69], [0xEF, 0xBB, 0xBF, 0x41], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80],
  [0xFF], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF0, 0x9F, 0x98], [0xE2, 0x82],
  [0x41, 0x80, 0x42], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xC3, 0x41], [0xF0, 0x9F, 0x41, 0x42], [0xEF, 0xBB, 0xBF]];
test(`TextDecoder matches Node for ${BYTES.length} byte sequences (replacement and fatal)`, () => {
  const dec = fn(`(bytes, fatal, ignoreBOM) => { try { return new TextDecoder('utf-8', { fatal, ignoreBOM }).decode(new Uint8Array(bytes)); } catch (e) { return 'throws ' + e.name; } }`);
  for (const b of BYTES) {
    for (const [fatal, ignoreBOM] of [[false, false], [true, false], [false, true]]) {
      let exp;
      try { exp = new TextDecoder('utf-8', { fatal, ignoreBOM }).decode(new Uint8Array(b)); } catch (e) { exp = 'throws ' + e.name; }
      assert.equal(dec(b, fatal, ignoreBOM), exp, `${b} fatal=${fatal} ignoreBOM=${ignoreBOM}`);
    }
  }
  const misc = JSON.parse(run(`JSON.stringify((() => {
    const d = new TextDecoder(), bytes = new TextEncoder().encode('€\u{1F600}');
    let s = ''; for (const b of bytes) s += d.decode(new Uint8Array([b]), { stream: true }); s += d.decode();
    const view = new DataView(new Uint8Array([0, 0x61, 0x62, 0]).buffer, 1, 2);
    const out = [s, d.encoding, d.fatal, d.ignoreBOM, new TextDecoder('UTF8').encoding, new TextDecoder().decode(view),
      new TextDecoder().decode(new Uint8Array([0x63, 0x64]).buffer), new TextDecoder().decode(new Uint16Array([0x6968]))];
    try { new TextDecoder('latin1'); } catch (e) { out.push(e.name); }
    try { new TextDecoder().decode('str'); } catch (e) { out.push(e.name); }
    return out;
  })())`));
  assert.deepEqual(misc, ['€\u{1F600}', 'utf-8', false, false, 'utf-8', 'ab', 'cd', 'hi', 'RangeError', 'TypeError']);
  // A Node-realm Uint8Array crosses into the context fine.
  assert.equal(fn('(b) => new TextDecoder().decode(b)')(Buffer.from('né')), 'né');
});

// ------------------------------------------------------------------ atob / btoa
const B64_CASES = ['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar', '\0\x01\xff\xfe', 'é', '€', 'Zm9v', 'Zm9vYg==', 'Zm9vYg=',
  'Zm9vYg', 'Zm9vY', ' Zm9v\tYmFy\n', 'Zm9v=', 'Zm=9v', '====', 'Z', 'ab$c', 'YQ', 'YR==', 'YQ===', '\f\r YQ=='];
test(`atob/btoa match Node for ${B64_CASES.length} inputs`, () => {
  const both = fn(`(s) => { const r = []; for (const f of [btoa, atob]) { try { r.push(f(s)); } catch (e) { r.push('throws ' + e.name + '/' + (e instanceof Error)); } } return r; }`);
  for (const s of B64_CASES) {
    const exp = [];
    for (const f of [btoa, atob]) { try { exp.push(f(s)); } catch (e) { exp.push('throws ' + e.name + '/true'); } }
    assert.deepEqual(plain(both(s)), exp, JSON.stringify(s));
  }
  assert.equal(run('(() => { try { btoa("€"); } catch (e) { return e.code + " " + (e instanceof DOMException); } })()'), '5 true');
  const big = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join('');
  assert.equal(fn('(s) => atob(btoa(s))')(big), big);
  assert.equal(fn('(s) => btoa(s)')(big), btoa(big));
});

// ------------------------------------------------------------------ structuredClone
const CLONE_CASES = [
  '1', '-0', 'NaN', '"str"', 'null', 'undefined', 'true', '123n', '[1, , 3]', '{ a: 1, b: [2, { c: 3 }], d: "x" }',
  'new Date(1700000000000)', '/a+b/gimsuy', 'new Map([[1, { a: 1 }], ["k", new Set([1, 2])]])', 'new Set(["a", { b: 1 }])',
  'new Uint8Array([1, 2, 3])', 'new Float64Array([1.5, -0, NaN])', 'new BigInt64Array([1n, -2n])',
  '(() => { const b = new ArrayBuffer(8); new Uint8Array(b).set([1,2,3,4,5,6,7,8]); return [new Uint16Array(b, 2, 2), new DataView(b, 1, 3), b]; })()',
  'new ArrayBuffer(4)', 'Object(false)', 'Object(42)', 'Object("s")', 'Object(5n)',
  'new Error("boom")', 'new TypeError("bad")', 'new RangeError("r")', 'new SyntaxError("s")', 'new URIError("u")',
  '(() => { const e = new Error("x"); e.name = "CustomError"; return e; })()', '(() => { const e = new Error(); return e; })()',
  '(() => { const o = { n: 1 }; o.self = o; o.arr = [o, o]; return o; })()',
  '(() => { const s = { shared: true }; return { a: s, b: s, c: [s] }; })()',
  '(() => { const m = new Map(); m.set(m, m); return m; })()',
  '(() => { class P { constructor() { this.x = 1; } get y() { return 2; } } return new P(); })()',
  '(() => { const a = [1, 2]; a.extra = "e"; return a; })()', '{ ["__proto__"]: { polluted: 1 } }',
  '(() => { const o = {}; Object.defineProperty(o, "hidden", { value: 1 }); o[Symbol("s")] = 2; o.v = 3; return o; })()',
];
test(`structuredClone matches Node for ${CLONE_CASES.length} values`, () => {
  for (const src of CLONE_CASES) {
    vm.runInContext(`globalThis.__mk = () => (${src});`, ctx);
    const there = fn('(d) => { const v = globalThis.__mk(); const c = structuredClone(v); return [d(c), c !== v || typeof v !== "object" || v === null]; }')(describeThere);
    const v = vm.runInThisContext(`(${src})`);
    assert.deepEqual(plain(there), [describeHere(structuredClone(v)), true], src);
  }
  run('delete globalThis.__mk');
});

test('structuredClone rejects functions/symbols/promises with DataCloneError and supports transfer', () => {
  const err = fn('(src) => { try { structuredClone(globalThis.__v); return "no throw"; } catch (e) { return e.name + "/" + e.code; } }');
  for (const src of ['() => 1', 'Symbol("s")', '{ f() {} }', '[Symbol.iterator]', 'Promise.resolve()', 'new WeakMap()']) {
    vm.runInContext(`globalThis.__v = ${src};`, ctx);
    assert.equal(err(), 'DataCloneError/25', src);
    assert.throws(() => structuredClone(vm.runInThisContext(`(${src})`)), { name: 'DataCloneError' });
  }
  assert.throws(() => run('structuredClone()'), { name: 'TypeError' });
  const tr = JSON.parse(run(`JSON.stringify((() => {
    const b = new Uint8Array([9, 8, 7]).buffer, c = structuredClone({ b }, { transfer: [b] });
    return [b.byteLength, Array.from(new Uint8Array(c.b))];
  })())`));
  // Detaches when the engine has ArrayBuffer.prototype.transfer (QuickJS-ng), copies otherwise (Node 20).
  const detaches = run('typeof ArrayBuffer.prototype.transfer === "function"');
  assert.deepEqual(tr, [detaches ? 0 : 3, [9, 8, 7]]);
});

// ------------------------------------------------------------------ timers
test('timers fire in (due, insertion) order on a virtual clock', () => {
  const out = JSON.parse(run(`JSON.stringify((() => {
    const log = [], fire = globalThis.__temper_internal.fireNextTimer;
    const drain = () => { let n = 0; while (fire()) if (++n > 1000) throw new Error('runaway'); return n; };
    const r = [fire(), __temper_internal.pendingTimers()];
    setTimeout(() => log.push('10'), 10); setTimeout(() => log.push('0'), 0);
    setTimeout(() => log.push('5'), 5); setTimeout(() => log.push('0b')); setTimeout(() => log.push('neg'), -7);
    r.push(__temper_internal.pendingTimers(), drain(), log.join(), __temper_internal.pendingTimers(), fire());
    log.length = 0;
    const a = setTimeout(() => log.push('cancelled'), 1), b = setTimeout((x, y) => log.push('args:' + x + y), 2, 'p', 'q');
    clearTimeout(a); clearTimeout(9999); clearTimeout(undefined);
    r.push(a > 0 && Number.isInteger(a) && b === a + 1, drain(), log.join());
    log.length = 0;
    setTimeout(() => { log.push('a@5'); setTimeout(() => log.push('c@5+0'), 0); setTimeout(() => log.push('d@15'), 10); }, 5);
    setTimeout(() => log.push('b@5'), 5); setTimeout(() => log.push('e@12'), 12);
    drain(); r.push(log.join());
    log.length = 0;
    let n = 0; const iv = setInterval((tag) => { log.push(tag + (++n)); if (n === 4) clearInterval(iv); }, 10, 'i');
    setTimeout(() => log.push('t25'), 25);
    r.push(drain(), log.join(), __temper_internal.pendingTimers());
    log.length = 0;
    let z = 0; const iz = setInterval(() => { if (++z === 3) clearInterval(iz); }, 0);
    r.push(drain(), z);
    return r;
  })())`));
  assert.deepEqual(out, [false, 0, 5, 5, '0,0b,neg,5,10', 0, false, true, 1, 'args:pq',
    'a@5,b@5,c@5+0,e@12,d@15', 5, 'i1,i2,t25,i3,i4', 0, 3, 3]);
});

test('timer errors: callback exceptions propagate, string callbacks and overflow throw', () => {
  run('globalThis.__log = []; setTimeout(() => { throw new Error("boom"); }, 1); setTimeout(() => __log.push("after"), 2);');
  assert.throws(() => run('__temper_internal.fireNextTimer()'), /boom/);
  assert.equal(run('__temper_internal.fireNextTimer()'), true);
  assert.deepEqual(plain(run('__log.slice()')), ['after']);
  assert.throws(() => run('setTimeout("alert(1)", 0)'), { name: 'TypeError' });
  assert.throws(() => run('setInterval(null, 0)'), { name: 'TypeError' });
  const cap = run(`(() => {
    const ids = []; for (let i = 0; i < 10000; i++) ids.push(setTimeout(() => {}, i));
    let err = 'none'; try { setTimeout(() => {}, 1); } catch (e) { err = e.name; }
    const pending = __temper_internal.pendingTimers(); ids.forEach(clearTimeout);
    return [err, pending, __temper_internal.pendingTimers(), new Set(ids).size].join();
  })()`);
  assert.equal(cap, 'RangeError,10000,0,10000');
  // Debounce-style set/clear churn never hits the cap and leaves nothing queued.
  assert.equal(run(`(() => { let id; for (let i = 0; i < 50000; i++) { clearTimeout(id); id = setTimeout(() => {}, 5); }
    const p = __temper_internal.pendingTimers(); clearTimeout(id); return [p, __temper_internal.pendingTimers(), __temper_internal.fireNextTimer()].join(); })()`), '1,0,false');
  assert.throws(() => run('"use strict"; __temper_internal.fireNextTimer = null'), { name: 'TypeError' });
  assert.equal(run('delete globalThis.__temper_internal.fireNextTimer'), false);
});

test('queueMicrotask runs after the current job, before timers', async () => {
  run('globalThis.__mlog = []; setTimeout(() => __mlog.push("timer"), 0); queueMicrotask(() => __mlog.push("micro")); __mlog.push("sync");');
  assert.deepEqual(plain(run('__mlog.slice()')), ['sync']);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(plain(run('__mlog.slice()')), ['sync', 'micro']);
  run('__temper_internal.fireNextTimer()');
  assert.deepEqual(plain(run('__mlog.slice()')), ['sync', 'micro', 'timer']);
  assert.throws(() => run('queueMicrotask(1)'), { name: 'TypeError' });
});

// ------------------------------------------------------------------ result check (issue 14)
test('__temper_internal.unserializable names the BigInt or cycle JSON.stringify throws for, and where', () => {
  const cases = [
    ['10n', 'a BigInt'],
    ['({ total: { value: 5n } })', 'a BigInt at $.total.value'],
    ['[1, [2, 3n]]', 'a BigInt at $[1][1]'],
    ['({ "a b": 1n })', 'a BigInt at $["a b"]'],
    ['(() => { const o = { list: [1] }; o.list.push(o); return o; })()', 'a cyclic value at $.list[1]'],
    ['(() => { const a = []; a.push(a); return a; })()', 'a cyclic value at $[0]'],
    ['(() => { const s = { v: 1 }; return { x: s, y: [s, s] }; })()', undefined], // shared, not cyclic
    ['({ a: 1, b: "x", c: null, d: [true] })', undefined],
    ['({ get boom() { throw new Error("getter"); } })', undefined], // the tool's own error
  ];
  for (const [src, expected] of cases) assert.equal(run(`__temper_internal.unserializable(${src})`), expected, src);
});
