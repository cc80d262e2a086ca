//! Credentials checked by the registry, and `--insecure` refused for a
//! registry that is not loopback.

use crate::support;

use temper::oci::{self, OciAuth, OciError, OciReference, OciStage};

use super::{RegistryServer, basic, insecure, small_artifact};

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
