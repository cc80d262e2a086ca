//! `globalThis.__temper_host`: the native functions behind the JS surfaces
//! of `fetch`, `crypto` and `fs` (see `capabilities.js`, which captures this
//! object and deletes the global). Each forwards to a host import; the host
//! decides what is granted. Failures throw a `TypeError` carrying the host's
//! reason (e.g. `capability not granted: fetch`).

use javy::quickjs::{
    ArrayBuffer, Ctx, Exception, Function, Object, Result, TypedArray, Value,
    function::{MutFn, Rest},
};

use crate::temper::tool::types::ToolError;
use crate::temper::tool::{crypto, fetch, tools};

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
                match read_file(&path) {
                    Ok(bytes) => Ok(ArrayBuffer::new(cx.clone(), bytes)?.into_value()),
                    Err(e) => Err(throw_error(&cx, &e.message, Some(e.code))),
                }
            }),
        )?,
    )?;
    host.set(
        "callTool",
        Function::new(
            ctx.clone(),
            MutFn::new(|cx, args| {
                let (cx, args) = javy::Args::hold(cx, args).release();
                let name = string_arg(&cx, &args, 0, "tool name")?;
                let input = string_arg(&cx, &args, 1, "input")?;
                host_call_tool(&cx, &name, &input)
            }),
        )?,
    )?;
    ctx.globals().set("__temper_host", host)
}

/// Calls tool `name` through the host's `tools.call`: its JSON output as a
/// string, or a thrown error. A refusal (`capability not granted:
/// tool:NAME`) carries the code `ECAPABILITY`; a callee's failure the code
/// `ETOOL` and the `tool` it names (`capabilities.js` makes the errors tools
/// see from these).
fn host_call_tool<'js>(cx: &Ctx<'js>, name: &str, input: &str) -> Result<Value<'js>> {
    match tools::call(name, input) {
        Ok(output) => Ok(javy::quickjs::String::from_str(cx.clone(), &output)?.into_value()),
        Err(ToolError::CapabilityDenied(capability)) => Err(throw_error(
            cx,
            &format!("capability not granted: {capability}"),
            Some("ECAPABILITY"),
        )),
        Err(ToolError::ToolFailed(failure)) => {
            Err(throw_tool_error(cx, &failure.tool, &failure.message))
        }
        Err(other) => Err(throw_tool_error(cx, name, &format!("{other:?}"))),
    }
}

/// Throws an `Error` with `code: "ETOOL"`, `tool` and the callee's message.
fn throw_tool_error<'js>(cx: &Ctx<'js>, tool: &str, message: &str) -> javy::quickjs::Error {
    match Exception::from_message(cx.clone(), message) {
        Ok(exception) => {
            let object = exception.as_object();
            if let Err(e) = object.set("code", "ETOOL") {
                return e;
            }
            if let Err(e) = object.set("tool", tool) {
                return e;
            }
            exception.throw()
        }
        Err(e) => e,
    }
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
    let response = fetch::fetch(&request).map_err(|e| throw_error(cx, &e, None))?;
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

/// Why `readFile` failed: a Node-style code and the message.
struct FsError {
    code: &'static str,
    message: String,
}

impl FsError {
    fn new(code: &'static str, message: String) -> Self {
        Self { code, message }
    }
}

/// WASI errno values (wasi-libc) for the policy refusals the host's
/// filesystem gives: a `..` or symlink leading out of a preopen is
/// `not-permitted` (EPERM); ENOTCAPABLE is the rights check.
const WASI_EPERM: i32 = 63;
const WASI_ENOTCAPABLE: i32 = 76;

unsafe extern "C" {
    /// wasi-libc: the preopen an (absolute or cwd-relative) path falls in,
    /// or -1; populates the preopen table on first use.
    fn __wasilibc_find_relpath(
        path: *const std::ffi::c_char,
        abs_prefix: *mut *const std::ffi::c_char,
        relative_path: *mut *mut std::ffi::c_char,
        relative_path_len: usize,
    ) -> std::ffi::c_int;
}

/// Whether `path` falls inside one of the preopened (granted) directories,
/// by wasi-libc's own lookup (the one `open` uses).
fn inside_a_preopen(path: &str) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path) else {
        return false;
    };
    let mut buf = vec![0 as std::ffi::c_char; path.len() + 256];
    let mut relative = buf.as_mut_ptr();
    let mut prefix: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: `c_path` is NUL-terminated; `relative` points at `buf`, valid
    // for `buf.len()` bytes, as the function requires.
    let fd = unsafe {
        __wasilibc_find_relpath(c_path.as_ptr(), &mut prefix, &mut relative, buf.len())
    };
    fd >= 0
}

/// Whether any directory is preopened, i.e. `fs.readFile` is granted: the
/// host preopens directories only for that grant, and wasi-libc registers
/// them first, from descriptor 3 on, when a path is first looked up.
fn any_preopen() -> bool {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let _ = inside_a_preopen("/");
    // SAFETY: the descriptor is only inspected (fstat) and handed back
    // without being closed.
    let file = unsafe { std::fs::File::from_raw_fd(3) };
    let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
    let _ = file.into_raw_fd();
    is_dir
}

/// Why opening `path` failed: not granted at all, outside every granted
/// directory (including `..` and symlinks leading out), or a plain error.
fn open_error(path: &str, e: std::io::Error) -> FsError {
    if !any_preopen() {
        return FsError::new(
            "ECAPABILITY",
            "capability not granted: fs.readFile".to_string(),
        );
    }
    let escaped = matches!(e.raw_os_error(), Some(WASI_EPERM | WASI_ENOTCAPABLE));
    if escaped || !inside_a_preopen(path) {
        return FsError::new(
            "ERR_ACCESS_DENIED",
            format!("path outside the granted directories: {path}"),
        );
    }
    describe_io(path, e)
}

fn describe_io(path: &str, e: std::io::Error) -> FsError {
    let (code, text) = match e.kind() {
        std::io::ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
        std::io::ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
        std::io::ErrorKind::IsADirectory => ("EISDIR", "illegal operation on a directory"),
        _ => ("EIO", "cannot read file"),
    };
    FsError::new(code, format!("{code}: {text}, open '{path}'"))
}

/// Reads a file through the granted read-only preopens (`wasi:filesystem`).
fn read_file(path: &str) -> std::result::Result<Vec<u8>, FsError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| open_error(path, e))?;
    let meta = file.metadata().map_err(|e| describe_io(path, e))?;
    if meta.is_dir() {
        return Err(FsError::new(
            "EISDIR",
            format!("EISDIR: illegal operation on a directory, read '{path}'"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FsError::new(
            "EFBIG",
            format!(
                "EFBIG: file is {} bytes, over the {MAX_FILE_BYTES}-byte limit, read '{path}'",
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| describe_io(path, e))?;
    Ok(bytes)
}

/// Throws an `Error` carrying the whole `message` (QuickJS's own
/// `throw_type` formats into a 256-byte buffer, which cut host reasons
/// short) and, when given, a `code` property.
fn throw_error<'js>(cx: &Ctx<'js>, message: &str, code: Option<&str>) -> javy::quickjs::Error {
    match Exception::from_message(cx.clone(), message) {
        Ok(exception) => {
            if let Some(code) = code
                && let Err(e) = exception.as_object().set("code", code)
            {
                return e;
            }
            exception.throw()
        }
        Err(e) => e,
    }
}

fn buffer_or_throw<'js>(
    cx: &Ctx<'js>,
    result: std::result::Result<Vec<u8>, String>,
) -> Result<Value<'js>> {
    match result {
        Ok(bytes) => Ok(ArrayBuffer::new(cx.clone(), bytes)?.into_value()),
        Err(message) => Err(throw_error(cx, &message, None)),
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
