//! `globalThis.__temper_host`: the native functions behind the JS surfaces
//! of `fetch`, `crypto` and `fs` (see `capabilities.js`, which captures this
//! object and deletes the global). Each forwards to a host import; the host
//! decides what is granted. Failures throw a `TypeError` carrying the host's
//! reason (e.g. `capability not granted: fetch`).

use javy::quickjs::{
    ArrayBuffer, Ctx, Exception, Function, Object, Result, TypedArray, Value,
    function::{MutFn, Rest},
};

use crate::temper::tool::{crypto, fetch};

/// Largest single `randomBytes` request.
const MAX_RANDOM_BYTES: u32 = 65536;
/// Largest file `readFile` returns.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Installs `globalThis.__temper_host`.
pub fn install(ctx: &Ctx<'_>) -> Result<()> {
    let host = Object::new(ctx.clone())?;
    host.set(
        "fetch",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                host_fetch(&cx, &args)
            }),
        )?,
    )?;
    host.set(
        "hash",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                let alg = string_arg(&cx, &args, 0, "algorithm")?;
                let data = bytes_arg(&cx, &args, 1, "data")?;
                buffer_or_throw(&cx, crypto::hash(&alg, &data))
            }),
        )?,
    )?;
    host.set(
        "hmac",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                let alg = string_arg(&cx, &args, 0, "algorithm")?;
                let key = bytes_arg(&cx, &args, 1, "key")?;
                let data = bytes_arg(&cx, &args, 2, "data")?;
                buffer_or_throw(&cx, crypto::hmac(&alg, &key, &data))
            }),
        )?,
    )?;
    host.set(
        "randomBytes",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                let n = args.0.first().and_then(|v| v.as_number()).unwrap_or(-1.0);
                if !(0.0..=MAX_RANDOM_BYTES as f64).contains(&n) || n.fract() != 0.0 {
                    return Err(Exception::throw_type(
                        &cx,
                        &format!(
                            "randomBytes: size must be an integer from 0 to {MAX_RANDOM_BYTES}"
                        ),
                    ));
                }
                buffer_or_throw(&cx, crypto::random_bytes(n as u32))
            }),
        )?,
    )?;
    host.set(
        "readFile",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                let path = string_arg(&cx, &args, 0, "path")?;
                buffer_or_throw(&cx, read_file(&path))
            }),
        )?,
    )?;
    ctx.globals().set("__temper_host", host)
}

fn host_fetch<'js>(cx: &Ctx<'js>, args: &Rest<Value<'js>>) -> Result<Value<'js>> {
    let method = string_arg(cx, args, 0, "method")?;
    let url = string_arg(cx, args, 1, "url")?;
    let mut headers = Vec::new();
    if let Some(list) = args.0.get(2).and_then(|v| v.as_array()) {
        for pair in list.iter::<Vec<String>>() {
            let pair = pair?;
            if pair.len() != 2 {
                return Err(Exception::throw_type(
                    cx,
                    "fetch: headers must be [name, value] pairs",
                ));
            }
            headers.push((pair[0].clone(), pair[1].clone()));
        }
    }
    let body = match args.0.get(3) {
        Some(v) if !v.is_undefined() && !v.is_null() => Some(bytes_arg(cx, args, 3, "body")?),
        _ => None,
    };
    let redirect = match args.0.get(4).and_then(|v| v.as_string()) {
        Some(s) => s.to_string()?,
        None => "follow".into(),
    };
    let request = fetch::Request {
        method,
        url,
        headers,
        body,
        redirect,
    };
    let response = fetch::fetch(&request).map_err(|e| Exception::throw_type(cx, &e))?;
    let out = Object::new(cx.clone())?;
    out.set("status", response.status)?;
    out.set("statusText", response.status_text)?;
    out.set("url", response.url)?;
    out.set("redirected", response.redirected)?;
    let headers: Vec<Vec<String>> = response
        .headers
        .into_iter()
        .map(|(k, v)| vec![k, v])
        .collect();
    out.set("headers", headers)?;
    out.set("body", ArrayBuffer::new(cx.clone(), response.body)?)?;
    Ok(out.into_value())
}

/// Reads a file through the granted read-only preopens (`wasi:filesystem`).
fn read_file(path: &str) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let describe = |e: std::io::Error| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => "ENOENT: no such file or directory",
            std::io::ErrorKind::PermissionDenied => "EACCES: permission denied",
            std::io::ErrorKind::IsADirectory => "EISDIR: illegal operation on a directory",
            _ => "EIO: cannot read file",
        };
        format!("{code}, open '{path}'")
    };
    let file = std::fs::File::open(path).map_err(describe)?;
    let meta = file.metadata().map_err(describe)?;
    if meta.is_dir() {
        return Err(format!(
            "EISDIR: illegal operation on a directory, read '{path}'"
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "EFBIG: file is {} bytes, over the {MAX_FILE_BYTES}-byte limit, read '{path}'",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(describe)?;
    Ok(bytes)
}

fn buffer_or_throw<'js>(
    cx: &Ctx<'js>,
    result: std::result::Result<Vec<u8>, String>,
) -> Result<Value<'js>> {
    match result {
        Ok(bytes) => Ok(ArrayBuffer::new(cx.clone(), bytes)?.into_value()),
        Err(message) => Err(Exception::throw_type(cx, &message)),
    }
}

fn string_arg<'js>(cx: &Ctx<'js>, args: &Rest<Value<'js>>, i: usize, what: &str) -> Result<String> {
    match args.0.get(i).and_then(|v| v.as_string()) {
        Some(s) => s.to_string(),
        None => Err(Exception::throw_type(
            cx,
            &format!("{what} must be a string"),
        )),
    }
}

fn bytes_arg<'js>(cx: &Ctx<'js>, args: &Rest<Value<'js>>, i: usize, what: &str) -> Result<Vec<u8>> {
    let value = args
        .0
        .get(i)
        .cloned()
        .unwrap_or_else(|| Value::new_undefined(cx.clone()));
    if let Ok(array) = TypedArray::<u8>::from_value(value.clone()) {
        if let Some(bytes) = array.as_bytes() {
            return Ok(bytes.to_vec());
        }
    }
    if let Some(buffer) = ArrayBuffer::from_value(value) {
        if let Some(bytes) = buffer.as_bytes() {
            return Ok(bytes.to_vec());
        }
    }
    Err(Exception::throw_type(
        cx,
        &format!("{what} must be a Uint8Array or ArrayBuffer"),
    ))
}
