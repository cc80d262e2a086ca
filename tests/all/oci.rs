//! Distribution through a real OCI registry: Debian's `docker-registry` (the
//! CNCF distribution server), started per test on 127.0.0.1 with a random
//! port and its storage in a tempdir, killed at the end. Push then pull gives
//! the same bytes and blake3 id in the CNCF Wasm layout; tags are listed; a
//! missing tag, a tampered blob, a lying manifest and bad credentials are
//! refused with errors naming the stage and the reference; `--insecure` is
//! refused for a non-loopback registry; a pulled tool goes through the same
//! import checks as `temper import`.
//!
//! Without `docker-registry` on the machine (scripts/oci-registry.sh installs
//! it) the registry tests print why and skip, or fail when
//! TEMPER_REQUIRE_OCI=1 (scripts/test.sh sets it).

use crate::support;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use temper::artifact::{self, ArtifactManifest};
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, ImportError};
use temper::oci::{
    self, OciAuth, OciError, OciOptions, OciReference, OciStage, VerifyFailure,
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{Registry, Tier};

/// A throw-away `docker-registry serve` on 127.0.0.1; killed on drop
/// (also used by `signing.rs`).
pub(crate) struct RegistryServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RegistryServer {
    /// Starts a registry (with htpasswd auth for `user`/`password` when
    /// given), or `None` (printed) when docker-registry is not installed and
    /// TEMPER_REQUIRE_OCI is not 1.
    pub(crate) fn start(credentials: Option<(&str, &str)>) -> Option<RegistryServer> {
        let Some(binary) = registry_binary() else {
            crate::support::skip_unless_required(
                "TEMPER_REQUIRE_OCI",
                "docker-registry not found (install Debian's docker-registry: scripts/oci-registry.sh)",
                "the OCI registry test",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).unwrap();
        let auth = match credentials {
            None => String::new(),
            Some((user, password)) => {
                let hash = bcrypt::hash(password, 5).unwrap();
                let file = dir.path().join("htpasswd");
                std::fs::write(&file, format!("{user}:{hash}\n")).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: temper-test\n    path: {}\n",
                    file.display()
                )
            }
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: temper-test-secret\n{auth}",
            storage.display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let mut server = RegistryServer { child, port, dir };
        server.wait_ready();
        Some(server)
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "docker-registry exited ({status}) before serving:\n{}",
                    self.log()
                );
            }
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let req = format!(
                    "GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
                    self.port
                );
                let mut head = [0u8; 12];
                if s.write_all(req.as_bytes()).is_ok()
                    && s.read_exact(&mut head).is_ok()
                    && head.starts_with(b"HTTP/1.1 ")
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry not ready in 30 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn reference(&self, repo_tag: &str) -> OciReference {
        OciReference::parse(&format!("oci://{}/{repo_tag}", self.host())).unwrap()
    }

    /// The file holding a blob in the registry's filesystem storage.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

fn registry_binary() -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("docker-registry"))
        .find(|p| p.is_file())
}

pub(crate) fn insecure(auth: OciAuth) -> OciOptions {
    OciOptions {
        auth,
        insecure: true,
    }
}

fn basic(user: &str, password: &str) -> OciAuth {
    OciAuth::Basic {
        username: user.into(),
        password: password.into(),
    }
}

/// A small Temper artifact: an empty component with a manifest section.
fn small_artifact(name: &str) -> Vec<u8> {
    let component = wat::parse_str("(component)").unwrap();
    let manifest = ArtifactManifest::sandbox(
        name,
        "a test artifact",
        &json!({"type": "object"}),
        &json!({"type": "object"}),
        &[],
        &[],
        "function execute(input) { return input; }",
        false,
    );
    artifact::embed(&component, &manifest).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// A raw oci-client for pushing what `push_artifact` never would.
fn raw_client(host: &str) -> Client {
    Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![host.to_string()]),
        ..ClientConfig::default()
    })
}

/// Pushes `layer` (with `layer_media_type`) and a Wasm config under
/// `repo:tag`, with the manifest's layer digest and annotations as given.
async fn push_raw(
    host: &str,
    repo: &str,
    tag: &str,
    layer: &[u8],
    layer_media_type: &str,
    stated_digest: Option<String>,
    annotations: BTreeMap<String, String>,
) {
    let client = raw_client(host);
    let target = Reference::with_tag(host.into(), repo.into(), tag.into());
    client
        .store_auth_if_needed(host, &RegistryAuth::Anonymous)
        .await;
    let config = br#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#.to_vec();
    client
        .push_blob(&target, layer, &sha256(layer))
        .await
        .unwrap();
    client
        .push_blob(&target, &config, &sha256(&config))
        .await
        .unwrap();
    let manifest = OciImageManifest {
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: sha256(&config),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: layer_media_type.into(),
            digest: stated_digest.unwrap_or_else(|| sha256(layer)),
            size: layer.len() as i64,
            ..OciDescriptor::default()
        }],
        annotations: Some(annotations),
        ..OciImageManifest::default()
    };
    client
        .push_manifest_raw(
            &target,
            serde_json::to_vec(&manifest).unwrap(),
            OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
        )
        .await
        .unwrap();
}

/// GETs `path` on the registry (anonymous) and returns the JSON body.
async fn get_json(host: &str, path: &str, accept: &str) -> Value {
    reqwest::Client::new()
        .get(format!("http://{host}{path}"))
        .header("Accept", accept)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_then_pull_gives_the_same_bytes_id_and_wasm_layout() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let bytes = small_artifact("echo_tool");
    let reference = server.reference("tools/echo:1.0");
    let options = insecure(OciAuth::Anonymous);
    let pushed = oci::push_artifact(&bytes, &reference, &options)
        .await
        .unwrap();
    assert_eq!(pushed.id, temper::id::blake3_hex(&bytes));
    assert_eq!(pushed.name, "echo_tool");
    assert_eq!(pushed.layer_digest, sha256(&bytes));

    let pulled = oci::pull_artifact(&reference, &options).await.unwrap();
    assert_eq!(pulled.bytes, bytes, "pulled bytes differ");
    assert_eq!(pulled.id, pushed.id);
    assert_eq!(pulled.manifest.name, "echo_tool");
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);

    // Pinned by digest: the same bytes.
    let pinned = server.reference(&format!("tools/echo@{}", pushed.manifest_digest));
    let again = oci::pull_artifact(&pinned, &options).await.unwrap();
    assert_eq!(again.bytes, bytes);

    // The CNCF Wasm layout, as any OCI client sees it.
    let manifest = get_json(
        &server.host(),
        "/v2/tools/echo/manifests/1.0",
        OCI_IMAGE_MEDIA_TYPE,
    )
    .await;
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["layers"][0]["mediaType"], WASM_LAYER_MEDIA_TYPE);
    assert_eq!(
        manifest["layers"][0]["digest"],
        pushed.layer_digest.as_str()
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.title"],
        "echo_tool"
    );
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config = get_json(
        &server.host(),
        &format!("/v2/tools/echo/blobs/{config_digest}"),
        "*/*",
    )
    .await;
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"], json!([pushed.layer_digest]));

    // Pushing the same bytes again gives the same manifest digest.
    let second = server.reference("tools/echo:latest");
    let repushed = oci::push_artifact(&bytes, &second, &options).await.unwrap();
    assert_eq!(repushed.manifest_digest, pushed.manifest_digest);

    // Tag listing.
    let mut tags = oci::list_tags(&reference, &options).await.unwrap();
    tags.sort();
    assert_eq!(tags, ["1.0", "latest"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_tag_or_repository_is_a_clear_not_found() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    oci::push_artifact(
        &small_artifact("present"),
        &server.reference("tools/present:1"),
        &options,
    )
    .await
    .unwrap();

    let missing = server.reference("tools/present:2");
    let err = oci::pull_artifact(&missing, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::NotFound {
                stage: OciStage::Pull,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with("pull "), "{text}");
    assert!(text.contains(&missing.to_string()), "{text}");
    assert!(text.contains("not found"), "{text}");

    let nowhere = server.reference("tools/absent:1");
    let err = oci::pull_artifact(&nowhere, &options).await.unwrap_err();
    assert!(matches!(err, OciError::NotFound { .. }), "{err:?}");
    let err = oci::list_tags(&nowhere, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::NotFound {
                stage: OciStage::Tags,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_blob_or_lying_manifest_is_refused() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let bytes = small_artifact("victim");
    let reference = server.reference("tools/victim:1");
    let pushed = oci::push_artifact(&bytes, &reference, &options)
        .await
        .unwrap();

    // The blob's file in the registry's storage is rewritten (same length).
    let file = server.blob_file(&pushed.layer_digest);
    let mut stored = std::fs::read(&file).unwrap();
    assert_eq!(stored, bytes, "the blob is stored as pushed");
    let last = stored.len() - 1;
    stored[last] ^= 0x55;
    std::fs::write(&file, &stored).unwrap();
    let err = oci::pull_artifact(&reference, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::LayerDigest { .. },
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with(&format!("verify {reference}")), "{text}");
    assert!(text.contains(&pushed.layer_digest), "{text}");

    // A manifest whose annotated blake3 id is not the bytes'.
    let other = small_artifact("other");
    let mut annotations = BTreeMap::new();
    annotations.insert(oci::ANNOTATION_BLAKE3.to_string(), pushed.id.clone());
    push_raw(
        &server.host(),
        "tools/liar",
        "1",
        &other,
        WASM_LAYER_MEDIA_TYPE,
        None,
        annotations,
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/liar:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Blake3 { .. },
                ..
            }
        ),
        "{err:?}"
    );

    // A manifest stating a digest that is not the layer's: the registry
    // refuses it (the blob is unknown) or the pull does.
    let stated = sha256(b"something else");
    let client = raw_client(&server.host());
    let target = Reference::with_tag(server.host(), "tools/wrong".into(), "1".into());
    client
        .store_auth_if_needed(&server.host(), &RegistryAuth::Anonymous)
        .await;
    client
        .push_blob(&target, &other, &sha256(&other))
        .await
        .unwrap();
    let config = br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec();
    client
        .push_blob(&target, &config, &sha256(&config))
        .await
        .unwrap();
    let lying = OciImageManifest {
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: sha256(&config),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: stated,
            size: other.len() as i64,
            ..OciDescriptor::default()
        }],
        ..OciImageManifest::default()
    };
    let accepted = client
        .push_manifest_raw(
            &target,
            serde_json::to_vec(&lying).unwrap(),
            OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
        )
        .await;
    if accepted.is_ok() {
        let err = oci::pull_artifact(&server.reference("tools/wrong:1"), &options)
            .await
            .unwrap_err();
        assert!(
            matches!(err, OciError::NotFound { .. } | OciError::Verify { .. }),
            "{err:?}"
        );
    }

    // Not wasm: a layer of another media type; a wasm without a manifest section.
    push_raw(
        &server.host(),
        "tools/tarball",
        "1",
        &other,
        "application/vnd.oci.image.layer.v1.tar",
        None,
        BTreeMap::new(),
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/tarball:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Layers(_),
                ..
            }
        ),
        "{err:?}"
    );
    let bare = wat::parse_str("(component)").unwrap();
    push_raw(
        &server.host(),
        "tools/bare",
        "1",
        &bare,
        WASM_LAYER_MEDIA_TYPE,
        None,
        BTreeMap::new(),
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/bare:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Manifest(_),
                ..
            }
        ),
        "{err:?}"
    );
    // And push refuses bytes that are not a Temper artifact.
    let err = oci::push_artifact(&bare, &server.reference("tools/bare:2"), &options)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::NotAnArtifact { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_by_the_registry() {
    let Some(server) = RegistryServer::start(Some(("ci", "right-password"))) else {
        return;
    };
    let bytes = small_artifact("guarded");
    let reference = server.reference("tools/guarded:1");

    for (what, auth) in [
        ("anonymous", OciAuth::Anonymous),
        ("wrong password", basic("ci", "wrong-password")),
        ("unknown user", basic("mallory", "right-password")),
        (
            "bogus bearer token",
            OciAuth::Bearer {
                token: "not-a-token".into(),
            },
        ),
    ] {
        let err = oci::push_artifact(&bytes, &reference, &insecure(auth))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                OciError::Auth {
                    stage: OciStage::Push,
                    ..
                }
            ),
            "{what}: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("push {reference}: authentication failed")),
            "{what}: {text}"
        );
    }

    let right = insecure(basic("ci", "right-password"));
    let pushed = oci::push_artifact(&bytes, &reference, &right)
        .await
        .unwrap();
    let pulled = oci::pull_artifact(&reference, &right).await.unwrap();
    assert_eq!(pulled.id, pushed.id);
    assert_eq!(oci::list_tags(&reference, &right).await.unwrap(), ["1"]);

    let err = oci::pull_artifact(&reference, &insecure(basic("ci", "nope")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Auth {
                stage: OciStage::Pull,
                ..
            }
        ),
        "{err:?}"
    );
    let err = oci::list_tags(&reference, &insecure(OciAuth::Anonymous))
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::Auth { .. }), "{err:?}");

    // The CLI with credentials from the environment.
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("guarded.wasm");
    std::fs::write(&file, &bytes).unwrap();
    let target = format!("oci://{}/cli/guarded:2", server.host());
    let store = work.path().join("store");
    let run = |password: &str, args: &[&str]| {
        support::temper_json(
            work.path(),
            &[
                ("TEMPER_OCI_USERNAME", "ci".as_ref()),
                ("TEMPER_OCI_PASSWORD", password.as_ref()),
                ("TEMPER_STORE", store.as_os_str()),
            ],
            args,
        )
    };
    let (ok, _, stderr) = run(
        "wrong",
        &["push", file.to_str().unwrap(), &target, "--insecure"],
    );
    assert!(!ok);
    assert!(stderr.contains("authentication failed"), "{stderr}");
    let (ok, doc, stderr) = run(
        "right-password",
        &["push", file.to_str().unwrap(), &target, "--insecure"],
    );
    assert!(ok, "{stderr}");
    assert_eq!(doc["id"], pushed.id.as_str());
    let out = work.path().join("pulled.wasm");
    let (ok, doc, stderr) = run(
        "right-password",
        &["pull", &target, "--insecure", "-o", out.to_str().unwrap()],
    );
    assert!(ok, "{stderr}");
    assert_eq!(doc["id"], pushed.id.as_str());
    assert_eq!(doc["name"], "guarded");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_is_refused_for_a_registry_that_is_not_loopback() {
    // No server: the refusal comes before any connection.
    let bytes = small_artifact("anything");
    for text in [
        "oci://registry.example.com/tools/x:1",
        "oci://10.0.0.5:5000/tools/x:1",
        "oci://127.0.0.1.example.com/tools/x:1",
        "oci://[fd00::1]:5000/tools/x:1",
    ] {
        let reference = OciReference::parse(text).unwrap();
        let options = insecure(OciAuth::Anonymous);
        let err = oci::push_artifact(&bytes, &reference, &options)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                OciError::InsecureRefused {
                    stage: OciStage::Push,
                    ..
                }
            ),
            "{text}: {err:?}"
        );
        let err = oci::pull_artifact(&reference, &options).await.unwrap_err();
        assert!(
            matches!(
                err,
                OciError::InsecureRefused {
                    stage: OciStage::Pull,
                    ..
                }
            ),
            "{text}: {err:?}"
        );
        assert!(
            err.to_string().contains("only allowed for 127.0.0.1"),
            "{err}"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = support::temper_json(
        work.path(),
        &[],
        ["pull", "oci://registry.example.com/tools/x:1", "--insecure"],
    );
    assert!(!ok);
    assert!(
        stderr.contains("--insecure (plain HTTP) refused for registry registry.example.com"),
        "{stderr}"
    );
}

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

fn forge_in(dir: &Path, policy: HostPolicy) -> Forge {
    let runtime = support::runtime_builder().policy(policy).build().unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    Forge::builder(runtime, Arc::new(Registry::open(dir).unwrap()))
        .judge(judge)
        .config(ForgeConfig::default())
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-a", "s1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pulled_tool_goes_through_the_import_checks() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let crypto = || HostPolicy::deny_all().with_allow_crypto();
    let origin = forge_in(a.path(), crypto());
    let request = ForgeRequest::from_json(
        &std::fs::read_to_string(fixture("artifacts/hash_message.json")).unwrap(),
    )
    .unwrap();
    let forged = origin.forge(&request, &ctx()).await.unwrap();
    let exported = origin.export("hash_message", &ctx(), false, None).unwrap();
    let reference = server.reference("tools/hash-message:1");
    let pushed = oci::push_artifact(&exported.bytes, &reference, &options)
        .await
        .unwrap();
    assert_eq!(pushed.id, forged.tool.id);

    // A host whose policy allows crypto: imported, same id, same output.
    let here = forge_in(b.path(), crypto());
    let (pulled, imported) = oci::pull_and_import(&here, &reference, &options, &ctx(), Tier::Agent)
        .await
        .unwrap();
    assert_eq!(pulled.id, pushed.id);
    assert_eq!(imported.tool.id, forged.tool.id);
    assert!(!imported.test_results.is_empty(), "tests re-ran");
    let out = here
        .invoke("hash_message", &json!({"message": "abc"}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        out.output,
        json!({"sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"})
    );

    // A host that does not allow crypto: verified, then refused at import.
    let strict = forge_in(c.path(), HostPolicy::deny_all());
    let err = oci::pull_and_import(&strict, &reference, &options, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    let text = err.to_string();
    match &err {
        OciError::Import { source, .. } => assert!(
            matches!(**source, ForgeError::Import(ImportError::Capabilities(_))),
            "{text}"
        ),
        other => panic!("expected an import refusal: {other:?}"),
    }
    assert!(text.starts_with(&format!("import {reference}")), "{text}");
    assert!(
        text.contains("crypto (not allowed by this host's policy)"),
        "{text}"
    );
    assert!(strict.store().artifact_ids().unwrap().is_empty());

    // The CLI: `temper pull --import` into a store, the policy from flags.
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    let (ok, doc, stderr) = support::temper_json(
        work.path(),
        &[("TEMPER_STORE", store.as_os_str())],
        [
            "pull",
            &reference.to_string(),
            "--insecure",
            "--import",
            "--judge",
            "rules",
            "--allow-crypto",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(doc["id"], pushed.id.as_str());
    assert_eq!(doc["name"], "hash_message");
    assert_eq!(doc["import"]["success"], true, "{doc}");
    let (ok, _, stderr) = support::temper_json(
        work.path(),
        &[("TEMPER_STORE", work.path().join("store2").as_os_str())],
        [
            "pull",
            &reference.to_string(),
            "--insecure",
            "--import",
            "--judge",
            "rules",
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("import refused"), "{stderr}");
}
