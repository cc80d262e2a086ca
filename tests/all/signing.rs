//! Signed artifacts and the trust policy, end to end: signing never changes
//! an artifact's id (the recorded `reproducible.json` ids hold for signed
//! files, and `temper verify` still finds them identical); an unsigned
//! artifact under `enforce` is refused on every path that admits tools
//! (`Forge::import`, `temper import`, `pull --import`, the tiers re-checked
//! on a host's start and after a policy change), a signed one is admitted
//! with its signers in the audit trail; `audit` logs and admits; a tool
//! that fails a new policy is disabled, not deleted. Hostile signatures are
//! covered by `temper-sign`'s own tests (host/sign/src/tests.rs).

use crate::oci::{RegistryServer, insecure};
use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, ImportError};
use temper::id::ArtifactId;
use temper::oci::{self, OciAuth, OciError};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::sign::{SigningKey, TrustPolicy, sign};
use temper::store::{AuditKind, Registry, Tier};

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

fn forge_in(dir: &Path, trust: TrustPolicy) -> Forge {
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    Forge::builder(runtime, Arc::new(Registry::open(dir).unwrap()))
        .judge(judge)
        .config(ForgeConfig::default())
        .trust(trust)
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-a", "s1")
}

/// An enforce (or other `level`) policy: publisher `team` with `key`,
/// required for every tool.
fn team_policy_text(level: &str, key: &SigningKey) -> String {
    format!(
        r#"level = "{level}"
[publishers.team]
keys = [{{ id = "team-2026", ed25519 = "{}" }}]
[[rule]]
scope = ["*"]
require = ["team"]
"#,
        key.public_base64()
    )
}

fn team_policy(level: &str, key: &SigningKey) -> TrustPolicy {
    TrustPolicy::parse(Path::new("trust.toml"), &team_policy_text(level, key)).unwrap()
}

/// The slugify seed, forged on a fresh host (no trust policy) and exported.
async fn slugify_artifact() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let origin = forge_in(dir.path(), TrustPolicy::off());
    let request =
        ForgeRequest::from_json(&std::fs::read_to_string(fixture("seeds/slugify.json")).unwrap())
            .unwrap();
    origin.forge(&request, &ctx()).await.unwrap();
    let exported = origin.export("slugify", &ctx(), false, None).unwrap();
    (dir, exported.bytes)
}

/// The last `forge_decision` entry about `tool`.
fn last_decision(forge: &Forge, tool: &str) -> Value {
    forge
        .store()
        .audit_entries(0, usize::MAX)
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.kind == AuditKind::ForgeDecision && e.subject == tool)
        .map(|e| e.payload)
        .expect("a forge decision")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_import_refuses_unsigned_and_admits_signed_under_enforce() {
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let id = ArtifactId::of(&unsigned);
    let signed = sign::sign(&unsigned, &key, false, None).unwrap().bytes;
    assert_ne!(signed, unsigned);
    assert_eq!(
        ArtifactId::of(&signed),
        id,
        "signing does not change the id"
    );

    let dir = tempfile::tempdir().unwrap();
    let host = forge_in(dir.path(), team_policy("enforce", &key));
    let err = host
        .import(unsigned.clone(), &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ForgeError::Import(ImportError::Trust(_))),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "trust: artifact {}… (slugify) has no signature from team (rule 1: scope *)",
            &id.as_str()[..12]
        )),
        "{text}"
    );
    assert!(
        host.store().artifact_ids().unwrap().is_empty(),
        "nothing stored"
    );
    // The refusal is audited.
    let refused = last_decision(&host, "(import)");
    assert_eq!(refused["approved"], false);
    assert!(
        refused["reasons"][0]
            .as_str()
            .unwrap()
            .contains("no signature from team")
    );

    // Signed by another key: refused too.
    let stranger = sign::sign(&unsigned, &SigningKey::generate(), false, None)
        .unwrap()
        .bytes;
    assert!(host.import(stranger, &ctx(), Tier::Agent).await.is_err());

    // Signed by the team: admitted, same id, signers in the audit entry.
    let admitted = host
        .import(signed.clone(), &ctx(), Tier::Agent)
        .await
        .unwrap();
    assert_eq!(admitted.tool.id, id.as_str());
    let decision = last_decision(&host, "slugify");
    assert_eq!(decision["approved"], true);
    assert_eq!(decision["trust"]["level"], "enforce");
    assert_eq!(
        decision["trust"]["signers"],
        json!([{"publisher": "team", "key": "team-2026", "fingerprint": key.id()}])
    );
    // The store keeps the signed bytes (the signature travels on export).
    assert_eq!(host.store().get_artifact(&id).unwrap(), signed);
    let out = host
        .invoke("slugify", &json!({"text": "Signed Tools"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"slug": "signed-tools"}));
    let exported = host.export("slugify", &ctx(), false, None).unwrap();
    assert_eq!(exported.bytes, signed);
    host.store().verify_audit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_level_logs_and_admits() {
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let dir = tempfile::tempdir().unwrap();
    let host = forge_in(dir.path(), team_policy("audit", &key));
    host.import(unsigned, &ctx(), Tier::Agent).await.unwrap();
    let decision = last_decision(&host, "slugify");
    assert_eq!(decision["trust"]["level"], "audit");
    assert_eq!(decision["trust"]["signers"], json!([]));
    assert!(
        decision["trust"]["refusal"]
            .as_str()
            .unwrap()
            .contains("no signature from team"),
        "{decision}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_disables_tools_that_fail_it_without_deleting_them() {
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let dir = tempfile::tempdir().unwrap();
    let host = forge_in(dir.path(), TrustPolicy::off());
    host.import(unsigned.clone(), &ctx(), Tier::Agent)
        .await
        .unwrap();
    let input = json!({"text": "A B"});
    host.invoke("slugify", &input, &ctx()).await.unwrap();

    // The policy now requires the team's signature: the tool is disabled.
    let disabled = host
        .set_trust(team_policy("enforce", &key), "agent-a")
        .await
        .unwrap();
    assert_eq!(disabled.len(), 1);
    assert_eq!(disabled[0].name, "slugify");
    assert_eq!(disabled[0].tier, "agent");
    assert!(
        disabled[0].reason.contains("no signature from team"),
        "{disabled:?}"
    );
    let err = host.invoke("slugify", &input, &ctx()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("disabled by the trust policy: trust: artifact"),
        "{err}"
    );
    // Not deleted, and audited once.
    assert_eq!(host.visible_tools(&ctx()).unwrap().len(), 1);
    let audited = |host: &Forge| {
        host.store()
            .audit_entries(0, usize::MAX)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == AuditKind::TrustDisabled)
            .collect::<Vec<_>>()
    };
    let entries = audited(&host);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].subject, "slugify");
    assert_eq!(entries[0].payload["tier"], "agent");
    host.check_tiers("agent-a").await.unwrap();
    assert_eq!(audited(&host).len(), 1, "a second check does not re-audit");

    // A host starting under that policy disables it too.
    drop(host);
    let restarted = forge_in(dir.path(), team_policy("enforce", &key));
    assert_eq!(restarted.check_tiers("agent-a").await.unwrap().len(), 1);
    assert!(restarted.invoke("slugify", &input, &ctx()).await.is_err());

    // Signing the stored tool (same id) brings it back.
    let id = ArtifactId::of(&unsigned);
    let stored = restarted.store().get_artifact(&id).unwrap();
    let signed = sign::sign(&stored, &key, false, None).unwrap().bytes;
    assert_eq!(restarted.store().put_artifact(&signed).unwrap(), id);
    assert!(restarted.check_tiers("agent-a").await.unwrap().is_empty());
    restarted.invoke("slugify", &input, &ctx()).await.unwrap();
    // So does a policy that no longer requires it.
    assert!(
        restarted
            .set_trust(TrustPolicy::off(), "agent-a")
            .await
            .unwrap()
            .is_empty()
    );
    restarted.store().verify_audit().unwrap();
}

/// `temper keygen`, `temper sign` (file, detached, registered tool),
/// `temper inspect` / `verify` of a signed file, `temper import --trust`.
#[test]
fn cli_keygen_sign_and_import_under_a_trust_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // (success, stdout's JSON, stderr and stdout together for messages)
    let run = |args: &[&str]| {
        let (ok, doc, stderr) = support::temper_json(d, &[], args);
        let text = format!("{stderr}\n{doc}");
        (ok, doc, text)
    };

    // keygen: KEY (0600) and KEY.pub; the key id and the trust entry.
    let (ok, keygen, err) = run(&["keygen", "-o", "team.key"]);
    assert!(ok, "{err}");
    let key_id = keygen["keyId"].as_str().unwrap().to_string();
    assert_eq!(key_id.len(), 16);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.join("team.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(d.join("team.key.pub").is_file());
    let secret = std::fs::read_to_string(d.join("team.key")).unwrap();
    let secret_body: String = secret.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(
        !keygen.to_string().contains(&secret_body),
        "no secret on stdout"
    );
    let (ok, _, err) = run(&["keygen", "-o", "team.key"]);
    assert!(!ok && err.contains("exists"), "never overwritten: {err}");
    std::fs::write(
        d.join("trust.toml"),
        format!(
            "level = \"enforce\"\n[publishers.team]\nkeys = [{}]\n[[rule]]\nscope = [\"*\"]\nrequire = [\"team\"]\n",
            keygen["trustEntry"].as_str().unwrap()
        ),
    )
    .unwrap();

    // The slugify seed, built as reproducible.json records it.
    let seed = fixture("seeds/slugify.json");
    let (ok, built, err) = run(&["build", seed.to_str().unwrap(), "-o", "slugify.wasm"]);
    assert!(ok, "{err}");
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("reproducible.json")).unwrap())
            .unwrap();
    let recorded_id = recorded["artifacts"]["slugify"].as_str().unwrap();
    assert_eq!(built["id"], recorded_id);
    std::fs::copy(d.join("slugify.wasm"), d.join("unsigned.wasm")).unwrap();

    // Detached: the file is untouched, the signature is its own file.
    let (ok, signed, err) = run(&["sign", "slugify.wasm", "--key", "team.key", "--detached"]);
    assert!(ok, "{err}");
    assert_eq!(signed["id"], recorded_id);
    assert_eq!(
        std::fs::read(d.join("slugify.wasm")).unwrap(),
        std::fs::read(d.join("unsigned.wasm")).unwrap()
    );
    assert!(d.join("slugify.wasm.sig").is_file());
    // Embedded, in place: the id (inspect) and the rebuild (verify) hold.
    let (ok, signed, err) = run(&["sign", "slugify.wasm", "--key", "team.key"]);
    assert!(ok, "{err}");
    assert_eq!(signed["id"], recorded_id);
    assert_eq!(signed["signers"], json!([key_id]));
    let (ok, inspected, err) = run(&["inspect", "slugify.wasm"]);
    assert!(ok, "{err}");
    assert_eq!(inspected["id"], recorded_id, "signing never changes the id");
    let (ok, verified, err) = run(&[
        "verify",
        "slugify.wasm",
        "--request",
        seed.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(verified["identical"], true, "{verified}");
    assert_eq!(verified["id"], recorded_id);

    let store = |name: &str| d.join(name).to_str().unwrap().to_string();
    let import = |file: &str, store_dir: &str, extra: &[&str]| {
        let mut args = vec![
            "import",
            file,
            "--judge",
            "rules",
            "--store",
            store_dir,
            "--trust",
            "trust.toml",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    // Unsigned under enforce: refused, naming the rule.
    let (ok, refused, err) = import("unsigned.wasm", &store("s1"), &[]);
    assert!(!ok);
    assert!(
        err.contains("has no signature from team (rule 1: scope *)"),
        "{err}\n{refused}"
    );
    // Signed (embedded): admitted.
    let (ok, _, err) = import("slugify.wasm", &store("s1"), &[]);
    assert!(ok, "{err}");
    // Unsigned with its detached signature: admitted.
    let (ok, _, err) = import(
        "unsigned.wasm",
        &store("s2"),
        &["--signature", "slugify.wasm.sig"],
    );
    assert!(ok, "{err}");
    // The detached signature of other bytes: refused.
    let (ok, _, err) = run(&[
        "build",
        fixture("seeds/add_numbers.json").to_str().unwrap(),
        "-o",
        "add.wasm",
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = import(
        "add.wasm",
        &store("s3"),
        &["--signature", "slugify.wasm.sig"],
    );
    assert!(!ok && err.contains("no signature from team"), "{err}");
    // A trust file with an unknown key: refused before anything runs.
    std::fs::write(d.join("typo.toml"), "level = \"enforce\"\nlevle = 1\n").unwrap();
    let (ok, _, err) = run(&[
        "import",
        "slugify.wasm",
        "--judge",
        "rules",
        "--store",
        &store("s4"),
        "--trust",
        "typo.toml",
    ]);
    assert!(
        !ok && err.contains("typo.toml") && err.contains("levle"),
        "{err}"
    );

    // `temper sign NAME`: an unsigned tool registered without a policy,
    // then disabled when a host starts under the policy, then signed in
    // the store (same id) and enabled.
    let (ok, _, err) = run(&[
        "import",
        "unsigned.wasm",
        "--judge",
        "rules",
        "--store",
        &store("s5"),
    ]);
    assert!(ok, "{err}");
    let call = || {
        run(&[
            "call",
            "slugify",
            "--input",
            r#"{"text": "X Y"}"#,
            "--store",
            &store("s5"),
            "--trust",
            "trust.toml",
        ])
    };
    let (ok, _, err) = call();
    assert!(
        !ok && err.contains("slugify (agent tier of default) is disabled"),
        "{err}"
    );
    assert!(err.contains("disabled by the trust policy"), "{err}");
    let (ok, signed, err) = run(&[
        "sign",
        "slugify",
        "--key",
        "team.key",
        "--store",
        &store("s5"),
    ]);
    assert!(ok, "{err}");
    assert_eq!(signed["id"], recorded_id);
    let (ok, out, err) = call();
    assert!(ok, "{err}");
    assert_eq!(out["output"], json!({"slug": "x-y"}), "{out}");

    // No secret in the store: not in the database, the audit trail or the
    // artifacts.
    let (ok, log, err) = run(&["audit", "log", "--store", &store("s5")]);
    assert!(ok, "{err}");
    assert!(!log.to_string().contains(&secret_body));
    for entry in walk(&d.join("s5")) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&secret_body),
            "{}",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_and_import_checks_the_trust_policy_with_the_reference() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let signed = sign::sign(&unsigned, &key, false, None).unwrap().bytes;
    let unsigned_ref = server.reference("tools/slugify:unsigned");
    let signed_ref = server.reference("tools/slugify:signed");
    oci::push_artifact(&unsigned, &unsigned_ref, &options)
        .await
        .unwrap();
    let pushed = oci::push_artifact(&signed, &signed_ref, &options)
        .await
        .unwrap();
    assert_eq!(pushed.id, ArtifactId::of(&unsigned).as_str());

    // The rule is scoped to this registry's repository.
    let policy = format!(
        r#"level = "enforce"
[publishers.team]
keys = [{{ id = "team-2026", ed25519 = "{}" }}]
[[rule]]
scope = ["oci://{}/tools/*"]
require = ["team"]
"#,
        key.public_base64(),
        server
            .reference("x:1")
            .to_string()
            .trim_start_matches("oci://")
            .split('/')
            .next()
            .unwrap()
    );
    let policy_text = policy;
    let policy = TrustPolicy::parse(Path::new("trust.toml"), &policy_text).unwrap();
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let host = forge_in(a.path(), policy.clone());
    let refused = |err: &OciError| match err {
        OciError::Import { source, .. } => {
            matches!(**source, ForgeError::Import(ImportError::Trust(_)))
        }
        _ => false,
    };
    let err = oci::pull_and_import(&host, &unsigned_ref, &options, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(refused(&err), "{err}");
    assert!(
        err.to_string()
            .contains("no signature from team (rule 1: scope oci://"),
        "{err}"
    );

    // `temper pull --import` refuses it the same way.
    let cli = tempfile::tempdir().unwrap();
    std::fs::write(cli.path().join("trust.toml"), &policy_text).unwrap();
    let (ok, _, err) = support::temper_json(
        cli.path(),
        &[],
        [
            "pull",
            &unsigned_ref.to_string(),
            "--import",
            "--insecure",
            "--judge",
            "rules",
            "--store",
            "store",
            "--trust",
            "trust.toml",
        ],
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("no signature from team (rule 1: scope oci://"),
        "{err}"
    );

    // A signature pushed as a referrer of the unsigned artifact's manifest,
    // by a key the policy does not know: still refused.
    let unsigned_pushed = oci::pull_artifact(&unsigned_ref, &options).await.unwrap();
    let manifest_size = {
        // The manifest as pushed: same artifact, same manifest bytes.
        oci::push_artifact(&unsigned, &unsigned_ref, &options)
            .await
            .unwrap()
            .manifest_size
    };
    let stranger = sign::sign(&unsigned, &SigningKey::generate(), true, None).unwrap();
    oci::push_signature(
        &unsigned_ref,
        &unsigned_pushed.manifest_digest,
        manifest_size,
        &stranger.signature,
        &options,
    )
    .await
    .unwrap();
    let err = oci::pull_and_import(&host, &unsigned_ref, &options, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(refused(&err), "{err}");
    assert!(
        err.to_string()
            .contains("no key of the trust policy signed all of it"),
        "{err}"
    );
    // The team's signature as a second referrer: admitted.
    let team = sign::sign(&unsigned, &key, true, None).unwrap();
    oci::push_signature(
        &unsigned_ref,
        &unsigned_pushed.manifest_digest,
        manifest_size,
        &team.signature,
        &options,
    )
    .await
    .unwrap();
    let found = oci::pull_signatures(&unsigned_ref, &unsigned_pushed.manifest_digest, &options)
        .await
        .unwrap();
    assert_eq!(found.len(), 2, "both referrers are listed");
    let (_, imported) = oci::pull_and_import(&host, &unsigned_ref, &options, &ctx(), Tier::Agent)
        .await
        .unwrap();
    assert_eq!(imported.tool.id, pushed.id);
    let decision = last_decision(&host, "slugify");
    assert_eq!(decision["trust"]["signers"][0]["fingerprint"], key.id());

    // The embedded signature travels inside the layer.
    let other_host = forge_in(b.path(), policy.clone());
    let (_, imported) =
        oci::pull_and_import(&other_host, &signed_ref, &options, &ctx(), Tier::Agent)
            .await
            .unwrap();
    assert_eq!(imported.tool.id, pushed.id);

    // The same artifact imported from a file is covered by no rule (the
    // scope is the registry's), and an enforce policy trusts nothing else.
    let third = forge_in(c.path(), policy);
    let err = third.import(signed, &ctx(), Tier::Agent).await.unwrap_err();
    assert!(err.to_string().contains("covered by no [[rule]]"), "{err}");
}

/// `temper run FILE.wasm --trust FILE`: an external file run directly is
/// checked before it is loaded.
#[test]
fn run_checks_an_external_file_against_the_trust_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = SigningKey::generate();
    key.write(&d.join("team.key")).unwrap();
    std::fs::write(d.join("trust.toml"), team_policy_text("enforce", &key)).unwrap();
    let seed = fixture("seeds/slugify.json");
    let (ok, _, err) =
        support::temper_json(d, &[], ["build", seed.to_str().unwrap(), "-o", "s.wasm"]);
    assert!(ok, "{err}");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "s.wasm",
            "--input",
            r#"{"text": "Run Me"}"#,
            "--trust",
            "trust.toml",
        ];
        args.extend_from_slice(extra);
        support::temper_json(d, &[], args)
    };
    let (ok, _, err) = run(&[]);
    assert!(
        !ok && err.contains("(slugify) has no signature from team (rule 1: scope *)"),
        "{err}"
    );
    let (ok, _, err) = support::temper_json(
        d,
        &[],
        ["sign", "s.wasm", "--key", "team.key", "--detached"],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = run(&["--signature", "s.wasm.sig"]);
    assert!(ok, "{err}");
    assert_eq!(out["output"], json!({"slug": "run-me"}), "{out}");
}

/// An HTTP host serves every agent its tokens file names, so on start it
/// checks each of their agent tiers, not only its own `--agent`'s: an
/// unsigned tool registered earlier in alice's tier is disabled there.
#[test]
fn an_http_host_checks_the_agent_tier_of_every_token_agent() {
    use sha2::Digest;
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, keygen, err) = support::temper_json(d, &[], ["keygen", "-o", "team.key"]);
    assert!(ok, "{err}");
    std::fs::write(
        d.join("trust.toml"),
        format!(
            "level = \"enforce\"\n[publishers.team]\nkeys = [{}]\n[[rule]]\nscope = [\"*\"]\nrequire = [\"team\"]\n",
            keygen["trustEntry"].as_str().unwrap()
        ),
    )
    .unwrap();
    let seed = fixture("seeds/slugify.json");
    let (ok, _, err) = support::temper_json(
        d,
        &[],
        ["build", seed.to_str().unwrap(), "-o", "unsigned.wasm"],
    );
    assert!(ok, "{err}");
    // Registered in alice's agent tier before any trust policy.
    let alice = std::ffi::OsStr::new("alice");
    let (ok, _, err) = support::temper_json(
        d,
        &[("TEMPER_AGENT", alice)],
        [
            "import",
            "unsigned.wasm",
            "--judge",
            "rules",
            "--store",
            "store",
        ],
    );
    assert!(ok, "{err}");
    let hash: String = sha2::Sha256::digest(b"alice-token")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        d.join("tokens.toml"),
        format!("[tokens.\"sha256:{hash}\"]\nagent = \"alice\"\n"),
    )
    .unwrap();

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_temper"))
        .current_dir(d)
        .args(["mcp", "--http", "127.0.0.1:0", "--tokens", "tokens.toml"])
        .args(["--store", "store", "--trust", "trust.toml", "--cache-dir"])
        .arg(support::cache_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn temper mcp --http");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let listening = line.starts_with("temper mcp: listening on");
            let _ = tx.send(line);
            if listening {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(60)) {
        let listening = line.starts_with("temper mcp: listening on");
        lines.push(line);
        if listening {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    assert!(text.contains("temper mcp: listening on"), "{text}");
    assert!(
        text.contains("slugify (agent tier of alice) is disabled")
            && text.contains("no signature from team"),
        "{text}"
    );
}

/// `Runtime::load` of outside bytes under a trust policy: a runtime built
/// with the policy as its admission gate refuses an unsigned artifact
/// (`LoadError::Refused`, naming the rule) and loads and runs a signed one;
/// `load_admitted` (an embedder's own registry) does not ask the gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_load_under_a_trust_policy_refuses_unsigned_bytes() {
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let signed = sign::sign(&unsigned, &key, false, None).unwrap().bytes;
    let gate = temper::forge::TrustAdmission::new(team_policy("enforce", &key));
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .admission(Arc::new(gate))
        .build()
        .unwrap();

    let err = match runtime.load(unsigned.clone()).await {
        Ok(_) => panic!("an unsigned artifact loaded under enforce"),
        Err(e) => e,
    };
    assert!(matches!(err, temper::LoadError::Refused { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("(slugify) has no signature from team (rule 1: scope *)"),
        "{text}"
    );
    assert!(
        runtime.load_compiled(unsigned.clone()).await.is_err(),
        "load_compiled asks the gate too"
    );

    let tool = runtime.load(signed).await.expect("a signed artifact loads");
    let out = runtime
        .call(&tool, r#"{"text":"Signed And Sealed"}"#)
        .await
        .expect("and runs");
    assert!(out.output.contains("signed-and-sealed"), "{}", out.output);

    assert!(
        runtime.load_admitted(unsigned).await.is_ok(),
        "bytes the embedder admitted itself skip the gate"
    );
}

/// Exporting a signed tool with its source makes another file (the source
/// is in the manifest the signature covered without it): the old
/// signature is left out rather than shipped not covering the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_with_source_of_a_signed_tool_leaves_the_old_signature_out() {
    let key = SigningKey::generate();
    let (_origin, unsigned) = slugify_artifact().await;
    let signed = sign::sign(&unsigned, &key, false, None).unwrap().bytes;
    let dir = tempfile::tempdir().unwrap();
    let host = forge_in(dir.path(), team_policy("enforce", &key));
    host.import(signed.clone(), &ctx(), Tier::Agent)
        .await
        .expect("a signed artifact is admitted");
    let plain = host.export("slugify", &ctx(), false, None).unwrap();
    assert!(
        temper::id::is_signed(&plain.bytes),
        "kept as imported, signed"
    );
    let request =
        ForgeRequest::from_json(&std::fs::read_to_string(fixture("seeds/slugify.json")).unwrap())
            .unwrap();
    let temper::request::Implementation::Sandbox { code, .. } = &request.implementation else {
        panic!("slugify is a sandbox tool");
    };
    let with_source = host.export("slugify", &ctx(), true, Some(code)).unwrap();
    assert!(
        !temper::id::is_signed(&with_source.bytes),
        "the signature of the file without the source is not carried over"
    );
    assert_ne!(ArtifactId::of(&with_source.bytes), ArtifactId::of(&signed));
}
