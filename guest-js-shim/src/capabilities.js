// Temper capabilities: fetch (with Headers, Request, Response), crypto and a
// read-only fs, built over the native `__temper_host` the shim installs. The
// host object is captured here and removed from globalThis. Every host call is
// synchronous and throws a TypeError whose message is the host's reason (e.g.
// "capability not granted: fetch"); those messages are passed on unchanged.
// Evaluated after the prelude (uses its TextEncoder/TextDecoder, URL,
// URLSearchParams, DOMException); must not use eval/Function.
(function () {
  'use strict';
  const G = globalThis;
  const host = G.__temper_host;
  delete G.__temper_host; // throws (strict mode) if the shim ever makes it non-configurable

  const def = (name, value) => Object.defineProperty(G, name, { value, writable: true, enumerable: false, configurable: true });
  const method = (obj, name, value) => Object.defineProperty(obj, name, { value, writable: true, enumerable: true, configurable: true });
  const tag = (C, name) => Object.defineProperty(C.prototype, Symbol.toStringTag, { value: name, configurable: true });
  const need = (args, n, what) => {
    if (args.length < n) throw new TypeError(`${what}: ${n} argument${n > 1 ? 's' : ''} required, but only ${args.length} present`);
  };
  const apply = Reflect.apply;
  const later = fn => { Promise.resolve().then(fn); };
  const URLC = G.URL, USP = G.URLSearchParams, DOMExc = G.DOMException;
  const textEncoder = new G.TextEncoder();
  const specDecoder = new G.TextDecoder(); // fetch's "UTF-8 decode" strips a BOM
  const nodeDecoder = new G.TextDecoder('utf-8', { ignoreBOM: true }); // Buffer#toString keeps it

  // ---------------------------------------------------------------- host calls
  const DENIED = { fetch: 'fetch', hash: 'crypto', hmac: 'crypto', randomBytes: 'crypto', readFile: 'fs.readFile' };
  const native = {};
  for (const k of Object.keys(DENIED)) native[k] = host != null && typeof host[k] === 'function' ? host[k] : null;
  const messageOf = e => (e !== null && typeof e === 'object' && 'message' in e ? String(e.message) : String(e));
  // Capability refusals: the error objects made here for a refused capability,
  // mapped to its name. The shim asks (through the internal deniedCapability)
  // whether the value execute() threw is one of them, and reports a typed
  // denial only then: a tool cannot forge an entry, and an error it makes
  // itself with the same words is its own error.
  const REFUSALS = new WeakMap(), refusalOf = WeakMap.prototype.get, markRefusal = WeakMap.prototype.set;
  const refused = e => (e !== null && (typeof e === 'object' || typeof e === 'function') ? apply(refusalOf, REFUSALS, [e]) : undefined);
  function denial(capability, err) {
    const e = err || new TypeError('capability not granted: ' + capability);
    e.code = 'ECAPABILITY';
    apply(markRefusal, REFUSALS, [e, capability]);
    return e;
  }
  Object.defineProperty(G.__temper_internal, 'deniedCapability', {
    value: function (v) { return refused(v); }, writable: false, enumerable: true, configurable: false,
  });
  // Calls the host; any failure becomes a TypeError of this realm with the
  // host's message (and its Node-style code, when the native side set one).
  // A refusal is known by its code (fs.readFile, decided in the guest: no
  // preopened directory) or by the host's fixed refusal text for the very
  // capability called (fetch, crypto: the host decides and records it).
  function callHost(name, ...args) {
    const f = native[name];
    if (!f) throw denial(DENIED[name]);
    try { return apply(f, host, args); } catch (e) {
      const message = messageOf(e), code = e !== null && typeof e === 'object' ? e.code : undefined;
      if (code === 'ECAPABILITY' || message === 'capability not granted: ' + DENIED[name]) throw denial(DENIED[name]);
      const err = new TypeError(message);
      if (typeof code === 'string') err.code = code;
      throw err;
    }
  }

  // ---------------------------------------------------------------- bytes and encodings
  const abByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
  const taTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
  const isArrayBuffer = v => {
    if (v === null || typeof v !== 'object') return false;
    try { abByteLength.call(v); return true; } catch (_) { return false; }
  };
  // ArrayBuffer / TypedArray / DataView -> Uint8Array over the same memory, else null.
  const viewBytes = v => (ArrayBuffer.isView(v) ? new Uint8Array(v.buffer, v.byteOffset, v.byteLength) : isArrayBuffer(v) ? new Uint8Array(v) : null);
  function concat(chunks) {
    let n = 0;
    for (const c of chunks) n += c.length;
    const out = new Uint8Array(n);
    n = 0;
    for (const c of chunks) { out.set(c, n); n += c.length; }
    return out;
  }

  const HEX2 = [];
  for (let i = 0; i < 256; i++) HEX2[i] = (i < 16 ? '0' : '') + i.toString(16);
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const B64V = new Int8Array(128).fill(-1);
  for (let i = 0; i < 64; i++) B64V[B64.charCodeAt(i)] = i;
  B64V[45] = 62; B64V[95] = 63; // '-' and '_' (base64url), accepted like Node
  const CHUNK = 8192;

  function toHex(b) {
    const parts = [];
    for (let i = 0; i < b.length; i += CHUNK) {
      let s = '';
      for (let j = i, end = Math.min(b.length, i + CHUNK); j < end; j++) s += HEX2[b[j]];
      parts.push(s);
    }
    return parts.join('');
  }
  function toBase64(b, url) {
    const abc = url ? B64.slice(0, 62) + '-_' : B64, parts = [];
    for (let i = 0; i < b.length; i += CHUNK * 3) {
      let s = '';
      for (let j = i, end = Math.min(b.length, i + CHUNK * 3); j < end; j += 3) {
        const n = (b[j] << 16) | ((j + 1 < end ? b[j + 1] : 0) << 8) | (j + 2 < end ? b[j + 2] : 0);
        s += abc[n >> 18] + abc[(n >> 12) & 63] + (j + 1 < end ? abc[(n >> 6) & 63] : url ? '' : '=') + (j + 2 < end ? abc[n & 63] : url ? '' : '=');
      }
      parts.push(s);
    }
    return parts.join('');
  }
  function toLatin1(b, mask) {
    const parts = [];
    for (let i = 0; i < b.length; i += CHUNK) {
      let c = b.subarray(i, i + CHUNK);
      if (mask) c = c.map(x => x & 0x7F);
      parts.push(String.fromCharCode.apply(null, c));
    }
    return parts.join('');
  }
  function toUtf16le(b) {
    const u = new Uint16Array(b.length >> 1);
    for (let i = 0; i < u.length; i++) u[i] = b[2 * i] | (b[2 * i + 1] << 8);
    const parts = [];
    for (let i = 0; i < u.length; i += CHUNK) parts.push(String.fromCharCode.apply(null, u.subarray(i, i + CHUNK)));
    return parts.join('');
  }
  // Lenient decoders, like Node's Buffer.from(string, encoding).
  const nibble = c => (c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1);
  function fromHex(s) {
    const out = new Uint8Array(s.length >> 1);
    let i = 0;
    for (; i < out.length; i++) {
      const hi = nibble(s.charCodeAt(2 * i)), lo = nibble(s.charCodeAt(2 * i + 1));
      if (hi < 0 || lo < 0) break; // stops at the first invalid pair
      out[i] = (hi << 4) | lo;
    }
    return out.slice(0, i);
  }
  function fromBase64(s) {
    const out = new Uint8Array(((s.length * 3) >> 2) + 3);
    let acc = 0, bits = 0, j = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 61) break; // '='
      const v = c < 128 ? B64V[c] : -1;
      if (v < 0) continue; // whitespace and junk are skipped
      acc = ((acc << 6) | v) & 0xFFFFFF; bits += 6;
      if (bits >= 8) { bits -= 8; out[j++] = (acc >> bits) & 255; }
    }
    return out.slice(0, j);
  }
  function fromLatin1(s) {
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function fromUtf16le(s) {
    const out = new Uint8Array(s.length * 2);
    for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); out[2 * i] = c & 255; out[2 * i + 1] = c >> 8; }
    return out;
  }

  const ENCODINGS = { utf8: 'utf8', 'utf-8': 'utf8', hex: 'hex', base64: 'base64', base64url: 'base64url', latin1: 'latin1',
    binary: 'latin1', ascii: 'ascii', utf16le: 'utf16le', 'utf-16le': 'utf16le', ucs2: 'utf16le', 'ucs-2': 'utf16le' };
  function normEncoding(enc) {
    if (enc === undefined || enc === null) return 'utf8';
    const e = ENCODINGS[String(enc).toLowerCase()];
    if (!e) { const err = new TypeError(`Unknown encoding: ${String(enc)}`); err.code = 'ERR_UNKNOWN_ENCODING'; throw err; }
    return e;
  }
  function encodeString(s, enc) {
    switch (normEncoding(enc)) {
      case 'utf8': return textEncoder.encode(s);
      case 'hex': return fromHex(s);
      case 'base64': case 'base64url': return fromBase64(s);
      case 'utf16le': return fromUtf16le(s);
      default: return fromLatin1(s); // latin1, ascii
    }
  }
  function decodeBytes(b, enc) {
    switch (normEncoding(enc)) {
      case 'utf8': return nodeDecoder.decode(b);
      case 'hex': return toHex(b);
      case 'base64': return toBase64(b, false);
      case 'base64url': return toBase64(b, true);
      case 'utf16le': return toUtf16le(b);
      case 'ascii': return toLatin1(b, true);
      default: return toLatin1(b, false);
    }
  }
  // There is no Buffer: byte results are Uint8Arrays given an own Node-like
  // toString(encoding = 'utf8') so `digest().toString('hex')` and
  // `readFileSync(p).toString()` behave as they do on a Buffer.
  function bufferToString(encoding) { return decodeBytes(this, encoding === undefined ? 'utf8' : encoding); }
  const nodeBytes = u8 => Object.defineProperty(u8, 'toString', { value: bufferToString, writable: true, configurable: true });

  // ---------------------------------------------------------------- Headers
  const HS = new WeakMap(); // Headers -> { list: [[lowercase name, value]], immutable }
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  function hState(h) {
    const st = HS.get(h);
    if (!st) throw new TypeError('Illegal invocation');
    return st;
  }
  function hName(name, what) {
    const n = String(name);
    if (!TOKEN.test(n)) throw new TypeError(`${what}: "${n}" is an invalid header name.`);
    return n.toLowerCase();
  }
  function hValue(value, what) {
    const v = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
    if (/[\0\r\n]|[^\x00-\xFF]/.test(v)) throw new TypeError(`${what}: "${v}" is an invalid header value.`);
    return v;
  }
  function hWritable(h, what) {
    const st = hState(h);
    if (st.immutable) throw new TypeError(`${what}: headers are immutable`);
    return st;
  }
  // The spec's "sort and combine": by name, values joined with ", " (set-cookie kept apart).
  function sortedEntries(st) {
    const names = Array.from(new Set(st.list.map(p => p[0]))).sort(), out = [];
    for (const n of names) {
      const values = st.list.filter(p => p[0] === n).map(p => p[1]);
      if (n === 'set-cookie') for (const v of values) out.push([n, v]);
      else out.push([n, values.join(', ')]);
    }
    return out;
  }
  function fillHeaders(st, init) {
    if (init === undefined || init === null) return;
    if (typeof init !== 'object' && typeof init !== 'function') throw new TypeError('Headers: init must be an object, an array of pairs or a Headers');
    const src = HS.get(init);
    if (src) { for (const p of src.list) st.list.push([p[0], p[1]]); return; }
    if (typeof init[Symbol.iterator] === 'function') {
      for (const pair of init) {
        if (pair === null || typeof pair !== 'object' || typeof pair[Symbol.iterator] !== 'function') throw new TypeError('Headers: each header must be a [name, value] pair');
        const p = Array.from(pair);
        if (p.length !== 2) throw new TypeError('Headers: each header must be a [name, value] pair');
        st.list.push([hName(p[0], 'Headers'), hValue(p[1], 'Headers')]);
      }
      return;
    }
    for (const k of Object.keys(init)) st.list.push([hName(k, 'Headers'), hValue(init[k], 'Headers')]);
  }

  class Headers {
    constructor(init) {
      const st = { list: [], immutable: false };
      fillHeaders(st, init);
      HS.set(this, st);
    }
    append(name, value) {
      need(arguments, 2, 'Headers.append');
      const st = hWritable(this, 'Headers.append');
      st.list.push([hName(name, 'Headers.append'), hValue(value, 'Headers.append')]);
    }
    delete(name) {
      need(arguments, 1, 'Headers.delete');
      const st = hWritable(this, 'Headers.delete'), n = hName(name, 'Headers.delete');
      st.list = st.list.filter(p => p[0] !== n);
    }
    get(name) {
      need(arguments, 1, 'Headers.get');
      const n = hName(name, 'Headers.get'), values = hState(this).list.filter(p => p[0] === n).map(p => p[1]);
      return values.length ? values.join(', ') : null;
    }
    getSetCookie() { return hState(this).list.filter(p => p[0] === 'set-cookie').map(p => p[1]); }
    has(name) {
      need(arguments, 1, 'Headers.has');
      const n = hName(name, 'Headers.has');
      return hState(this).list.some(p => p[0] === n);
    }
    set(name, value) {
      need(arguments, 2, 'Headers.set');
      const st = hWritable(this, 'Headers.set'), n = hName(name, 'Headers.set'), v = hValue(value, 'Headers.set');
      const i = st.list.findIndex(p => p[0] === n);
      if (i < 0) st.list.push([n, v]);
      else { st.list[i] = [n, v]; st.list = st.list.filter((p, j) => j <= i || p[0] !== n); }
    }
    forEach(callback, thisArg) {
      if (typeof callback !== 'function') throw new TypeError('Headers.forEach: callback is not a function');
      for (const [n, v] of sortedEntries(hState(this))) callback.call(thisArg, v, n, this);
    }
    entries() { return sortedEntries(hState(this))[Symbol.iterator](); }
    keys() { return sortedEntries(hState(this)).map(p => p[0])[Symbol.iterator](); }
    values() { return sortedEntries(hState(this)).map(p => p[1])[Symbol.iterator](); }
  }
  Object.defineProperty(Headers.prototype, Symbol.iterator, { value: Headers.prototype.entries, writable: true, configurable: true });
  tag(Headers, 'Headers');
  const withType = (headers, type) => { const st = HS.get(headers); if (type && !st.list.some(p => p[0] === 'content-type')) st.list.push(['content-type', type]); };

  // ---------------------------------------------------------------- bodies (shared by Request and Response)
  const ST = new WeakMap(); // Request/Response -> state; body: Uint8Array | null, used: boolean
  function state(obj, kind) {
    const st = ST.get(obj);
    if (!st || st.kind !== kind) throw new TypeError('Illegal invocation');
    return st;
  }
  // BodyInit -> { bytes, type }: strings are UTF-8, URLSearchParams form-encoded,
  // buffers copied; anything else is stringified, as browsers do.
  function extractBody(body) {
    if (body === undefined || body === null) return null;
    if (typeof body === 'string') return { bytes: textEncoder.encode(body), type: 'text/plain;charset=UTF-8' };
    if (body instanceof USP) return { bytes: textEncoder.encode(body.toString()), type: 'application/x-www-form-urlencoded;charset=UTF-8' };
    const b = viewBytes(body);
    if (b) return { bytes: b.slice(), type: null };
    return { bytes: textEncoder.encode(String(body)), type: 'text/plain;charset=UTF-8' };
  }
  // Takes the body once; a null body reads as empty any number of times.
  function consume(obj, what) {
    const st = ST.get(obj);
    if (!st) throw new TypeError('Illegal invocation');
    if (st.used) throw new TypeError(`${what}: Body is unusable: Body has already been read`);
    if (st.body === null) return new Uint8Array(0);
    const b = st.body;
    st.used = true; st.body = new Uint8Array(0); // this reader owns b now
    return b;
  }
  const bodyMixin = {
    async arrayBuffer() {
      const b = consume(this, 'arrayBuffer');
      const whole = b.byteOffset === 0 && b.byteLength === abByteLength.call(b.buffer) && b.buffer instanceof ArrayBuffer;
      return whole ? b.buffer : b.slice().buffer;
    },
    async bytes() { return consume(this, 'bytes'); },
    async text() { return specDecoder.decode(consume(this, 'text')); },
    async json() { return JSON.parse(specDecoder.decode(consume(this, 'json'))); },
  };
  function cloneState(st, what) {
    if (st.used) throw new TypeError(`${what}: Body has already been consumed.`);
    const headers = new Headers(st.headers);
    HS.get(headers).immutable = HS.get(st.headers).immutable;
    return Object.assign({}, st, { headers, body: st.body === null ? null : st.body.slice() });
  }

  // ---------------------------------------------------------------- Request
  const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
  const REDIRECTS = ['follow', 'error', 'manual'];
  function normMethod(m, what) {
    const s = String(m).toUpperCase();
    if (!METHODS.includes(s)) throw new TypeError(`${what}: '${String(m)}' is not a supported HTTP method (supported: ${METHODS.join(', ')})`);
    return s;
  }
  // Fast path for the common plain absolute http(s) URL, whose WHATWG
  // serialization is the input itself (plus a `/` for an empty path):
  // the JS URL parser costs ~0.5 ms per URL in QuickJS. Anything unusual
  // (userinfo, numeric or trailing-dot hosts, default ports, dot segments,
  // characters that get percent-encoded) takes the full parser. The host
  // parses the URL again with the WHATWG `url` crate for its policy checks.
  const SIMPLE_URL = /^(https?):\/\/(?:[a-z0-9-]+\.)*[a-z][a-z0-9-]*(?::([0-9]{1,5}))?(\/[A-Za-z0-9\-._~!$&()*+,;=:@\/%?]*)?$/;
  function fastHref(s) {
    const m = SIMPLE_URL.exec(s);
    if (!m) return null;
    const [, scheme, port, path] = m;
    if (port !== undefined && (port === (scheme === 'http' ? '80' : '443') || port[0] === '0' || Number(port) > 65535)) return null;
    if (path !== undefined && (/\/\.\.?(?:[\/?]|$)/.test(path) || /%(?![0-9A-Fa-f]{2})/.test(path) || /\/%2e/i.test(path))) return null;
    return path === undefined ? s + '/' : s;
  }

  // Returns [href, raw]: the WHATWG serialization (Request#url) and the
  // string exactly as the tool gave it, which is what the host is sent.
  // This parse serves the JS API only (TypeError for what cannot be a
  // Request URL); every policy decision is the host's, on the raw string.
  function parseRequestURL(input, what) {
    const s = String(input);
    const fast = typeof input === 'string' ? fastHref(s) : null;
    if (fast !== null) return [fast, s];
    let u;
    try { u = new URLC(s); } catch (_) { throw new TypeError(`${what}: Failed to parse URL from ${s}`); }
    if (u.username !== '' || u.password !== '') throw new TypeError(`${what}: Request cannot be constructed from a URL that includes credentials: ${s}`);
    return [u.href, s];
  }

  class Request {
    constructor(input, init) {
      need(arguments, 1, 'Request');
      const o = init === undefined || init === null ? {} : init, src = ST.get(input);
      let url, raw, meth = 'GET', headers, body = null, redirect = 'follow';
      if (src && src.kind === 'request') {
        if (src.used) throw new TypeError('Request: Cannot construct a Request with a Request object that has already been used.');
        ({ url, raw, method: meth, headers, body, redirect } = src);
      } else if (input !== null && typeof input === 'object' && !(input instanceof URLC) && typeof input.url === 'string') {
        [url, raw] = parseRequestURL(input.url, 'Request'); // a Request-like { url, method?, headers? }
        if (input.method !== undefined) meth = input.method;
        headers = input.headers;
      } else [url, raw] = parseRequestURL(input, 'Request');
      if (o.method !== undefined) meth = o.method;
      meth = normMethod(meth, 'Request');
      if (o.redirect !== undefined) {
        redirect = String(o.redirect);
        if (!REDIRECTS.includes(redirect)) throw new TypeError(`Request: '${redirect}' is not a valid redirect mode (follow, error, manual)`);
      }
      const h = new Headers(o.headers !== undefined ? o.headers : headers);
      let fromInput = body !== null;
      if (o.body !== undefined && o.body !== null) {
        const ex = extractBody(o.body);
        body = ex.bytes; fromInput = false;
        withType(h, ex.type);
      }
      if (body !== null && (meth === 'GET' || meth === 'HEAD')) throw new TypeError('Request with GET/HEAD method cannot have body.');
      if (fromInput) src.used = true; // the body moves to the new Request
      ST.set(this, { kind: 'request', url, raw, method: meth, headers: h, body, used: false, redirect });
    }
    get url() { return state(this, 'request').url; }
    get method() { return state(this, 'request').method; }
    get headers() { return state(this, 'request').headers; }
    get redirect() { return state(this, 'request').redirect; }
    get bodyUsed() { return state(this, 'request').used; }
    clone() {
      const c = Object.create(Object.getPrototypeOf(this));
      ST.set(c, cloneState(state(this, 'request'), 'Request.clone'));
      return c;
    }
  }
  tag(Request, 'Request');

  // ---------------------------------------------------------------- Response
  const NULL_BODY = [101, 103, 204, 205, 304];
  const REDIRECT_STATUS = [301, 302, 303, 307, 308];
  function makeResponse(st) {
    const r = Object.create(Response.prototype);
    ST.set(r, Object.assign({ kind: 'response', used: false }, st));
    return r;
  }
  const immutableHeaders = h => { HS.get(h).immutable = true; return h; };

  class Response {
    constructor(body = null, init = undefined) {
      const o = init === undefined || init === null ? {} : init;
      const status = o.status === undefined ? 200 : Number(o.status);
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        throw new RangeError(`Response: The status provided (${String(o.status)}) is outside the range [200, 599].`);
      }
      const statusText = o.statusText === undefined ? '' : String(o.statusText);
      if (/[\r\n]|[^\x00-\xFF]/.test(statusText)) throw new TypeError('Response: Invalid statusText');
      const headers = new Headers(o.headers);
      const ex = extractBody(body);
      if (ex && NULL_BODY.includes(status)) throw new TypeError(`Response: Response with null body status ${status} cannot have body`);
      if (ex) withType(headers, ex.type);
      ST.set(this, { kind: 'response', type: 'default', url: '', redirected: false, status, statusText, headers, body: ex ? ex.bytes : null, used: false });
    }
    static json(data, init) {
      const s = JSON.stringify(data);
      if (s === undefined) throw new TypeError('Response.json: The data is not JSON serializable');
      const r = new Response(textEncoder.encode(s), init);
      withType(state(r, 'response').headers, 'application/json');
      return r;
    }
    static error() {
      return makeResponse({ type: 'error', url: '', redirected: false, status: 0, statusText: '', headers: immutableHeaders(new Headers()), body: null });
    }
    static redirect(url, status = 302) {
      const href = new URLC(String(url)).href, s = Number(status);
      if (!REDIRECT_STATUS.includes(s)) throw new RangeError(`Response.redirect: Invalid status code ${String(status)}`);
      const headers = immutableHeaders(new Headers([['location', href]]));
      return makeResponse({ type: 'default', url: '', redirected: false, status: s, statusText: '', headers, body: null });
    }
    get type() { return state(this, 'response').type; }
    get url() { return state(this, 'response').url; }
    get redirected() { return state(this, 'response').redirected; }
    get status() { return state(this, 'response').status; }
    get ok() { const s = state(this, 'response').status; return s >= 200 && s <= 299; }
    get statusText() { return state(this, 'response').statusText; }
    get headers() { return state(this, 'response').headers; }
    get bodyUsed() { return state(this, 'response').used; }
    clone() {
      const c = Object.create(Object.getPrototypeOf(this));
      ST.set(c, cloneState(state(this, 'response'), 'Response.clone'));
      return c;
    }
  }
  tag(Response, 'Response');
  for (const C of [Request, Response]) {
    for (const k of Object.keys(bodyMixin)) Object.defineProperty(C.prototype, k, { value: bodyMixin[k], writable: true, configurable: true });
  }

  // ---------------------------------------------------------------- fetch
  // The host call is synchronous; the promise still settles in the microtask
  // queue. Every failure rejects with a TypeError (host reasons kept verbatim).
  function fetch(input, init) {
    const argc = arguments.length;
    return new Promise((resolve, reject) => {
      try {
        need({ length: argc }, 1, 'fetch');
        const req = new Request(input, init), st = ST.get(req);
        const body = st.body === null ? undefined : st.body;
        if (body) st.used = true;
        const hash = st.url.indexOf('#'), url = hash < 0 ? st.url : st.url.slice(0, hash);
        // The URL as the tool wrote it: the host checks it and drops the fragment.
        const r = callHost('fetch', st.method, st.raw, HS.get(st.headers).list.map(p => [p[0], p[1]]), body, st.redirect);
        const headers = new Headers();
        const hl = HS.get(headers).list;
        for (const p of Array.from(r.headers || [])) hl.push([String(p[0]).toLowerCase(), String(p[1])]);
        const status = Number(r.status);
        let bytes = viewBytes(r.body) || new Uint8Array(0);
        if (bytes.length === 0 && (NULL_BODY.includes(status) || st.method === 'HEAD')) bytes = null;
        resolve(makeResponse({ type: 'basic', url: r.url ? String(r.url) : url, redirected: !!r.redirected, status,
          statusText: r.statusText == null ? '' : String(r.statusText), headers: immutableHeaders(headers), body: bytes }));
      } catch (e) {
        reject(e instanceof Error ? e : new TypeError(messageOf(e)));
      }
    });
  }

  // ---------------------------------------------------------------- crypto
  const HASHES = ['md5', 'sha1', 'sha256', 'sha384', 'sha512'];
  function normAlg(alg, what) {
    if (typeof alg !== 'string') throw new TypeError(`${what}: The "algorithm" argument must be of type string`);
    const a = alg.toLowerCase().replace(/-/g, ''); // 'SHA-256', 'SHA256' -> 'sha256'
    if (!HASHES.includes(a)) throw new TypeError(`${what}: Digest method not supported: ${alg} (supported: ${HASHES.join(', ')})`);
    return a;
  }
  function inputBytes(data, encoding, what) {
    if (typeof data === 'string') return encodeString(data, encoding);
    const b = viewBytes(data);
    if (b) return b.slice();
    throw new TypeError(`${what}: The "data" argument must be of type string or an instance of Buffer, TypedArray, DataView or ArrayBuffer`);
  }
  const finalized = () => { const e = new Error('Digest already called'); e.code = 'ERR_CRYPTO_HASH_FINALIZED'; return e; };
  // The host hashes in one shot, so update() buffers its input until digest().
  const DS = new WeakMap(); // Hash/Hmac -> { alg, key (hmac) or null, chunks, done }
  function dState(h) {
    const st = DS.get(h);
    if (!st) throw new TypeError('Illegal invocation');
    return st;
  }
  class Hash {
    update(data, inputEncoding) {
      const st = dState(this);
      if (st.done) throw finalized();
      st.chunks.push(inputBytes(data, inputEncoding, 'update'));
      return this;
    }
    digest(outputEncoding) {
      const st = dState(this);
      if (st.done) throw finalized();
      st.done = true;
      const data = concat(st.chunks);
      st.chunks = [];
      const out = new Uint8Array(st.key ? callHost('hmac', st.alg, st.key, data) : callHost('hash', st.alg, data));
      return outputEncoding === undefined || outputEncoding === 'buffer' ? nodeBytes(out) : decodeBytes(out, outputEncoding);
    }
    copy() {
      const st = dState(this);
      if (st.done) throw finalized();
      const c = Object.create(Object.getPrototypeOf(this));
      DS.set(c, { alg: st.alg, key: st.key, chunks: st.chunks.slice(), done: false });
      return c;
    }
  }
  class Hmac extends Hash {}
  tag(Hash, 'Hash');
  tag(Hmac, 'Hmac');

  function createHash(alg) {
    need(arguments, 1, 'createHash');
    const h = new Hash();
    DS.set(h, { alg: normAlg(alg, 'createHash'), key: null, chunks: [], done: false });
    return h;
  }
  function createHmac(alg, key) {
    need(arguments, 2, 'createHmac');
    const a = normAlg(alg, 'createHmac');
    let k;
    if (typeof key === 'string') k = textEncoder.encode(key);
    else if ((k = viewBytes(key))) k = k.slice();
    else throw new TypeError('createHmac: The "key" argument must be of type string or an instance of Buffer, TypedArray, DataView or ArrayBuffer');
    const h = new Hmac();
    DS.set(h, { alg: a, key: k, chunks: [], done: false });
    return h;
  }
  const MAX_ENTROPY = 65536;
  function fillRandom(u8) {
    for (let off = 0; off < u8.length; off += MAX_ENTROPY) {
      const n = Math.min(MAX_ENTROPY, u8.length - off);
      const chunk = new Uint8Array(callHost('randomBytes', n));
      if (chunk.length !== n) throw new TypeError('randomBytes: the host returned the wrong number of bytes');
      u8.set(chunk, off);
    }
    return u8;
  }
  const INT_ARRAYS = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array'];
  function getRandomValues(array) {
    need(arguments, 1, 'crypto.getRandomValues');
    if (!ArrayBuffer.isView(array) || !INT_ARRAYS.includes(taTag.call(array))) {
      throw new TypeError('crypto.getRandomValues: The data argument must be an integer-type TypedArray');
    }
    if (array.byteLength > MAX_ENTROPY) {
      throw new DOMExc(`The ArrayBufferView's byte length (${array.byteLength}) exceeds the number of bytes of entropy available via this API (${MAX_ENTROPY})`, 'QuotaExceededError');
    }
    fillRandom(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
    return array;
  }
  function randomUUID() {
    const b = fillRandom(new Uint8Array(16));
    b[6] = (b[6] & 0x0F) | 0x40; // version 4
    b[8] = (b[8] & 0x3F) | 0x80; // RFC 4122 variant
    const h = toHex(b);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  // Returns a Uint8Array (not a Buffer) with an own toString(encoding).
  function randomBytes(size, callback) {
    need(arguments, 1, 'randomBytes');
    if (typeof size !== 'number') throw new TypeError(`randomBytes: The "size" argument must be of type number. Received type ${typeof size}`);
    if (!Number.isInteger(size) || size < 0 || size > 0x7FFFFFFF) {
      throw new RangeError(`randomBytes: The value of "size" is out of range. It must be >= 0 && <= 2147483647. Received ${size}`);
    }
    if (callback !== undefined && typeof callback !== 'function') throw new TypeError('randomBytes: The "callback" argument must be of type function');
    const out = nodeBytes(new Uint8Array(size));
    if (!callback) return fillRandom(out);
    let err = null;
    try { fillRandom(out); } catch (e) { err = e; }
    later(() => (err ? callback(err) : callback(null, out)));
  }

  const cryptoObj = G.crypto !== null && typeof G.crypto === 'object' ? G.crypto : {};
  method(cryptoObj, 'createHash', createHash);
  method(cryptoObj, 'createHmac', createHmac);
  method(cryptoObj, 'randomBytes', randomBytes);
  method(cryptoObj, 'randomUUID', randomUUID);
  method(cryptoObj, 'getHashes', function getHashes() { return HASHES.slice(); });
  if (typeof cryptoObj.getRandomValues !== 'function') method(cryptoObj, 'getRandomValues', getRandomValues);

  // ---------------------------------------------------------------- fs (read-only)
  const ERRNO = { EPERM: -1, ENOENT: -2, EIO: -5, EACCES: -13, EISDIR: -21, EFBIG: -27 };
  // Host failure -> Node-style Error. The code is the one the native side
  // set (ECAPABILITY: not granted; ERR_ACCESS_DENIED: outside the granted
  // directories, like Node's permission model), else the message's leading
  // errno name, else EIO. A refusal stays a refusal (see REFUSALS).
  function fsError(e, path) {
    const message = messageOf(e), given = e !== null && typeof e === 'object' ? e.code : undefined;
    const m = /^(E[A-Z0-9]+):/.exec(message);
    const code = typeof given === 'string' ? given : m ? m[1] : 'EIO';
    const err = new Error(message);
    if (ERRNO[code] !== undefined) err.errno = ERRNO[code];
    err.code = code;
    if (code === 'ERR_ACCESS_DENIED') { err.permission = 'FileSystemRead'; err.resource = path; }
    else if (code !== 'ECAPABILITY') err.syscall = 'open';
    err.path = path;
    return refused(e) !== undefined ? denial(refused(e), err) : err;
  }
  function argError(code, message) { const e = new TypeError(message); e.code = code; return e; }
  function toPath(p) {
    if (typeof p === 'string') {
      if (p.includes('\0')) throw argError('ERR_INVALID_ARG_VALUE', "The argument 'path' must be a string without null bytes");
      return p;
    }
    if (p instanceof URLC) {
      if (p.protocol !== 'file:') throw argError('ERR_INVALID_URL_SCHEME', 'The URL must be of scheme file');
      if (p.hostname !== '') throw argError('ERR_INVALID_FILE_URL_HOST', 'File URL host must be "localhost" or empty');
      if (/%2f/i.test(p.pathname)) throw argError('ERR_INVALID_FILE_URL_PATH', 'File URL path must not include encoded / characters');
      return decodeURIComponent(p.pathname);
    }
    const b = viewBytes(p);
    if (b && ArrayBuffer.isView(p)) return toPath(nodeDecoder.decode(b));
    throw argError('ERR_INVALID_ARG_TYPE', `The "path" argument must be of type string or an instance of Uint8Array or URL. Received ${p === null ? 'null' : typeof p}`);
  }
  // options: encoding string or { encoding, flag }; returns an encoding or null (bytes).
  function readEncoding(options) {
    if (options === undefined || options === null) return null;
    let enc = options;
    if (typeof options === 'object') {
      if (options.flag !== undefined && options.flag !== 'r') throw argError('ERR_INVALID_ARG_VALUE', `fs is read-only: flag '${String(options.flag)}' is not supported`);
      enc = options.encoding;
    } else if (typeof options !== 'string') {
      throw argError('ERR_INVALID_ARG_TYPE', 'The "options" argument must be of type string or an instance of Object');
    }
    return enc === undefined || enc === null || enc === 'buffer' ? null : normEncoding(enc);
  }
  function readNow(path, enc) {
    let bytes;
    try { bytes = viewBytes(callHost('readFile', path)); } catch (e) { throw fsError(e, path); }
    if (!bytes) throw fsError('EIO: the host returned no data', path);
    return enc === null ? nodeBytes(bytes) : decodeBytes(bytes, enc);
  }
  function readFileSync(path, options) { return readNow(toPath(path), readEncoding(options)); }
  async function readFilePromise(path, options) { return readNow(toPath(path), readEncoding(options)); }
  // With a callback, Node style (called from the microtask queue); without one,
  // a Promise (Node would throw ERR_INVALID_ARG_TYPE instead).
  function readFile(path, options, callback) {
    if (typeof options === 'function' && callback === undefined) { callback = options; options = undefined; }
    if (callback === undefined) return readFilePromise(path, options);
    if (typeof callback !== 'function') throw argError('ERR_INVALID_ARG_TYPE', 'The "cb" argument must be of type function');
    const p = toPath(path), enc = readEncoding(options); // argument errors throw synchronously, as in Node
    let err = null, data;
    try { data = readNow(p, enc); } catch (e) { err = e; }
    later(() => (err ? callback(err) : callback(null, data)));
  }
  const fs = {};
  method(fs, 'readFileSync', readFileSync);
  method(fs, 'readFile', readFile);
  method(fs, 'promises', {});
  method(fs.promises, 'readFile', function readFile(path, options) { return readFilePromise(path, options); });

  // ---------------------------------------------------------------- tools (code mode)
  // `await callTool(name, input)` and `await tools.NAME(input)`: the host runs
  // the tool in its own instance, if this tool was granted `tool:NAME`. A
  // refusal is a capability denial (ECAPABILITY, typed like fetch's); a
  // callee's failure an Error with code ETOOL, `tool` and the callee's message.
  const nativeCallTool = host != null && typeof host.callTool === 'function' ? host.callTool : null;
  const jsonStringify = JSON.stringify, jsonParse = JSON.parse;
  async function callTool(name, input) {
    if (typeof name !== 'string') throw new TypeError('callTool: the tool name must be a string');
    const text = jsonStringify(input === undefined ? {} : input);
    if (typeof text !== 'string') throw new TypeError(`callTool: the input of ${name} is not a JSON value`);
    if (!nativeCallTool) throw denial('tool:' + name);
    let out;
    try { out = apply(nativeCallTool, host, [name, text]); } catch (e) {
      const code = e !== null && typeof e === 'object' ? e.code : undefined;
      if (code === 'ECAPABILITY') throw denial('tool:' + name);
      const err = new Error(messageOf(e));
      err.code = 'ETOOL';
      err.tool = e !== null && typeof e === 'object' && typeof e.tool === 'string' ? e.tool : name;
      throw err;
    }
    return jsonParse(out);
  }
  // One async function per tool name: a Proxy, so the names granted need not
  // be known in the guest (the host checks every call). `then` and symbols
  // are not tools (so `await tools` is not a call).
  const tools = new Proxy(Object.freeze(Object.create(null)), {
    get(_target, key) {
      if (typeof key !== 'string' || key === 'then') return undefined;
      return function (input) { return callTool(key, input); };
    },
    set() { return false; },
    defineProperty() { return false; },
    deleteProperty() { return false; },
  });

  def('callTool', callTool);
  def('tools', tools);
  def('Headers', Headers);
  def('Request', Request);
  def('Response', Response);
  def('fetch', fetch);
  def('crypto', cryptoObj);
  def('fs', fs);
})();
