//! Builds the JavaScript shim (`guest-js-shim`) for `wasm32-wasip2` from
//! source and hands its path to the library as `TEMPER_SHIM_WASM`.
//!
//! The shim is built into `target/guest` (its own target directory and lock
//! file) with paths remapped, so its bytes do not depend on where the
//! checkout lives. Set `TEMPER_SHIM_WASM=/path/to/shim.wasm` to use a shim
//! built elsewhere instead. Needs what `scripts/setup.sh` installs.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TEMPER_SHIM_WASM");
    if let Ok(path) = env::var("TEMPER_SHIM_WASM") {
        println!("cargo:rerun-if-changed={path}");
        println!("cargo:rustc-env=TEMPER_SHIM_WASM={path}");
        return;
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let guest = root.join("guest-js-shim");
    for watched in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", guest.join(watched).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    let target_dir = root.join("target").join("guest");
    let sysroot = root.join("target").join("wasi-sysroot");
    make_sysroot(&sysroot);

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cargo_home = env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env::var("HOME").unwrap_or_default()).join(".cargo"));
    let rustflags = [
        format!("--remap-path-prefix={}=/cargo", cargo_home.display()),
        format!("--remap-path-prefix={}=/temper", root.display()),
    ]
    .join("\x1f");
    let cflags = format!(
        "--sysroot={} -ffile-prefix-map={}=/cargo -ffile-prefix-map={}=/temper",
        sysroot.display(),
        cargo_home.display(),
        root.display()
    );
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guest)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env("RQUICKJS_SYS_NO_WASI_SDK", "1")
        .env("LIBCLANG_PATH", "/usr/lib/llvm-14/lib")
        .env("CC_wasm32_wasip2", "clang-14")
        .env("AR_wasm32_wasip2", "llvm-ar-14")
        .env("CFLAGS_wasm32_wasip2", &cflags)
        .env(
            "BINDGEN_EXTRA_CLANG_ARGS_wasm32_wasip2",
            format!("--sysroot={}", sysroot.display()),
        )
        .env("SOURCE_DATE_EPOCH", "0");
    let status = cmd.status().expect("failed to run cargo for guest-js-shim");
    if !status.success() {
        panic!(
            "building guest-js-shim for wasm32-wasip2 failed ({status}); run scripts/setup.sh to install clang-14, lld-14, wasi-libc and the wasm32-wasip2 target"
        );
    }
    let wasm = target_dir.join("wasm32-wasip2/release/guest_js_shim.wasm");
    assert!(wasm.exists(), "shim not found at {}", wasm.display());
    println!("cargo:rustc-env=TEMPER_SHIM_WASM={}", wasm.display());
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
