//! The JavaScript shim component, built from `guest-js-shim/` by `build.rs`.

/// The shim component (`js-shim` world), as built from source.
pub static SHIM_WASM: &[u8] = include_bytes!(env!("TEMPER_SHIM_WASM"));

/// blake3 of [`SHIM_WASM`], hex: which shim built an artifact. Hashed
/// once per process (every forge records it).
pub fn shim_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| blake3::hash(SHIM_WASM).to_hex().to_string())
        .clone()
}

/// The prelude every JS tool runs before its own code: web globals, the JS
/// surfaces of the capabilities, the lock-down, and the module export that
/// hands the shim its internals off `globalThis` (in that order).
pub const PRELUDE_JS: &str = concat!(
    include_str!("../../../guest-js-shim/src/prelude.js"),
    "\n;\n",
    include_str!("../../../guest-js-shim/src/capabilities.js"),
    "\n;\n",
    include_str!("../../../guest-js-shim/src/lockdown.js"),
    "\n;\n",
    include_str!("../../../guest-js-shim/src/internals.js"),
);

/// blake3 of [`PRELUDE_JS`], hex: with the shim, what built an artifact.
pub fn prelude_id() -> String {
    blake3::hash(PRELUDE_JS.as_bytes()).to_hex().to_string()
}

/// The shared engine (`guest-js-shim` built with its `engine` feature): the
/// same QuickJS and shim code, with `shim.load` split at the prelude so one
/// snapshot of it (the prelude evaluated) serves every tool.
pub static ENGINE_WASM: &[u8] = include_bytes!(env!("TEMPER_ENGINE_WASM"));

/// blake3 of [`ENGINE_WASM`] and [`PRELUDE_JS`], hex: names the engine
/// snapshot (one per shim version and prelude).
pub fn engine_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"temper-engine/1\0");
        hasher.update(&(ENGINE_WASM.len() as u64).to_le_bytes());
        hasher.update(ENGINE_WASM);
        hasher.update(PRELUDE_JS.as_bytes());
        hasher.finalize().to_hex().to_string()
    })
    .clone()
}
