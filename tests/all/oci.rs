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
//!
//! This module keeps the registry server and the helpers (`signing` uses
//! them too); the tests are in its submodules.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use temper::artifact::{self, ArtifactManifest};
use temper::oci::{OciAuth, OciOptions, OciReference, WASM_CONFIG_MEDIA_TYPE};

mod auth;
mod import;
mod integrity;
mod push_pull;

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
        max_artifact_bytes: None,
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
