//! Builds the two guests `temper-runtime` embeds, from source, and hands
//! their paths to it:
//!
//! - the JavaScript shim (`guest-js-shim`, `wasm32-wasip2`) as
//!   `TEMPER_SHIM_WASM`: its bytes are in every exported sandbox artifact;
//! - the shared engine (the shim's source with its `engine` feature, built
//!   as `guest-js-shim/engine`) as `TEMPER_ENGINE_WASM`: compiled once per
//!   host, every call runs in a fresh instance of it.
//!
//! The compose core is built by `temper-compose`'s own build script. Both
//! use `host/build-support/guest_build.rs`: guests go into `target/guest`
//! with paths remapped, so their bytes do not depend on where the checkout
//! lives. Set either variable to a `.wasm` built elsewhere to use it
//! instead. Needs what `scripts/setup.sh` installs.

use std::path::{Path, PathBuf};

#[path = "../build-support/guest_build.rs"]
mod guest_build;
use guest_build::{
    cargo_home, checkout_root, guest_build, guest_target_dir, use_prebuilt, watch_crate,
};

fn main() {
    let root = checkout_root();
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    if !use_prebuilt("TEMPER_SHIM_WASM") {
        build_shim(&root);
    }
    if !use_prebuilt("TEMPER_ENGINE_WASM") {
        build_engine(&root);
    }
}

/// The JS shim, with QuickJS's C code built by Debian's clang-14 against
/// wasi-libc.
fn build_shim(root: &Path) {
    let guest = root.join("guest-js-shim");
    watch_crate(&guest);
    let wasm = build_quickjs_guest(root, &guest, "guest_js_shim");
    println!("cargo:rustc-env=TEMPER_SHIM_WASM={}", wasm.display());
}

/// The shared engine: the shim's source built with its `engine` feature, as
/// the `guest-js-shim/engine` package (same target directory, so the shim's
/// dependency builds are reused).
fn build_engine(root: &Path) {
    let guest = root.join("guest-js-shim").join("engine");
    // Its sources are the shim's (watched by `build_shim`).
    for watched in ["Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", guest.join(watched).display());
    }
    let wasm = build_quickjs_guest(root, &guest, "guest_js_engine");
    println!("cargo:rustc-env=TEMPER_ENGINE_WASM={}", wasm.display());
}

/// Builds a QuickJS guest crate (the shim's sources) in `guest`; returns the
/// path of `NAME.wasm`.
fn build_quickjs_guest(root: &Path, guest: &Path, name: &str) -> PathBuf {
    let sysroot = root.join("target").join("wasi-sysroot");
    make_sysroot(&sysroot);
    let cflags = format!(
        "--sysroot={} -ffile-prefix-map={}=/cargo -ffile-prefix-map={}=/temper",
        sysroot.display(),
        cargo_home().display(),
        root.display()
    );
    let mut cmd = guest_build(root, guest, "wasm32-wasip2");
    cmd.env("RQUICKJS_SYS_NO_WASI_SDK", "1")
        .env("LIBCLANG_PATH", "/usr/lib/llvm-14/lib")
        .env("CC_wasm32_wasip2", "clang-14")
        .env("AR_wasm32_wasip2", "llvm-ar-14")
        .env("CFLAGS_wasm32_wasip2", &cflags)
        .env(
            "BINDGEN_EXTRA_CLANG_ARGS_wasm32_wasip2",
            format!("--sysroot={}", sysroot.display()),
        );
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("failed to run cargo for {}: {e}", guest.display()));
    if !status.success() {
        panic!(
            "building {} for wasm32-wasip2 failed ({status}); run scripts/setup.sh to install clang-14, lld-14, wasi-libc and the wasm32-wasip2 target",
            guest.display()
        );
    }
    let wasm = guest_target_dir(root).join(format!("wasm32-wasip2/release/{name}.wasm"));
    assert!(wasm.exists(), "{name} not found at {}", wasm.display());
    wasm
}

/// Debian's wasi-libc is not laid out as one sysroot: make one out of links.
fn make_sysroot(sysroot: &Path) {
    let lib = sysroot.join("lib");
    std::fs::create_dir_all(&lib).expect("create sysroot");
    link(
        Path::new("/usr/include/wasm32-wasi"),
        &sysroot.join("include"),
    );
    link(Path::new("/usr/lib/wasm32-wasi"), &lib.join("wasm32-wasi"));
}

fn link(target: &Path, at: &Path) {
    if std::fs::read_link(at).ok().as_deref() == Some(target) {
        return;
    }
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).expect("create sysroot link");
}
