//! Unit tests of the OCI module: references, credentials.
use super::*;

#[test]
fn references_parse() {
    let r = OciReference::parse("oci://127.0.0.1:5000/tools/slugify:1.0").unwrap();
    assert_eq!(r.registry, "127.0.0.1:5000");
    assert_eq!(r.repository, "tools/slugify");
    assert_eq!(r.tag.as_deref(), Some("1.0"));
    assert!(r.is_loopback());
    assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/slugify:1.0");

    let r = OciReference::parse("oci://[::1]:5000/a").unwrap();
    assert!(r.is_loopback());
    assert_eq!(r.tag, None);
    let r = OciReference::parse("oci://localhost/a/b:x").unwrap();
    assert!(r.is_loopback());
    let d = format!("sha256:{}", "a".repeat(64));
    let r = OciReference::parse(&format!("oci://registry.example.com/a@{d}")).unwrap();
    assert_eq!(r.digest.as_deref(), Some(d.as_str()));
    assert!(!r.is_loopback());
    assert!(
        !OciReference::parse("oci://127.0.0.1.example.com/a:b")
            .unwrap()
            .is_loopback()
    );

    for bad in [
        "http://h/a:b",
        "oci://h",
        "oci:///a:b",
        "oci://h/A:b",
        "oci://h/a:",
        "oci://h/a:-x",
        "oci://u:p@h/a:b",
        "oci://h:99999/a:b",
        "oci://h/a@sha256:12",
        "oci://h//a:b",
    ] {
        assert!(
            matches!(OciReference::parse(bad), Err(OciError::Reference { .. })),
            "{bad} accepted"
        );
    }
}

#[test]
fn credentials_from_env_values() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(OciAuth::from_env_with(env(&[])).unwrap(), None);
    assert_eq!(
        OciAuth::from_env_with(env(&[(ENV_TOKEN, "t")])).unwrap(),
        Some(OciAuth::Bearer { token: "t".into() })
    );
    assert_eq!(
        OciAuth::from_env_with(env(&[(ENV_USERNAME, "u"), (ENV_PASSWORD, "p")])).unwrap(),
        Some(OciAuth::Basic {
            username: "u".into(),
            password: "p".into()
        })
    );
    for half in [
        &[(ENV_USERNAME, "u")][..],
        &[(ENV_PASSWORD, "p")][..],
        &[(ENV_USERNAME, "u"), (ENV_PASSWORD, "p"), (ENV_TOKEN, "t")][..],
    ] {
        let half: &'static [(&'static str, &'static str)] = half;
        assert!(matches!(
            OciAuth::from_env_with(env(half)),
            Err(OciError::Credentials(_))
        ));
    }
    let secret = format!(
        "{:?}",
        OciAuth::Basic {
            username: "u".into(),
            password: "hunter2".into()
        }
    );
    assert!(!secret.contains("hunter2"), "{secret}");
}

#[test]
fn credentials_from_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auth.toml");
    std::fs::write(
        &path,
        "[registries.\"127.0.0.1:5000\"]\nusername = \"ci\"\npassword = \"pw\"\n\
         [registries.\"r.example\"]\ntoken = \"tok\"\n",
    )
    .unwrap();
    assert_eq!(
        OciAuth::from_file(&path, "127.0.0.1:5000").unwrap(),
        Some(OciAuth::Basic {
            username: "ci".into(),
            password: "pw".into()
        })
    );
    assert_eq!(
        OciAuth::from_file(&path, "r.example").unwrap(),
        Some(OciAuth::Bearer {
            token: "tok".into()
        })
    );
    assert_eq!(OciAuth::from_file(&path, "other").unwrap(), None);
    std::fs::write(&path, "[registries.\"h\"]\nuser = \"x\"\n").unwrap();
    assert!(matches!(
        OciAuth::from_file(&path, "h"),
        Err(OciError::Credentials(_))
    ));
}
