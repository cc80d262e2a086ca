//! Where a store is: a directory (the embedded SQLite backend) or a
//! PostgreSQL URL (one database several hosts share), parsed from what a
//! person passes as `--store` / `$TEMPER_STORE`.
//!
//! [`StoreLocation::parse`] is the one place that tells the two apart:
//! `postgres://…` and `postgresql://…` (scheme case-insensitive) are
//! database URLs; any other `SCHEME://` is refused (so that a mistyped URL
//! never becomes a directory named `mysql:`); everything else is a
//! directory. [`StoreLocation::open`] opens it.
//!
//! A database URL's password is never shown: [`StoreLocation`]'s `Display`,
//! [`PostgresUrl::redacted`] and every [`LocationError`] print `***` in its
//! place (and drop `password=` query parameters), and an error from the
//! database that repeats the password has it replaced.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Registry;
use super::error::StoreError;

/// The port PostgreSQL listens on unless the URL says otherwise.
pub const DEFAULT_POSTGRES_PORT: u16 = 5432;

/// A parsed `--store` value.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A store directory (`temper.db` and `artifacts/`), SQLite.
    Dir(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresUrl),
}

/// A `postgres://` or `postgresql://` URL, checked and with its parts
/// named for messages. The full URL (password included) is only handed to
/// the database driver.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    url: String,
    redacted: String,
    endpoint: String,
    database: String,
    user: Option<String>,
    secrets: Vec<String>,
}

/// Why a `--store` value cannot be used, or its store cannot be opened.
/// No variant carries a password.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    /// `--store` was given but empty.
    #[error("--store: empty value (pass a directory or a postgres:// URL)")]
    Empty,
    /// No `--store` and no platform data directory to default to.
    #[error("--store: no platform data directory to default to: pass --store DIR or URL")]
    NoDataDir,
    /// A URL with a scheme that is not PostgreSQL's.
    #[error(
        "--store: unsupported URL scheme {scheme:?} in {shown}: a store is a directory or a postgres:// (postgresql://) URL"
    )]
    UnsupportedScheme {
        /// The scheme as written.
        scheme: String,
        /// The value, password removed.
        shown: String,
    },
    /// A `postgres://` URL that does not parse or lacks a part.
    #[error("--store: bad PostgreSQL URL {shown}: {reason}")]
    BadUrl {
        /// The value, password removed.
        shown: String,
        /// What is wrong.
        reason: String,
    },
    /// This build of `temper-store` leaves out the backend the location
    /// names (built without the feature).
    #[error(
        "--store: this build has no {backend} store (temper-store built without its `{feature}` feature)"
    )]
    NotBuilt {
        /// The backend named by the location.
        backend: &'static str,
        /// The `temper-store` feature that builds it.
        feature: &'static str,
    },
    /// The store directory could not be opened.
    #[error("cannot open the store directory {}: {source}", dir.display())]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The PostgreSQL server could not be reached or refused the
    /// connection, or its database could not be set up.
    #[error(
        "cannot open the PostgreSQL store (server {endpoint}, database {database:?}): {detail}"
    )]
    Postgres {
        /// The URL, password removed.
        shown: String,
        /// `HOST:PORT` of the server.
        endpoint: String,
        /// The database name.
        database: String,
        /// The driver's message, password removed.
        detail: String,
    },
}

impl StoreLocation {
    /// Parses a `--store` value: a `postgres://`/`postgresql://` URL, or a
    /// directory. Another `SCHEME://` is refused; so is an empty value.
    pub fn parse(value: &str) -> Result<StoreLocation, LocationError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(LocationError::Empty);
        }
        match scheme_of(trimmed) {
            Some(scheme)
                if scheme.eq_ignore_ascii_case("postgres")
                    || scheme.eq_ignore_ascii_case("postgresql") =>
            {
                PostgresUrl::parse(trimmed).map(StoreLocation::Postgres)
            }
            Some(scheme) => Err(LocationError::UnsupportedScheme {
                scheme: scheme.to_string(),
                shown: redact_loose(trimmed),
            }),
            // A directory is taken as given (leading/trailing spaces are
            // part of a file name).
            None => Ok(StoreLocation::Dir(PathBuf::from(value))),
        }
    }

    /// `--store` as given, or the default: the platform data directory's
    /// `temper` (e.g. `~/.local/share/temper`).
    pub fn from_arg(value: Option<&str>) -> Result<StoreLocation, LocationError> {
        match value {
            Some(v) => StoreLocation::parse(v),
            None => Ok(StoreLocation::Dir(
                dirs::data_dir()
                    .ok_or(LocationError::NoDataDir)?
                    .join("temper"),
            )),
        }
    }

    /// Opens the store: [`Registry::open`] for a directory, the PostgreSQL
    /// backend for a URL (migrating its schema if needed).
    pub fn open(&self) -> Result<Registry, LocationError> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreLocation::Dir(dir) => Registry::open(dir).map_err(|source| LocationError::Dir {
                dir: dir.clone(),
                source,
            }),
            #[cfg(not(feature = "sqlite"))]
            StoreLocation::Dir(_) => Err(LocationError::NotBuilt {
                backend: "SQLite",
                feature: "sqlite",
            }),
            StoreLocation::Postgres(url) => url.open(),
        }
    }

    /// Whether several hosts can share this store (a database server).
    pub fn is_shared(&self) -> bool {
        matches!(self, StoreLocation::Postgres(_))
    }

    /// The store directory, for a directory store.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            StoreLocation::Dir(d) => Some(d),
            StoreLocation::Postgres(_) => None,
        }
    }

    /// Where a host keeps its local state for this store (the CLI's
    /// session files) when not told otherwise: the store directory itself
    /// for a directory store; for a database, a directory of the platform
    /// data directory named after the URL without its password
    /// (`temper/hosts/<16 hex digits>`), so that two databases never share
    /// session files. `None` if there is no platform data directory.
    pub fn default_state_dir(&self) -> Option<PathBuf> {
        match self {
            StoreLocation::Dir(d) => Some(d.clone()),
            StoreLocation::Postgres(url) => {
                let key = blake3::hash(url.redacted().as_bytes()).to_hex();
                Some(
                    dirs::data_dir()?
                        .join("temper")
                        .join("hosts")
                        .join(&key[..16]),
                )
            }
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Dir(d) => write!(f, "{}", d.display()),
            StoreLocation::Postgres(url) => f.write_str(url.redacted()),
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Dir(d) => f.debug_tuple("Dir").field(d).finish(),
            StoreLocation::Postgres(url) => f.debug_tuple("Postgres").field(url).finish(),
        }
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresUrl")
            .field("url", &self.redacted)
            .finish()
    }
}

impl PostgresUrl {
    /// Parses and checks a `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?…]`
    /// URL. The database name is required (a shared store is one named
    /// database); the host may instead come from a `host=` parameter (a
    /// Unix socket directory).
    pub fn parse(value: &str) -> Result<PostgresUrl, LocationError> {
        let shown = redact_loose(value);
        let bad = |reason: &str| LocationError::BadUrl {
            shown: shown.clone(),
            reason: reason.to_string(),
        };
        let url = url::Url::parse(value).map_err(|e| bad(&e.to_string()))?;
        let mut secrets = Vec::new();
        if let Some(pw) = url.password() {
            secrets.push(pw.to_string());
            secrets.push(percent_decode(pw));
        }
        let mut query_host = None;
        let mut query_port = None;
        let mut query_db = None;
        let mut query_user = None;
        for (k, v) in url.query_pairs() {
            match k.as_ref() {
                k if k.contains("password") => secrets.push(v.into_owned()),
                "host" => query_host = Some(v.into_owned()),
                "port" => query_port = Some(v.into_owned()),
                "dbname" => query_db = Some(v.into_owned()),
                "user" => query_user = Some(v.into_owned()),
                _ => {}
            }
        }
        secrets.retain(|s| !s.is_empty());
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.to_string(),
            _ => query_host.unwrap_or_default(),
        };
        if host.is_empty() {
            return Err(bad("no host (postgres://USER@HOST[:PORT]/DATABASE)"));
        }
        let port = match (url.port(), query_port) {
            (Some(p), _) => p,
            (None, Some(p)) => p
                .parse()
                .map_err(|_| bad(&format!("port {p:?} is not a number")))?,
            (None, None) => DEFAULT_POSTGRES_PORT,
        };
        let path_db = url.path().trim_start_matches('/');
        let database = if path_db.is_empty() {
            query_db.unwrap_or_default()
        } else {
            percent_decode(path_db)
        };
        if database.is_empty() {
            return Err(bad(
                "no database name (postgres://USER@HOST[:PORT]/DATABASE)",
            ));
        }
        if database.contains('/') {
            return Err(bad(&format!("database name {database:?} contains `/`")));
        }
        let user = match url.username() {
            "" => query_user,
            u => Some(percent_decode(u)),
        };
        let endpoint = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(PostgresUrl {
            url: value.to_string(),
            redacted: redact_parsed(&url),
            endpoint,
            database,
            user,
            secrets,
        })
    }

    /// The URL as the driver needs it, password included: never print it.
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// The URL with its password replaced by `***` and `password=` query
    /// parameters removed: safe to print.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// `HOST:PORT` of the server (the port defaulted to 5432).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The database name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The user name, if the URL names one.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// `text` with every occurrence of this URL's password replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "***");
        }
        out
    }

    /// Opens the PostgreSQL store at this URL; a failure names the server
    /// (`HOST:PORT`) and the database, never the password.
    #[cfg(feature = "postgres")]
    pub fn open(&self) -> Result<Registry, LocationError> {
        Registry::open_postgres(&self.url).map_err(|e| self.open_error(&e))
    }

    /// This build has no PostgreSQL backend: [`LocationError::NotBuilt`].
    #[cfg(not(feature = "postgres"))]
    pub fn open(&self) -> Result<Registry, LocationError> {
        Err(LocationError::NotBuilt {
            backend: "PostgreSQL",
            feature: "postgres",
        })
    }

    /// The error for a failed open of this database: the server, the
    /// database and the driver's message, password removed.
    pub fn open_error(&self, e: &StoreError) -> LocationError {
        LocationError::Postgres {
            shown: self.redacted.clone(),
            endpoint: self.endpoint.clone(),
            database: self.database.clone(),
            detail: self.scrub(&error_chain(e)),
        }
    }
}

/// `e` and its sources, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The scheme of `value` if it looks like `SCHEME://…` (letters, digits,
/// `+`, `-`, `.`, starting with a letter).
fn scheme_of(value: &str) -> Option<&str> {
    let (scheme, _) = value.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// A parsed URL with its password replaced and password parameters dropped.
fn redact_parsed(url: &url::Url) -> String {
    let mut shown = url.clone();
    if url.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    if url.query().is_some() {
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| !k.contains("password"))
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if kept.is_empty() {
            shown.set_query(None);
        } else {
            shown.query_pairs_mut().clear().extend_pairs(kept);
        }
    }
    shown.to_string()
}

/// `value` with a password removed, whether or not it parses as a URL:
/// the part between `://` and the last `@` before the path keeps only its
/// user name, and `password=` parameters are dropped.
fn redact_loose(value: &str) -> String {
    if let Ok(url) = url::Url::parse(value) {
        return redact_parsed(&url);
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) if query.contains("password") => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.split('=').next().unwrap_or("").contains("password"))
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        _ => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// Decodes `%XX` escapes (invalid ones are kept as written).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(value: &str) -> PostgresUrl {
        match StoreLocation::parse(value).unwrap() {
            StoreLocation::Postgres(u) => u,
            other => panic!("{value}: not a database URL: {other:?}"),
        }
    }

    #[test]
    fn directories_and_urls_are_told_apart() {
        for dir in [
            "store",
            "/var/lib/temper",
            "./postgres",
            "postgres",
            "c:\\x",
        ] {
            assert_eq!(
                StoreLocation::parse(dir).unwrap(),
                StoreLocation::Dir(PathBuf::from(dir)),
                "{dir}"
            );
        }
        for url in [
            "postgres://u@h/db",
            "postgresql://u@h:6543/db",
            "POSTGRES://u@h/db",
        ] {
            assert!(StoreLocation::parse(url).unwrap().is_shared(), "{url}");
        }
        let u = pg("postgresql://temper:s3cret@db.example:6543/registry?sslmode=disable");
        assert_eq!(u.endpoint(), "db.example:6543");
        assert_eq!(u.database(), "registry");
        assert_eq!(u.user(), Some("temper"));
        assert_eq!(
            u.redacted(),
            "postgresql://temper:***@db.example:6543/registry?sslmode=disable"
        );
        assert_eq!(pg("postgres://u@127.0.0.1/d").endpoint(), "127.0.0.1:5432");
        assert_eq!(pg("postgres://u@[::1]:7/d").endpoint(), "[::1]:7");
        let socket = pg("postgres:///d?host=/run/postgresql&port=5433");
        assert_eq!(socket.endpoint(), "/run/postgresql:5433");
    }

    #[test]
    fn bad_values_are_refused_without_the_password() {
        for (value, why) in [
            ("", "empty"),
            ("   ", "empty"),
            ("mysql://u:hunter2@h/db", "unsupported URL scheme \"mysql\""),
            ("sqlite://x", "unsupported URL scheme"),
            ("postgres://u:hunter2@/db", "empty host"),
            ("postgres://u:hunter2@:5/db", "bad PostgreSQL URL"),
            ("postgres:///db?password=hunter2", "no host"),
            ("postgres://u:hunter2@h", "no database name"),
            ("postgres://u:hunter2@h/", "no database name"),
            ("postgres://u:hunter2@h:99999/db", "bad PostgreSQL URL"),
            ("postgres://u:hunter2@h/a/b", "contains `/`"),
            (
                "postgres:///db?host=h&port=x&password=hunter2",
                "not a number",
            ),
        ] {
            let err = StoreLocation::parse(value).unwrap_err().to_string();
            assert!(err.contains(why), "{value:?}: {err}");
            assert!(!err.contains("hunter2"), "{value:?} leaks: {err}");
        }
    }

    #[test]
    fn the_password_is_never_shown() {
        let u = pg("postgres://alice:p%40ss%2Fw0rd@h/db?password=other&application_name=t");
        let shown = format!(
            "{} {:?} {}",
            u.redacted(),
            u,
            StoreLocation::Postgres(u.clone())
        );
        for secret in ["p%40ss%2Fw0rd", "p@ss/w0rd", "other"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("application_name=t"), "{shown}");
        // A driver message that repeats the password is scrubbed.
        assert_eq!(
            u.scrub("auth failed for alice with p@ss/w0rd (other)"),
            "auth failed for alice with *** (***)"
        );
        assert!(u.expose().contains("p%40ss%2Fw0rd"));
        assert_eq!(
            redact_loose("postgres://u:pw@h:notaport/db?password=x&a=b"),
            "postgres://u:***@h:notaport/db?a=b"
        );
    }

    #[test]
    fn an_open_failure_names_the_server_and_hides_the_password() {
        let u = pg("postgres://temper:hunter2@db.internal:6543/registry");
        let e = StoreError::Invalid {
            op: "open",
            detail: "password authentication failed (sent hunter2)".into(),
        };
        let text = u.open_error(&e).to_string();
        assert!(text.contains("server db.internal:6543"), "{text}");
        assert!(text.contains("database \"registry\""), "{text}");
        assert!(text.contains("password authentication failed"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn state_dirs_differ_per_database_and_default_to_the_store_dir() {
        let dir = StoreLocation::parse("some/store").unwrap();
        assert_eq!(
            dir.default_state_dir().unwrap(),
            PathBuf::from("some/store")
        );
        if dirs::data_dir().is_some() {
            let a = StoreLocation::parse("postgres://u:one@h/a").unwrap();
            let a2 = StoreLocation::parse("postgres://u:two@h/a").unwrap();
            let b = StoreLocation::parse("postgres://u@h/b").unwrap();
            let (sa, sa2, sb) = (
                a.default_state_dir().unwrap(),
                a2.default_state_dir().unwrap(),
                b.default_state_dir().unwrap(),
            );
            assert_eq!(sa, sa2, "the password does not change the host's state dir");
            assert_ne!(sa, sb);
        }
    }

    #[test]
    fn a_directory_store_opens() {
        let tmp = tempfile::tempdir().unwrap();
        let loc = StoreLocation::parse(tmp.path().join("s").to_str().unwrap()).unwrap();
        let registry = loc.open().unwrap();
        assert_eq!(registry.backend().kind(), super::super::BackendKind::Sqlite);
        // A file where the directory should be: a typed error naming it.
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = StoreLocation::Dir(file.clone()).open().unwrap_err();
        assert!(matches!(err, LocationError::Dir { .. }), "{err}");
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }
}
