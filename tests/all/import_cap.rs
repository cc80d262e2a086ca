//! `temper import` under `maxArtifactBytes`: an artifact over the cap is
//! refused from its size before it is read, so the process's peak memory
//! stays far below the file's size (measured with `/usr/bin/time`, the
//! child's max RSS).

use std::path::Path;
use std::process::Command;

use crate::support::cache_dir;

/// 96 MiB: the artifact that was read whole before the cap.
const BIG: u64 = 96 * 1024 * 1024;

/// `temper import FILE ARGS` under `/usr/bin/time -f %M`: (success,
/// stderr, max RSS in KiB).
fn import_measured(dir: &Path, file: &Path, args: &[&str]) -> (bool, String, u64) {
    let rss = dir.join("rss.txt");
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg("import")
        .arg(file)
        .arg("--store")
        .arg(dir.join("store"))
        .arg("--judge")
        .arg("rules")
        .arg("--cache-dir")
        .arg(cache_dir())
        .args(args)
        .output()
        .unwrap();
    let kib: u64 = std::fs::read_to_string(&rss)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        kib,
    )
}

#[test]
fn an_oversized_import_is_refused_before_it_is_read() {
    if !Path::new("/usr/bin/time").exists() {
        assert_ne!(
            std::env::var("TEMPER_REQUIRE_TIME").as_deref(),
            Ok("1"),
            "TEMPER_REQUIRE_TIME=1 but /usr/bin/time is missing"
        );
        eprintln!("skipped: /usr/bin/time is missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.wasm");
    // Written, not sparse: reading it would put every byte in memory.
    std::fs::write(&file, vec![0x61u8; BIG as usize]).unwrap();

    let (ok, stderr, kib) = import_measured(dir.path(), &file, &[]);
    assert!(!ok, "{stderr}");
    let cap = temper::forge::config::DEFAULT_MAX_ARTIFACT_BYTES;
    assert!(
        stderr.contains(&format!(
            "import: the artifact is {BIG} bytes, over the {cap}-byte cap (maxArtifactBytes in --forge-config)"
        )),
        "{stderr}"
    );
    let peak = kib * 1024;
    eprintln!("temper import of a {BIG}-byte file: max RSS {peak} bytes");
    assert!(
        peak < BIG / 2,
        "peak RSS {peak} bytes is not far below the file's {BIG} bytes"
    );

    // A lower cap from --forge-config: refused at it, naming it.
    let config = dir.path().join("forge.json");
    std::fs::write(&config, r#"{"maxArtifactBytes": 1000}"#).unwrap();
    let small = dir.path().join("small.wasm");
    std::fs::write(&small, vec![0u8; 1001]).unwrap();
    let (ok, stderr, _) = import_measured(
        dir.path(),
        &small,
        &["--forge-config", config.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(
        stderr.contains(
            "import: the artifact is 1001 bytes, over the 1000-byte cap (maxArtifactBytes in --forge-config)"
        ),
        "{stderr}"
    );
}
