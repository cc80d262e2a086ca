//! The JavaScript shim component, built from `guest-js-shim/` by `build.rs`.

/// The shim component (`js-shim` world), as built from source.
pub static SHIM_WASM: &[u8] = include_bytes!(env!("TEMPER_SHIM_WASM"));

/// blake3 of [`SHIM_WASM`], hex: which shim built an artifact.
pub fn shim_id() -> String {
    blake3::hash(SHIM_WASM).to_hex().to_string()
}
