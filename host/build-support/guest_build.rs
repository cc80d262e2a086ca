//! What the build scripts of `temper-runtime` (the JS shim and the shared
//! engine) and `temper-compose` (the compose core) share: building a guest
//! crate reproducibly into `target/guest`, its own target directory, so
//! host and guest builds never invalidate each other. Included by both
//! `build.rs` files with `#[path]` (a build script cannot share a module
//! otherwise without a crate of its own).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout's root: two levels above a crate under `host/`.
pub fn checkout_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("the crate lives under host/")
        .to_path_buf()
}

/// Passes on a guest path set in the environment; false when unset.
pub fn use_prebuilt(var: &str) -> bool {
    println!("cargo:rerun-if-env-changed={var}");
    match env::var(var) {
        Ok(path) => {
            println!("cargo:rerun-if-changed={path}");
            println!("cargo:rustc-env={var}={path}");
            true
        }
        Err(_) => false,
    }
}

/// Watches a guest crate's sources, manifest and lock file. Only paths that
/// exist are named: cargo treats a watched path that is missing as changed,
/// so naming one (`compose-mapping` has no lock file of its own) would rerun
/// the build script, and rebuild every crate above it, on every build.
pub fn watch_crate(dir: &Path) {
    for watched in ["src", "Cargo.toml", "Cargo.lock"] {
        let path = dir.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// `cargo build --release --locked --target TARGET` for the guest crate in
/// `dir`, into `target/guest`, with the outer build's flags removed, paths
/// remapped (`/cargo`, `/temper`) and `SOURCE_DATE_EPOCH=0`.
pub fn guest_build(root: &Path, dir: &Path, target: &str) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustflags = [
        format!("--remap-path-prefix={}=/cargo", cargo_home().display()),
        format!("--remap-path-prefix={}=/temper", root.display()),
    ]
    .join("\x1f");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir)
        .args(["build", "--release", "--locked", "--target", target])
        .arg("--target-dir")
        .arg(guest_target_dir(root));
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
        .env("SOURCE_DATE_EPOCH", "0");
    cmd
}

pub fn guest_target_dir(root: &Path) -> PathBuf {
    root.join("target").join("guest")
}

pub fn cargo_home() -> PathBuf {
    env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env::var("HOME").unwrap_or_default()).join(".cargo"))
}
