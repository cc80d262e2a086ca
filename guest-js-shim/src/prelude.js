// Temper prelude: web globals QuickJS lacks (URL, URLSearchParams, TextEncoder,
// TextDecoder, atob/btoa, structuredClone, DOMException, virtual timers).
// Evaluated once per fresh context before the tool; must not use eval/Function.
// The functions the shim itself calls (timers, the result check, capability
// refusals) go on `__temper_internal`, a null-prototype object that
// internals.js takes off globalThis and hands to the shim as the prelude
// module's export: agent code never sees it.
(function () {
  'use strict';
  const G = globalThis;
  const def = (name, value) => Object.defineProperty(G, name, { value, writable: true, enumerable: false, configurable: true });
  if (!Object.prototype.hasOwnProperty.call(G, '__temper_internal')) {
    Object.defineProperty(G, '__temper_internal', { value: Object.create(null), writable: false, enumerable: false, configurable: true });
  }
  const INTERNAL = G.__temper_internal;
  const hidden = (name, value) => Object.defineProperty(INTERNAL, name, { value, writable: false, enumerable: true, configurable: false });
  const need = (args, n, what) => {
    if (args.length < n) throw new TypeError(`${what}: ${n} argument${n > 1 ? 's' : ''} required, but only ${args.length} present`);
  };
  const tryCall = (fn, v) => { try { fn.call(v); return true; } catch (_) { return false; } };
  const getter = (proto, key) => Object.getOwnPropertyDescriptor(proto, key).get;
  const taTag = getter(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag); // typed array kind or undefined

  // ---------------------------------------------------------------- DOMException
  const DOM_CODES = { IndexSizeError: 1, InvalidCharacterError: 5, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11,
    SyntaxError: 12, SecurityError: 18, NetworkError: 19, AbortError: 20, QuotaExceededError: 22, TimeoutError: 23, DataCloneError: 25 };
  if (typeof G.DOMException !== 'function') {
    class DOMException extends Error {
      constructor(message = '', name = 'Error') {
        super(String(message));
        Object.defineProperty(this, 'name', { value: String(name), writable: true, configurable: true });
        Object.defineProperty(this, 'code', { value: DOM_CODES[name] || 0, writable: true, configurable: true });
      }
    }
    Object.defineProperty(DOMException.prototype, Symbol.toStringTag, { value: 'DOMException', configurable: true });
    def('DOMException', DOMException);
  }
  const domError = (message, name) => new G.DOMException(message, name);

  // ---------------------------------------------------------------- UTF-8
  // Lone surrogates become U+FFFD (WebIDL USVString conversion).
  function toUSV(v) {
    const s = String(v);
    if (!/[\uD800-\uDFFF]/.test(s)) return s;
    let out = '';
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0xD800 && c <= 0xDBFF && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xFC00) === 0xDC00) { out += s[i] + s[i + 1]; i++; }
      else out += (c & 0xF800) === 0xD800 ? '\uFFFD' : s[i];
    }
    return out;
  }

  // UTF-8 encodes s into dest without splitting a character (lone surrogates -> EF BF BD).
  function encodeInto(s, dest) {
    const n = s.length, cap = dest.length;
    let i = 0, j = 0;
    for (; i < n; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) { if (j >= cap) break; dest[j++] = c; continue; }
      let units = 1;
      if ((c & 0xF800) === 0xD800) {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xDBFF && (d & 0xFC00) === 0xDC00) { c = 0x10000 + ((c - 0xD800) << 10) + (d - 0xDC00); units = 2; }
        else c = 0xFFFD;
      }
      const len = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (j + len > cap) break;
      if (len === 2) dest[j++] = 0xC0 | (c >> 6);
      else {
        if (len === 3) dest[j++] = 0xE0 | (c >> 12);
        else { dest[j++] = 0xF0 | (c >> 18); dest[j++] = 0x80 | ((c >> 12) & 63); }
        dest[j++] = 0x80 | ((c >> 6) & 63);
      }
      dest[j++] = 0x80 | (c & 63);
      i += units - 1;
    }
    return { read: i, written: j };
  }
  const utf8Encode = s => { const buf = new Uint8Array(s.length * 3); return buf.slice(0, encodeInto(s, buf).written); };

  // WHATWG UTF-8 decode. Returns [string, index of an unfinished trailing sequence or bytes.length].
  const CHUNK = 8192;
  function utf8Decode(bytes, fatal, flush) {
    const len = bytes.length, units = new Uint16Array(CHUNK + 2), parts = [];
    let n = 0, cp = 0, needed = 0, seen = 0, lower = 0x80, upper = 0xBF, start = 0;
    for (let i = 0; i < len; i++) {
      if (n >= CHUNK) { parts.push(String.fromCharCode.apply(null, units.subarray(0, n))); n = 0; }
      const b = bytes[i];
      if (needed === 0) {
        if (b < 0x80) { units[n++] = b; continue; }
        start = i;
        if (b >= 0xC2 && b <= 0xDF) { needed = 1; cp = b & 0x1F; }
        else if (b >= 0xE0 && b <= 0xEF) { if (b === 0xE0) lower = 0xA0; if (b === 0xED) upper = 0x9F; needed = 2; cp = b & 0xF; }
        else if (b >= 0xF0 && b <= 0xF4) { if (b === 0xF0) lower = 0x90; if (b === 0xF4) upper = 0x8F; needed = 3; cp = b & 7; }
        else if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
        else units[n++] = 0xFFFD;
        continue;
      }
      if (b < lower || b > upper) { // invalid continuation: emit U+FFFD and reprocess b
        cp = needed = seen = 0; lower = 0x80; upper = 0xBF; i--;
        if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
        units[n++] = 0xFFFD;
        continue;
      }
      lower = 0x80; upper = 0xBF; cp = (cp << 6) | (b & 63);
      if (++seen === needed) {
        if (cp > 0xFFFF) { cp -= 0x10000; units[n++] = 0xD800 + (cp >> 10); units[n++] = 0xDC00 + (cp & 0x3FF); }
        else units[n++] = cp;
        cp = needed = seen = 0;
      }
    }
    let rest = len;
    if (needed) {
      if (!flush) rest = start;
      else if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
      else units[n++] = 0xFFFD;
    }
    parts.push(String.fromCharCode.apply(null, units.subarray(0, n)));
    return [parts.length === 1 ? parts[0] : parts.join(''), rest];
  }

  // Any BufferSource -> Uint8Array view over the same memory.
  const abByteLength = getter(ArrayBuffer.prototype, 'byteLength');
  const sabByteLength = typeof SharedArrayBuffer === 'function' ? getter(SharedArrayBuffer.prototype, 'byteLength') : null;
  const isArrayBuffer = v => v !== null && typeof v === 'object' && tryCall(abByteLength, v);
  function toBytes(v, what) {
    if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    if (isArrayBuffer(v) || (sabByteLength && v !== null && typeof v === 'object' && tryCall(sabByteLength, v))) return new Uint8Array(v);
    throw new TypeError(`${what}: argument must be an ArrayBuffer or ArrayBufferView`);
  }

  if (typeof G.TextEncoder !== 'function') {
    class TextEncoder {
      get encoding() { return 'utf-8'; }
      encode(input = '') { return utf8Encode(String(input)); }
      encodeInto(source, destination) {
        need(arguments, 2, 'TextEncoder.encodeInto');
        if (!(ArrayBuffer.isView(destination) && taTag.call(destination) === 'Uint8Array')) {
          throw new TypeError('TextEncoder.encodeInto: destination must be a Uint8Array');
        }
        return encodeInto(String(source), destination);
      }
    }
    Object.defineProperty(TextEncoder.prototype, Symbol.toStringTag, { value: 'TextEncoder', configurable: true });

    const UTF8_LABELS = ['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8', 'x-unicode20utf8'];
    const TD = new WeakMap();
    class TextDecoder {
      constructor(label = 'utf-8', options = {}) {
        const l = String(label).replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '').toLowerCase();
        if (!UTF8_LABELS.includes(l)) throw new RangeError(`TextDecoder: the encoding "${label}" is not supported (utf-8 only)`);
        const o = options == null ? {} : options;
        TD.set(this, { fatal: !!o.fatal, ignoreBOM: !!o.ignoreBOM, pending: null, bomDone: false });
      }
      get encoding() { return 'utf-8'; }
      get fatal() { return TD.get(this).fatal; }
      get ignoreBOM() { return TD.get(this).ignoreBOM; }
      decode(input, options) {
        const st = TD.get(this);
        if (!st) throw new TypeError('Illegal invocation');
        const stream = !!(options && options.stream);
        let bytes = input === undefined ? new Uint8Array(0) : toBytes(input, 'TextDecoder.decode');
        if (st.pending) { const m = new Uint8Array(st.pending.length + bytes.length); m.set(st.pending); m.set(bytes, st.pending.length); bytes = m; }
        st.pending = null;
        let s, rest;
        try { [s, rest] = utf8Decode(bytes, st.fatal, !stream); }
        catch (e) { st.bomDone = false; throw e; }
        if (rest < bytes.length) st.pending = bytes.slice(rest);
        if (!st.bomDone && s.length) { if (!st.ignoreBOM && s.charCodeAt(0) === 0xFEFF) s = s.slice(1); st.bomDone = true; }
        if (!stream) st.bomDone = false;
        return s;
      }
    }
    Object.defineProperty(TextDecoder.prototype, Symbol.toStringTag, { value: 'TextDecoder', configurable: true });
    def('TextEncoder', TextEncoder);
    def('TextDecoder', TextDecoder);
  }

  // ---------------------------------------------------------------- atob / btoa
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const B64INV = {};
  for (let i = 0; i < 64; i++) B64INV[B64[i]] = i;
  def('btoa', function btoa(data) {
    need(arguments, 1, 'btoa');
    const s = String(data);
    let out = '';
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw domError('Invalid character', 'InvalidCharacterError');
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[n >> 18] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < s.length ? B64[n & 63] : '=');
    }
    return out;
  });
  def('atob', function atob(data) {
    need(arguments, 1, 'atob');
    let s = String(data).replace(/[\t\n\f\r ]/g, '');
    if (s.length % 4 === 0) s = s.replace(/={1,2}$/, '');
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw domError('The string to be decoded is not correctly encoded.', 'InvalidCharacterError');
    let out = '', acc = 0, bits = 0;
    for (let i = 0; i < s.length; i++) {
      acc = (acc << 6) | B64INV[s[i]]; bits += 6;
      if (bits >= 8) { bits -= 8; out += String.fromCharCode((acc >> bits) & 255); acc &= (1 << bits) - 1; }
    }
    return out;
  });

  // ---------------------------------------------------------------- URL
  const FAIL = { fail: true };
  const SPECIAL = { __proto__: null, ftp: 21, file: null, http: 80, https: 443, ws: 80, wss: 443 };
  const isSpecial = s => s in SPECIAL;
  const HEX = [];
  for (let i = 0; i < 256; i++) HEX[i] = '%' + (i < 16 ? '0' : '') + i.toString(16).toUpperCase();
  const isAlpha = c => (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A);
  const isDigit = c => c >= 0x30 && c <= 0x39;
  const isHex = c => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
  // Percent-encode sets (WHATWG URL §1.3) as lookup tables over ASCII; non-ASCII is always encoded.
  const pctSet = (base, extra) => {
    const t = base ? base.slice() : new Uint8Array(128);
    if (!base) { for (let c = 0; c < 0x20; c++) t[c] = 1; t[0x7F] = 1; }
    for (const ch of extra) t[ch.charCodeAt(0)] = 1;
    return t;
  };
  const C0_SET = pctSet(null, '');
  const FRAGMENT_SET = pctSet(C0_SET, ' "<>`');
  const QUERY_SET = pctSet(C0_SET, ' "#<>');
  const SPECIAL_QUERY_SET = pctSet(QUERY_SET, "'");
  const PATH_SET = pctSet(QUERY_SET, '?`{}');
  const USERINFO_SET = pctSet(PATH_SET, '/:;=@[\\]^|');
  const COMPONENT_SET = pctSet(USERINFO_SET, '$%&+,');
  const FORM_SET = pctSet(COMPONENT_SET, "!'()~");

  function pctEncode(ch, set) { // ch: one code point as a string
    const c = ch.charCodeAt(0);
    if (c < 0x80) return set[c] ? HEX[c] : ch;
    let out = '';
    for (const b of utf8Encode(ch)) out += HEX[b];
    return out;
  }
  function pctEncodeStr(s, set, spaceAsPlus) {
    let out = '';
    for (const ch of s) out += spaceAsPlus && ch === ' ' ? '+' : pctEncode(ch, set);
    return out;
  }
  function pctDecode(bytes) { // Uint8Array -> Uint8Array
    const out = new Uint8Array(bytes.length);
    let j = 0;
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === 0x25 && isHex(bytes[i + 1]) && isHex(bytes[i + 2])) {
        out[j++] = parseInt(String.fromCharCode(bytes[i + 1], bytes[i + 2]), 16); i += 2;
      } else out[j++] = b;
    }
    return out.subarray(0, j);
  }
  const pctDecodeStr = s => (s.indexOf('%') < 0 ? s : utf8Decode(pctDecode(utf8Encode(s)), false, true)[0]);

  // RFC 3492 punycode encoder (for IDNA labels).
  function punycode(label) {
    const cps = Array.from(label, s => s.codePointAt(0));
    const digit = d => String.fromCharCode(d + 22 + 75 * (d < 26));
    const adapt = (delta, numPoints, first) => {
      delta = first ? Math.floor(delta / 700) : delta >> 1;
      delta += Math.floor(delta / numPoints);
      let k = 0;
      while (delta > 455) { delta = Math.floor(delta / 35); k += 36; }
      return k + Math.floor(36 * delta / (delta + 38));
    };
    let n = 128, delta = 0, bias = 72, out = '';
    for (const c of cps) if (c < 128) out += String.fromCharCode(c);
    const b = out.length;
    let h = b;
    if (b > 0) out += '-';
    while (h < cps.length) {
      let m = Infinity;
      for (const c of cps) if (c >= n && c < m) m = c;
      delta += (m - n) * (h + 1); n = m;
      for (const c of cps) {
        if (c < n) delta++;
        if (c !== n) continue;
        let q = delta;
        for (let k = 36; ; k += 36) {
          const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
          if (q < t) break;
          out += digit(t + (q - t) % (36 - t));
          q = Math.floor((q - t) / (36 - t));
        }
        out += digit(q); bias = adapt(delta, h + 1, h === b); delta = 0; h++;
      }
      delta++; n++;
    }
    return out;
  }
  // Approximate UTS #46 ToASCII: NFKC + lowercase, drop ignorables, punycode non-ASCII labels.
  function domainToASCII(domain) {
    let d = domain;
    if (/[^\x00-\x7F]/.test(d)) {
      d = d.normalize('NFKC').toLowerCase().replace(/[\u00AD\u034F\u180B-\u180D\u200B\u2060\uFE00-\uFE0F\uFEFF]/g, '')
        .replace(/[\u3002\uFF0E\uFF61]/g, '.').normalize('NFC');
      d = d.split('.').map(l => (/[^\x00-\x7F]/.test(l) ? 'xn--' + punycode(l) : l)).join('.');
    } else d = d.toLowerCase();
    return d === '' ? FAIL : d;
  }

  function parseIPv4Number(s) {
    if (s === '') return FAIL;
    let radix = 10;
    if (/^0[xX]/.test(s)) { radix = 16; s = s.slice(2); }
    else if (s.length > 1 && s[0] === '0') { radix = 8; s = s.slice(1); }
    if (s === '') return 0;
    const re = radix === 16 ? /^[0-9a-fA-F]+$/ : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
    return re.test(s) ? parseInt(s, radix) : FAIL;
  }
  function endsInNumber(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '') { if (parts.length === 1) return false; parts.pop(); }
    const last = parts[parts.length - 1];
    return /^[0-9]+$/.test(last) || parseIPv4Number(last) !== FAIL;
  }
  function parseIPv4(s) {
    const parts = s.split('.');
    if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
    if (parts.length > 4) return FAIL;
    const nums = parts.map(parseIPv4Number);
    if (nums.includes(FAIL)) return FAIL;
    for (let i = 0; i < nums.length - 1; i++) if (nums[i] > 255) return FAIL;
    let ip = nums[nums.length - 1];
    if (ip >= Math.pow(256, 5 - nums.length)) return FAIL;
    for (let i = 0; i < nums.length - 1; i++) ip += nums[i] * Math.pow(256, 3 - i);
    const o = [];
    for (let i = 3; i >= 0; i--) o.push(Math.floor(ip / Math.pow(256, i)) % 256);
    return o.join('.');
  }
  function parseIPv6(s) {
    const a = [0, 0, 0, 0, 0, 0, 0, 0], cp = Array.from(s, ch => ch.codePointAt(0));
    let pi = 0, compress = null, i = 0;
    if (cp[0] === 0x3A) { if (cp[1] !== 0x3A) return FAIL; i = 2; compress = pi = 1; }
    while (cp[i] !== undefined) {
      if (pi === 8) return FAIL;
      if (cp[i] === 0x3A) { if (compress !== null) return FAIL; i++; compress = ++pi; continue; }
      let value = 0, len = 0;
      while (len < 4 && isHex(cp[i])) { value = value * 16 + parseInt(String.fromCharCode(cp[i]), 16); i++; len++; }
      if (cp[i] === 0x2E) { // embedded IPv4
        if (len === 0) return FAIL;
        i -= len;
        if (pi > 6) return FAIL;
        let seen = 0;
        while (cp[i] !== undefined) {
          let v4 = null;
          if (seen > 0) { if (cp[i] === 0x2E && seen < 4) i++; else return FAIL; }
          if (!isDigit(cp[i])) return FAIL;
          while (isDigit(cp[i])) {
            const n = cp[i] - 0x30;
            if (v4 === null) v4 = n; else if (v4 === 0) return FAIL; else v4 = v4 * 10 + n;
            if (v4 > 255) return FAIL;
            i++;
          }
          a[pi] = a[pi] * 256 + v4;
          if (++seen === 2 || seen === 4) pi++;
        }
        if (seen !== 4) return FAIL;
        break;
      } else if (cp[i] === 0x3A) { if (cp[++i] === undefined) return FAIL; }
      else if (cp[i] !== undefined) return FAIL;
      a[pi++] = value;
    }
    if (compress !== null) {
      let swaps = pi - compress;
      for (pi = 7; pi !== 0 && swaps > 0; pi--, swaps--) {
        const t = a[compress + swaps - 1]; a[compress + swaps - 1] = a[pi]; a[pi] = t;
      }
    } else if (pi !== 8) return FAIL;
    return a;
  }
  function serializeIPv6(a) {
    let best = -1, bestLen = 1;
    for (let i = 0; i < 8;) {
      if (a[i] !== 0) { i++; continue; }
      let j = i;
      while (j < 8 && a[j] === 0) j++;
      if (j - i > bestLen) { best = i; bestLen = j - i; }
      i = j;
    }
    let out = '';
    for (let i = 0; i < 8; i++) {
      if (i === best) { out += i === 0 ? '::' : ':'; i += bestLen - 1; continue; }
      out += a[i].toString(16) + (i < 7 ? ':' : '');
    }
    return out;
  }
  function parseHost(input, opaque) {
    if (input[0] === '[') {
      if (input[input.length - 1] !== ']') return FAIL;
      const a = parseIPv6(input.slice(1, -1));
      return a === FAIL ? FAIL : '[' + serializeIPv6(a) + ']';
    }
    if (opaque) return /[\0\t\n\r #/:<>?@[\\\]^|]/.test(input) ? FAIL : pctEncodeStr(input, C0_SET);
    const ascii = domainToASCII(pctDecodeStr(input));
    if (ascii === FAIL || /[\0-\x20#%/:<>?@[\\\]^|\x7F]/.test(ascii)) return FAIL;
    return endsInNumber(ascii) ? parseIPv4(ascii) : ascii;
  }

  const isWinLetter = (s, normalized) => s.length === 2 && isAlpha(s.charCodeAt(0)) && (s[1] === ':' || (!normalized && s[1] === '|'));
  const startsWithWinLetter = (cps, p) => cps.length - p >= 2 && isAlpha(cps[p]) && (cps[p + 1] === 0x3A || cps[p + 1] === 0x7C) &&
    (cps.length - p === 2 || [0x2F, 0x5C, 0x3F, 0x23].includes(cps[p + 2]));
  const isSingleDot = s => s === '.' || s.toLowerCase() === '%2e';
  const isDoubleDot = s => ['..', '.%2e', '%2e.', '%2e%2e'].includes(s.toLowerCase());
  function shortenPath(u) {
    if (u.scheme === 'file' && u.path.length === 1 && isWinLetter(u.path[0], true)) return;
    u.path.pop();
  }
  const hasCreds = u => u.username !== '' || u.password !== '';
  const newRecord = () => ({ scheme: '', username: '', password: '', host: null, port: null, path: [], query: null, fragment: null });
  const copyFrom = (u, b, keys) => { for (const k of keys) u[k] = k === 'path' && typeof b.path !== 'string' ? b.path.slice() : b[k]; };
  const AUTH_KEYS = ['username', 'password', 'host', 'port'];

  // States of the basic URL parser.
  const SCHEME_START = 1, SCHEME = 2, NO_SCHEME = 3, SPECIAL_REL_OR_AUTH = 4, PATH_OR_AUTH = 5, RELATIVE = 6,
    RELATIVE_SLASH = 7, SPECIAL_AUTH_SLASHES = 8, SPECIAL_AUTH_IGNORE_SLASHES = 9, AUTHORITY = 10, HOST = 11,
    HOSTNAME = 12, PORT = 13, FILE = 14, FILE_SLASH = 15, FILE_HOST = 16, PATH_START = 17, PATH = 18,
    OPAQUE_PATH = 19, QUERY = 20, FRAGMENT = 21;

  // The WHATWG basic URL parser. Returns a URL record, or FAIL. With `override`
  // it edits `url` in place (setters) and its result is ignored.
  function basicParse(input, base, url, override) {
    if (!url) { url = newRecord(); input = input.replace(/^[\0-\x20]+|[\0-\x20]+$/g, ''); }
    input = input.replace(/[\t\n\r]/g, '');
    const cps = Array.from(input, s => s.codePointAt(0));
    let state = override || SCHEME_START, buf = '', atSign = false, inBrackets = false, pwSeen = false;
    for (let p = 0; ; p++) {
      const c = cps[p], ch = c === undefined ? '' : String.fromCodePoint(c);
      const special = isSpecial(url.scheme);
      const endOfAuth = c === undefined || c === 0x2F || c === 0x3F || c === 0x23 || (special && c === 0x5C);
      switch (state) {
        case SCHEME_START:
          if (isAlpha(c)) { buf += ch.toLowerCase(); state = SCHEME; }
          else if (!override) { state = NO_SCHEME; p--; }
          else return FAIL;
          break;
        case SCHEME:
          if (isAlpha(c) || isDigit(c) || c === 0x2B || c === 0x2D || c === 0x2E) buf += ch.toLowerCase();
          else if (c === 0x3A) {
            if (override) {
              if (special !== isSpecial(buf)) return url;
              if ((hasCreds(url) || url.port !== null) && buf === 'file') return url;
              if (url.scheme === 'file' && url.host === '') return url;
            }
            url.scheme = buf;
            if (override) { if (url.port === SPECIAL[url.scheme]) url.port = null; return url; }
            buf = '';
            if (url.scheme === 'file') state = FILE;
            else if (isSpecial(url.scheme) && base && base.scheme === url.scheme) state = SPECIAL_REL_OR_AUTH;
            else if (isSpecial(url.scheme)) state = SPECIAL_AUTH_SLASHES;
            else if (cps[p + 1] === 0x2F) { state = PATH_OR_AUTH; p++; }
            else { url.path = ''; state = OPAQUE_PATH; }
          } else if (!override) { buf = ''; state = NO_SCHEME; p = -1; }
          else return FAIL;
          break;
        case NO_SCHEME:
          if (!base || (typeof base.path === 'string' && c !== 0x23)) return FAIL;
          if (typeof base.path === 'string') {
            copyFrom(url, base, ['scheme', 'path', 'query']); url.fragment = ''; state = FRAGMENT;
          } else { state = base.scheme === 'file' ? FILE : RELATIVE; p--; }
          break;
        case SPECIAL_REL_OR_AUTH:
          if (c === 0x2F && cps[p + 1] === 0x2F) { state = SPECIAL_AUTH_IGNORE_SLASHES; p++; }
          else { state = RELATIVE; p--; }
          break;
        case PATH_OR_AUTH:
          if (c === 0x2F) state = AUTHORITY; else { state = PATH; p--; }
          break;
        case RELATIVE:
          url.scheme = base.scheme;
          if (c === 0x2F || (isSpecial(url.scheme) && c === 0x5C)) state = RELATIVE_SLASH;
          else {
            copyFrom(url, base, AUTH_KEYS.concat(['path', 'query']));
            if (c === 0x3F) { url.query = ''; state = QUERY; }
            else if (c === 0x23) { url.fragment = ''; state = FRAGMENT; }
            else if (c !== undefined) { url.query = null; shortenPath(url); state = PATH; p--; }
          }
          break;
        case RELATIVE_SLASH:
          if (special && (c === 0x2F || c === 0x5C)) state = SPECIAL_AUTH_IGNORE_SLASHES;
          else if (c === 0x2F) state = AUTHORITY;
          else { copyFrom(url, base, AUTH_KEYS); state = PATH; p--; }
          break;
        case SPECIAL_AUTH_SLASHES:
          state = SPECIAL_AUTH_IGNORE_SLASHES;
          if (c === 0x2F && cps[p + 1] === 0x2F) p++; else p--;
          break;
        case SPECIAL_AUTH_IGNORE_SLASHES:
          if (c !== 0x2F && c !== 0x5C) { state = AUTHORITY; p--; }
          break;
        case AUTHORITY:
          if (c === 0x40) {
            if (atSign) buf = '%40' + buf;
            atSign = true;
            for (const b of buf) {
              if (b === ':' && !pwSeen) { pwSeen = true; continue; }
              if (pwSeen) url.password += pctEncode(b, USERINFO_SET); else url.username += pctEncode(b, USERINFO_SET);
            }
            buf = '';
          } else if (endOfAuth) {
            if (atSign && buf === '') return FAIL;
            p -= Array.from(buf).length + 1; buf = ''; state = HOST;
          } else buf += ch;
          break;
        case HOST: case HOSTNAME:
          if (override && url.scheme === 'file') { p--; state = FILE_HOST; }
          else if (c === 0x3A && !inBrackets) {
            if (buf === '' || override === HOSTNAME) return FAIL;
            const h = parseHost(buf, !special);
            if (h === FAIL) return FAIL;
            url.host = h; buf = ''; state = PORT;
          } else if (endOfAuth) {
            p--;
            if (special && buf === '') return FAIL;
            if (override && buf === '' && (hasCreds(url) || url.port !== null)) return FAIL;
            const h = parseHost(buf, !special);
            if (h === FAIL) return FAIL;
            url.host = h; buf = ''; state = PATH_START;
            if (override) return url;
          } else {
            if (c === 0x5B) inBrackets = true;
            if (c === 0x5D) inBrackets = false;
            buf += ch;
          }
          break;
        case PORT:
          if (isDigit(c)) buf += ch;
          else if (endOfAuth || override) {
            if (buf !== '') {
              const port = parseInt(buf, 10);
              if (port > 65535) return FAIL;
              url.port = SPECIAL[url.scheme] === port ? null : port;
              buf = '';
              if (override) return url;
            }
            if (override) return FAIL;
            state = PATH_START; p--;
          } else return FAIL;
          break;
        case FILE:
          url.scheme = 'file'; url.host = '';
          if (c === 0x2F || c === 0x5C) state = FILE_SLASH;
          else if (base && base.scheme === 'file') {
            copyFrom(url, base, ['host', 'path', 'query']);
            if (c === 0x3F) { url.query = ''; state = QUERY; }
            else if (c === 0x23) { url.fragment = ''; state = FRAGMENT; }
            else if (c !== undefined) {
              url.query = null;
              if (!startsWithWinLetter(cps, p)) shortenPath(url); else url.path = [];
              state = PATH; p--;
            }
          } else { state = PATH; p--; }
          break;
        case FILE_SLASH:
          if (c === 0x2F || c === 0x5C) state = FILE_HOST;
          else {
            if (base && base.scheme === 'file') {
              url.host = base.host;
              if (!startsWithWinLetter(cps, p) && base.path.length && isWinLetter(base.path[0], true)) url.path.push(base.path[0]);
            }
            state = PATH; p--;
          }
          break;
        case FILE_HOST:
          if (c === undefined || c === 0x2F || c === 0x5C || c === 0x3F || c === 0x23) {
            p--;
            if (!override && isWinLetter(buf, false)) state = PATH;
            else if (buf === '') {
              url.host = '';
              if (override) return url;
              state = PATH_START;
            } else {
              let h = parseHost(buf, false);
              if (h === FAIL) return FAIL;
              if (h === 'localhost') h = '';
              url.host = h;
              if (override) return url;
              buf = ''; state = PATH_START;
            }
          } else buf += ch;
          break;
        case PATH_START:
          if (special) { state = PATH; if (c !== 0x2F && c !== 0x5C) p--; }
          else if (!override && c === 0x3F) { url.query = ''; state = QUERY; }
          else if (!override && c === 0x23) { url.fragment = ''; state = FRAGMENT; }
          else if (c !== undefined) { state = PATH; if (c !== 0x2F) p--; }
          else if (override && url.host === null) url.path.push('');
          break;
        case PATH:
          if (c === undefined || c === 0x2F || (special && c === 0x5C) || (!override && (c === 0x3F || c === 0x23))) {
            const slash = c === 0x2F || (special && c === 0x5C);
            if (isDoubleDot(buf)) { shortenPath(url); if (!slash) url.path.push(''); }
            else if (isSingleDot(buf)) { if (!slash) url.path.push(''); }
            else {
              if (url.scheme === 'file' && url.path.length === 0 && isWinLetter(buf, false)) buf = buf[0] + ':';
              url.path.push(buf);
            }
            buf = '';
            if (c === 0x3F) { url.query = ''; state = QUERY; }
            if (c === 0x23) { url.fragment = ''; state = FRAGMENT; }
          } else buf += pctEncode(ch, PATH_SET);
          break;
        case OPAQUE_PATH:
          if (c === 0x3F) { url.query = ''; state = QUERY; }
          else if (c === 0x23) { url.fragment = ''; state = FRAGMENT; }
          else if (c !== undefined) url.path += pctEncode(ch, C0_SET);
          break;
        case QUERY:
          if ((!override && c === 0x23) || c === undefined) {
            url.query += pctEncodeStr(buf, special ? SPECIAL_QUERY_SET : QUERY_SET);
            buf = '';
            if (c === 0x23) { url.fragment = ''; state = FRAGMENT; }
          } else buf += ch;
          break;
        case FRAGMENT:
          if (c !== undefined) url.fragment += pctEncode(ch, FRAGMENT_SET);
          break;
      }
      if (p >= cps.length) break;
    }
    return url;
  }

  const pathString = u => (typeof u.path === 'string' ? u.path : u.path.map(s => '/' + s).join(''));
  function serializeURL(u, noFragment) {
    let out = u.scheme + ':';
    if (u.host !== null) {
      out += '//';
      if (hasCreds(u)) out += u.username + (u.password !== '' ? ':' + u.password : '') + '@';
      out += u.host + (u.port !== null ? ':' + u.port : '');
    } else if (typeof u.path !== 'string' && u.path.length > 1 && u.path[0] === '') out += '/.';
    out += pathString(u);
    if (u.query !== null) out += '?' + u.query;
    if (!noFragment && u.fragment !== null) out += '#' + u.fragment;
    return out;
  }
  function stripOpaqueTrailingSpaces(u) {
    if (typeof u.path === 'string' && u.fragment === null && u.query === null) u.path = u.path.replace(/ +$/, '');
  }

  // application/x-www-form-urlencoded
  function parseForm(s) {
    const list = [];
    for (const seq of s.split('&')) {
      if (seq === '') continue;
      const i = seq.indexOf('=');
      const name = i < 0 ? seq : seq.slice(0, i), value = i < 0 ? '' : seq.slice(i + 1);
      list.push([pctDecodeStr(name.replace(/\+/g, ' ')), pctDecodeStr(value.replace(/\+/g, ' '))]);
    }
    return list;
  }
  const serializeForm = list => list.map(([k, v]) => pctEncodeStr(k, FORM_SET, true) + '=' + pctEncodeStr(v, FORM_SET, true)).join('&');

  const QP = new WeakMap(); // URLSearchParams -> { list, url: URL internal state or null }
  const UI = new WeakMap(); // URL -> { u: record, q: URLSearchParams }
  const qpState = o => { const s = QP.get(o); if (!s) throw new TypeError('Illegal invocation'); return s; };
  const urlState = o => { const s = UI.get(o); if (!s) throw new TypeError('Illegal invocation'); return s; };
  function qpUpdate(st) {
    if (!st.url) return;
    const q = serializeForm(st.list);
    st.url.u.query = q === '' ? null : q;
    if (q === '') stripOpaqueTrailingSpaces(st.url.u);
  }

  class URLSearchParams {
    constructor(init = '') {
      const st = { list: [], url: null };
      QP.set(this, st);
      if (init !== null && typeof init === 'object' || typeof init === 'function') {
        const it = init[Symbol.iterator];
        if (it != null) {
          if (typeof it !== 'function') throw new TypeError('URLSearchParams: init[Symbol.iterator] is not a function');
          for (const pair of init) {
            if (pair === null || (typeof pair !== 'object' && typeof pair !== 'function')) throw new TypeError('URLSearchParams: each pair must be an iterable');
            const arr = Array.from(pair);
            if (arr.length !== 2) throw new TypeError('URLSearchParams: each pair must have exactly 2 elements');
            st.list.push([toUSV(arr[0]), toUSV(arr[1])]);
          }
        } else {
          for (const k of Reflect.ownKeys(init)) {
            const d = Reflect.getOwnPropertyDescriptor(init, k);
            if (d && d.enumerable) st.list.push([toUSV(k), toUSV(init[k])]);
          }
        }
      } else {
        const s = toUSV(init);
        st.list = parseForm(s[0] === '?' ? s.slice(1) : s);
      }
    }
    get size() { return qpState(this).list.length; }
    append(name, value) { need(arguments, 2, 'URLSearchParams.append'); const st = qpState(this); st.list.push([toUSV(name), toUSV(value)]); qpUpdate(st); }
    delete(name, value) {
      need(arguments, 1, 'URLSearchParams.delete');
      const st = qpState(this), n = toUSV(name), v = value === undefined ? undefined : toUSV(value);
      st.list = st.list.filter(([k, x]) => !(k === n && (v === undefined || x === v)));
      qpUpdate(st);
    }
    get(name) { need(arguments, 1, 'URLSearchParams.get'); const n = toUSV(name), e = qpState(this).list.find(p => p[0] === n); return e ? e[1] : null; }
    getAll(name) { need(arguments, 1, 'URLSearchParams.getAll'); const n = toUSV(name); return qpState(this).list.filter(p => p[0] === n).map(p => p[1]); }
    has(name, value) {
      need(arguments, 1, 'URLSearchParams.has');
      const n = toUSV(name), v = value === undefined ? undefined : toUSV(value);
      return qpState(this).list.some(([k, x]) => k === n && (v === undefined || x === v));
    }
    set(name, value) {
      need(arguments, 2, 'URLSearchParams.set');
      const st = qpState(this), n = toUSV(name), v = toUSV(value), i = st.list.findIndex(p => p[0] === n);
      if (i < 0) st.list.push([n, v]);
      else { st.list[i][1] = v; st.list = st.list.filter((p, j) => j <= i || p[0] !== n); }
      qpUpdate(st);
    }
    sort() {
      const st = qpState(this);
      // Sort by UTF-16 code units, stable.
      st.list = st.list.map((p, i) => [p, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map(x => x[0]);
      qpUpdate(st);
    }
    forEach(callback, thisArg) {
      if (typeof callback !== 'function') throw new TypeError('URLSearchParams.forEach: callback is not a function');
      const st = qpState(this);
      for (let i = 0; i < st.list.length; i++) callback.call(thisArg, st.list[i][1], st.list[i][0], this);
    }
    *entries() { const st = qpState(this); for (let i = 0; i < st.list.length; i++) yield [st.list[i][0], st.list[i][1]]; }
    *keys() { const st = qpState(this); for (let i = 0; i < st.list.length; i++) yield st.list[i][0]; }
    *values() { const st = qpState(this); for (let i = 0; i < st.list.length; i++) yield st.list[i][1]; }
    toString() { return serializeForm(qpState(this).list); }
  }
  Object.defineProperty(URLSearchParams.prototype, Symbol.iterator, { value: URLSearchParams.prototype.entries, writable: true, configurable: true });
  Object.defineProperty(URLSearchParams.prototype, Symbol.toStringTag, { value: 'URLSearchParams', configurable: true });

  function parseOrNull(url, base) {
    let b = null;
    if (base !== undefined) { b = basicParse(toUSV(base)); if (b === FAIL) return null; }
    const r = basicParse(toUSV(url), b);
    return r === FAIL ? null : r;
  }
  const cannotHaveCreds = u => u.host === null || u.host === '' || u.scheme === 'file';

  class URL {
    constructor(url, base) {
      need(arguments, 1, 'URL');
      const u = parseOrNull(url, base);
      if (!u) throw new TypeError('Invalid URL: ' + String(url));
      UI.set(this, { u, q: null }); // q: the URLSearchParams, made on first use
    }
    static canParse(url, base) { need(arguments, 1, 'URL.canParse'); return parseOrNull(url, base) !== null; }
    static parse(url, base) { need(arguments, 1, 'URL.parse'); try { return new URL(url, base); } catch (_) { return null; } }
    get href() { return serializeURL(urlState(this).u); }
    set href(v) {
      const st = urlState(this), u = basicParse(toUSV(v));
      if (u === FAIL) throw new TypeError('Invalid URL: ' + String(v));
      st.u = u;
      if (st.q) QP.get(st.q).list = parseForm(u.query || '');
    }
    get origin() {
      const u = urlState(this).u;
      if (u.scheme === 'blob') {
        const inner = typeof u.path === 'string' ? parseOrNull(u.path) : null;
        return inner && (inner.scheme === 'http' || inner.scheme === 'https') ? new URL(serializeURL(inner)).origin : 'null';
      }
      if (!isSpecial(u.scheme) || u.scheme === 'file') return 'null';
      return u.scheme + '://' + u.host + (u.port !== null ? ':' + u.port : '');
    }
    get protocol() { return urlState(this).u.scheme + ':'; }
    set protocol(v) { const u = urlState(this).u; basicParse(toUSV(v) + ':', null, u, SCHEME_START); }
    get username() { return urlState(this).u.username; }
    set username(v) { const u = urlState(this).u; if (!cannotHaveCreds(u)) u.username = pctEncodeStr(toUSV(v), USERINFO_SET); }
    get password() { return urlState(this).u.password; }
    set password(v) { const u = urlState(this).u; if (!cannotHaveCreds(u)) u.password = pctEncodeStr(toUSV(v), USERINFO_SET); }
    get host() { const u = urlState(this).u; return u.host === null ? '' : u.host + (u.port === null ? '' : ':' + u.port); }
    set host(v) { const u = urlState(this).u; if (typeof u.path !== 'string') basicParse(toUSV(v), null, u, HOST); }
    get hostname() { const h = urlState(this).u.host; return h === null ? '' : h; }
    set hostname(v) { const u = urlState(this).u; if (typeof u.path !== 'string') basicParse(toUSV(v), null, u, HOSTNAME); }
    get port() { const p = urlState(this).u.port; return p === null ? '' : String(p); }
    set port(v) {
      const u = urlState(this).u, s = toUSV(v);
      if (cannotHaveCreds(u)) return;
      if (s === '') u.port = null; else basicParse(s, null, u, PORT);
    }
    get pathname() { return pathString(urlState(this).u); }
    set pathname(v) {
      const u = urlState(this).u;
      if (typeof u.path === 'string') return;
      u.path = [];
      basicParse(toUSV(v), null, u, PATH_START);
    }
    get search() { const q = urlState(this).u.query; return q === null || q === '' ? '' : '?' + q; }
    set search(v) {
      const st = urlState(this), u = st.u, s = toUSV(v);
      if (s === '') { u.query = null; if (st.q) QP.get(st.q).list = []; stripOpaqueTrailingSpaces(u); return; }
      const input = s[0] === '?' ? s.slice(1) : s;
      u.query = '';
      basicParse(input, null, u, QUERY);
      if (st.q) QP.get(st.q).list = parseForm(u.query); // like browsers: tabs/newlines already stripped
    }
    get searchParams() {
      const st = urlState(this);
      if (!st.q) { st.q = new URLSearchParams(); Object.assign(QP.get(st.q), { list: parseForm(st.u.query || ''), url: st }); }
      return st.q;
    }
    get hash() { const f = urlState(this).u.fragment; return f === null || f === '' ? '' : '#' + f; }
    set hash(v) {
      const u = urlState(this).u, s = toUSV(v);
      if (s === '') { u.fragment = null; stripOpaqueTrailingSpaces(u); return; }
      u.fragment = '';
      basicParse(s[0] === '#' ? s.slice(1) : s, null, u, FRAGMENT);
    }
    toString() { return this.href; }
    toJSON() { return this.href; }
  }
  for (const k of ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'searchParams', 'hash']) {
    Object.defineProperty(URL.prototype, k, { enumerable: true });
  }
  Object.defineProperty(URL.prototype, Symbol.toStringTag, { value: 'URL', configurable: true });
  def('URL', URL);
  def('URLSearchParams', URLSearchParams);

  // ---------------------------------------------------------------- structuredClone
  const dateGetTime = Date.prototype.getTime;
  const reSource = getter(RegExp.prototype, 'source'), reFlags = getter(RegExp.prototype, 'flags');
  const mapSize = getter(Map.prototype, 'size'), setSize = getter(Set.prototype, 'size');
  const objTag = v => Object.prototype.toString.call(v).slice(8, -1);
  const ERROR_NAMES = ['Error', 'EvalError', 'RangeError', 'ReferenceError', 'SyntaxError', 'TypeError', 'URIError'];
  const UNCLONEABLE = ['Promise', 'WeakMap', 'WeakSet', 'WeakRef', 'FinalizationRegistry', 'Generator', 'AsyncGenerator'];
  const cloneError = what => domError(`${what} could not be cloned.`, 'DataCloneError');
  const setProp = (o, k, v) => Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });

  def('structuredClone', function structuredClone(value, options) {
    need(arguments, 1, 'structuredClone');
    const memory = new Map();
    const transfer = options != null && options.transfer != null ? Array.from(options.transfer) : [];
    for (const t of transfer) {
      if (!isArrayBuffer(t)) throw cloneError('Value in transfer list');
      if (memory.has(t)) throw domError('ArrayBuffer appears more than once in the transfer list', 'DataCloneError');
      memory.set(t, null);
    }
    for (const t of transfer) {
      // ES2024 transfer() detaches the source; otherwise fall back to a copy.
      if (typeof t.transfer === 'function') memory.set(t, t.transfer());
      else memory.delete(t);
    }
    const copyKeys = (from, to) => {
      for (const k of Object.keys(from)) { if (k === '__proto__') setProp(to, k, clone(from[k])); else to[k] = clone(from[k]); }
      return to;
    };
    function clone(v) {
      const t = typeof v;
      if (t === 'symbol') throw cloneError(String(v));
      if (t === 'function') throw cloneError(String(v).slice(0, 60));
      if (v === null || t !== 'object') return v;
      const seen = memory.get(v);
      if (seen !== undefined) return seen;
      let out;
      const proto = Object.getPrototypeOf(v);
      if (Array.isArray(v)) { out = new Array(v.length); memory.set(v, out); return copyKeys(v, out); }
      if (proto === Object.prototype || proto === null) { out = {}; memory.set(v, out); return copyKeys(v, out); } // fast path
      if (tryCall(dateGetTime, v)) out = new Date(dateGetTime.call(v));
      else if (tryCall(reSource, v) && v !== RegExp.prototype) out = new RegExp(reSource.call(v), reFlags.call(v));
      else if (isArrayBuffer(v)) {
        out = new ArrayBuffer(abByteLength.call(v));
        new Uint8Array(out).set(new Uint8Array(v));
      } else if (ArrayBuffer.isView(v)) {
        const tag = taTag.call(v), buf = clone(v.buffer);
        out = tag === undefined ? new DataView(buf, v.byteOffset, v.byteLength) : new G[tag](buf, v.byteOffset, v.length);
      } else if (tryCall(mapSize, v)) {
        out = new Map(); memory.set(v, out);
        for (const [k, x] of Array.from(Map.prototype.entries.call(v))) out.set(clone(k), clone(x));
        return out;
      } else if (tryCall(setSize, v)) {
        out = new Set(); memory.set(v, out);
        for (const k of Array.from(Set.prototype.values.call(v))) out.add(clone(k));
        return out;
      } else if (tryCall(Boolean.prototype.valueOf, v)) out = Object(Boolean.prototype.valueOf.call(v));
      else if (tryCall(Number.prototype.valueOf, v)) out = Object(Number.prototype.valueOf.call(v));
      else if (tryCall(String.prototype.valueOf, v)) out = Object(String.prototype.valueOf.call(v));
      else if (tryCall(BigInt.prototype.valueOf, v)) out = Object(BigInt.prototype.valueOf.call(v));
      else if (objTag(v) === 'Error') {
        const name = String(v.name), Ctor = ERROR_NAMES.includes(name) ? G[name] : Error;
        out = new Ctor();
        const md = Object.getOwnPropertyDescriptor(v, 'message');
        if (md) Object.defineProperty(out, 'message', { value: String(v.message), writable: true, configurable: true });
        else delete out.message;
        if (typeof v.stack === 'string') Object.defineProperty(out, 'stack', { value: v.stack, writable: true, configurable: true });
        if (Object.prototype.hasOwnProperty.call(v, 'cause')) {
          memory.set(v, out);
          Object.defineProperty(out, 'cause', { value: clone(v.cause), writable: true, configurable: true });
        }
      } else if (UNCLONEABLE.includes(objTag(v))) throw cloneError('#<' + objTag(v) + '>');
      else { out = {}; memory.set(v, out); return copyKeys(v, out); }
      memory.set(v, out);
      return out;
    }
    return clone(value);
  });

  // ---------------------------------------------------------------- result check
  // The shim serializes execute()'s result with the native JSON.stringify;
  // when that throws, it asks this what JSON cannot represent and where:
  // 'a BigInt at $.a[0]', 'a cyclic value at $.self', or undefined when the
  // throw came from elsewhere (a getter, a toJSON), which stays the tool's
  // own error. Runs only on that failure path.
  const jsonStringify = JSON.stringify, isArray = Array.isArray, reTest = RegExp.prototype.test, apply = Reflect.apply;
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  hidden('unserializable', function (value) {
    const holders = [], paths = []; // the objects on the path from the root, and their paths
    let found;
    function replacer(key, v) {
      if (found !== undefined) return undefined;
      let depth = holders.length;
      while (depth > 0 && holders[depth - 1] !== this) depth--;
      holders.length = depth; paths.length = depth;
      const path = depth === 0 ? '$' : paths[depth - 1] + (isArray(this) ? '[' + key + ']'
        : apply(reTest, IDENT, [key]) ? '.' + key : '[' + jsonStringify(key) + ']');
      if (typeof v === 'bigint') { found = depth === 0 ? 'a BigInt' : 'a BigInt at ' + path; return undefined; }
      if (v !== null && typeof v === 'object') {
        for (let i = 0; i < depth; i++) {
          if (holders[i] === v) { found = 'a cyclic value at ' + path; return undefined; }
        }
        holders.push(v); paths.push(path);
      }
      return v;
    }
    try { jsonStringify(value, replacer); } catch (_) { return undefined; }
    return found;
  });

  // ---------------------------------------------------------------- timers (virtual clock)
  // Timers sit in a binary heap ordered by (due, seq); the host fires them one at
  // a time through the internal fireNextTimer, which jumps the virtual clock to the
  // next due time. Cleared timers are dropped lazily when they reach the top.
  const MAX_TIMERS = 10000;
  let heap = [], now = 0, nextId = 1, seq = 0;
  const live = new Map(); // id -> timer, for every queued, uncleared timer
  const before = (a, b) => a.due < b.due || (a.due === b.due && a.seq < b.seq);
  function push(t) {
    let i = heap.push(t) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(t, heap[parent])) break;
      heap[i] = heap[parent]; i = parent;
    }
    heap[i] = t;
  }
  function pop() {
    const top = heap[0], last = heap.pop();
    if (heap.length) {
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= heap.length) break;
        if (c + 1 < heap.length && before(heap[c + 1], heap[c])) c++;
        if (!before(heap[c], last)) break;
        heap[i] = heap[c]; i = c;
      }
      heap[i] = last;
    }
    return top;
  }
  function addTimer(fn, ms, args, repeat, what) {
    if (typeof fn !== 'function') throw new TypeError(`${what}: callback must be a function (string callbacks are not supported)`);
    if (live.size >= MAX_TIMERS) throw new RangeError(`${what}: too many pending timers (limit ${MAX_TIMERS})`);
    let delay = Math.trunc(Number(ms));
    if (!(delay > 0) || delay > 0x7FFFFFFF) delay = 0;
    if (repeat && delay < 1) delay = 1;
    const t = { id: nextId++, fn, args, delay, repeat, due: now + delay, seq: seq++, cleared: false };
    live.set(t.id, t);
    push(t);
    return t.id;
  }
  function clearTimer(id) {
    const t = live.get(Number(id));
    if (!t) return;
    t.cleared = true;
    live.delete(t.id);
    if (heap.length > 2 * live.size + 64) { // compact so set/clear loops cannot grow the heap
      const keep = heap.filter(x => !x.cleared);
      heap = [];
      keep.forEach(push);
    }
  }
  def('setTimeout', function setTimeout(fn, ms, ...args) { return addTimer(fn, ms, args, false, 'setTimeout'); });
  def('setInterval', function setInterval(fn, ms, ...args) { return addTimer(fn, ms, args, true, 'setInterval'); });
  def('clearTimeout', function clearTimeout(id) { clearTimer(id); });
  def('clearInterval', function clearInterval(id) { clearTimer(id); });
  def('queueMicrotask', function queueMicrotask(fn) {
    if (typeof fn !== 'function') throw new TypeError('queueMicrotask: callback must be a function');
    Promise.resolve().then(() => fn());
  });
  hidden('fireNextTimer', function () {
    let t;
    do { if (!heap.length) return false; t = pop(); } while (t.cleared);
    if (t.due > now) now = t.due;
    if (t.repeat) { t.due = now + t.delay; t.seq = seq++; push(t); } // re-queued first, so clearInterval inside works
    else live.delete(t.id);
    t.fn.apply(G, t.args);
    return true;
  });
  hidden('pendingTimers', function () { return live.size; });
})();
