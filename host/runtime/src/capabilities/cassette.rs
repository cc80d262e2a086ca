//! Fetch cassettes: record the HTTP exchanges of a run, replay them later
//! with no network at all.
//!
//! - **Record** ([`Cassette::record`], `--record FILE`): every exchange the
//!   `fetch` transport completes is stored, after the policy let it through
//!   (a refused request never reaches the cassette). The file is rewritten
//!   atomically after each exchange, so it is complete whenever the run
//!   stops.
//! - **Replay** ([`Cassette::replay`], `--replay FILE`): `fetch` is served
//!   from the file only: no name lookup, no socket. A request the cassette
//!   does not hold fails with [`CassetteError::UnknownRequest`], naming the
//!   method and URL. The policy still applies to every request and redirect
//!   hop (`check_url`: scheme, userinfo, domain rules, IP literals) and to
//!   every replayed response (header count and bytes, body size), so a
//!   cassette can never widen what a tool may fetch. Only the check of the
//!   addresses a name resolves to has nothing to look at.
//!
//! # Matching
//!
//! A request is identified by its method (upper case), its URL (as the
//! policy normalized it) and, when it has a body, the blake3 of the body.
//! Request headers do not take part and are not stored (they may carry
//! credentials). Redirects are stored hop by hop: each hop is its own
//! exchange (a 3xx with its headers; redirect bodies are not read, as in a
//! live run), and replay follows them through the same redirect logic as a
//! live run. When a request was seen several times, replay serves the
//! recorded responses in order and then repeats the last one.
//!
//! # File format
//!
//! JSON, deterministic: exchanges sorted by method, URL and body hash (the
//! order they were seen within one request), fixed field order, no
//! timestamps, pretty-printed with a final newline.
//!
//! ```json
//! {
//!   "format": "temper-cassette",
//!   "version": 1,
//!   "interactions": [
//!     {
//!       "request": { "method": "GET", "url": "https://api.example.test/v1/items" },
//!       "response": {
//!         "status": 200,
//!         "headers": [["content-type", "application/json"]],
//!         "body": "{\"items\":[]}"
//!       }
//!     },
//!     {
//!       "request": { "method": "POST", "url": "https://api.example.test/v1/echo",
//!                    "body_blake3": "<64 hex digits>" },
//!       "response": { "status": 201, "headers": [], "body_base64": "AAEC" }
//!     }
//!   ]
//! }
//! ```
//!
//! A response body that is valid UTF-8 is stored as `body` text, any other
//! as `body_base64` (standard alphabet, padded); neither means empty.
//! Headers are `[name, value]` pairs in the order the server sent them.
//! Unknown keys, another `format` or `version`, a bad URL, method, status,
//! hash or base64 are errors naming the interaction.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// The `format` value of every cassette file.
pub const FORMAT: &str = "temper-cassette";
/// The cassette format version this host reads and writes.
pub const VERSION: u32 = 1;

/// Errors of the fetch cassette; each names the file, and an unknown
/// request names its method and URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CassetteError {
    /// The cassette file could not be read.
    #[error("fetch cassette {path}: cannot read: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The cassette file could not be written.
    #[error("fetch cassette {path}: cannot write: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The file is not a cassette this host understands.
    #[error("fetch cassette {path}: invalid: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the interaction when it is one of them.
        message: String,
    },
    /// Replay mode: the cassette holds no response for this request.
    #[error(
        "fetch: no recorded response for {method} {url}{} in cassette {path} (replay mode: no network)",
        body_note(.body_blake3)
    )]
    UnknownRequest {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// blake3 of the request body, hex, when it had one.
        body_blake3: Option<String>,
        /// The cassette.
        path: PathBuf,
    },
}

fn body_note(hash: &Option<String>) -> String {
    match hash {
        Some(h) => format!(" with body blake3 {h}"),
        None => String::new(),
    }
}

/// Whether a cassette records or replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CassetteMode {
    /// Exchanges go to the network and are written to the file.
    Record,
    /// Exchanges are served from the file; the network is never used.
    Replay,
}

/// What identifies a request in a cassette.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestKey {
    method: String,
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_blake3: Option<String>,
}

impl RequestKey {
    fn new(method: &str, url: &str, body: Option<&[u8]>) -> Self {
        RequestKey {
            method: method.to_ascii_uppercase(),
            url: url.to_string(),
            body_blake3: body.map(|b| blake3::hash(b).to_hex().to_string()),
        }
    }
}

/// One recorded response (a redirect hop or a final response).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedResponse {
    /// HTTP status code.
    pub status: u16,
    /// Header pairs, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body (empty for redirect hops).
    pub body: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    format: String,
    version: u32,
    interactions: Vec<FileInteraction>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileInteraction {
    request: RequestKey,
    response: FileResponse,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileResponse {
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
}

/// A fetch cassette, shared by the transport (cheap to clone). Open one
/// with [`Cassette::record`] or [`Cassette::replay`] and hand it to
/// [`RuntimeBuilder::cassette`](crate::RuntimeBuilder::cassette).
#[derive(Clone)]
pub struct Cassette {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    mode: CassetteMode,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Every exchange, in the order recorded (or as read from the file).
    interactions: Vec<(RequestKey, RecordedResponse)>,
    /// Replay: the responses per request, in order.
    by_key: HashMap<RequestKey, Vec<usize>>,
    /// Replay: how many times each request has been served.
    served: HashMap<RequestKey, usize>,
}

impl std::fmt::Debug for Cassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cassette")
            .field("path", &self.inner.path)
            .field("mode", &self.inner.mode)
            .field("interactions", &self.len())
            .finish()
    }
}

impl Cassette {
    /// Starts recording into `path`: writes an empty cassette there at once
    /// (replacing any file), then rewrites it after each exchange.
    pub fn record(path: impl Into<PathBuf>) -> Result<Self, CassetteError> {
        let cassette = Cassette::new(path.into(), CassetteMode::Record, State::default());
        cassette.save(&cassette.inner.state.lock().expect("cassette lock"))?;
        Ok(cassette)
    }

    /// Opens `path` for replay: reads and validates the whole file.
    pub fn replay(path: impl Into<PathBuf>) -> Result<Self, CassetteError> {
        let path = path.into();
        let text = std::fs::read_to_string(&path).map_err(|e| CassetteError::Read {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let state = parse(&text).map_err(|message| CassetteError::Format {
            path: path.clone(),
            message,
        })?;
        Ok(Cassette::new(path, CassetteMode::Replay, state))
    }

    fn new(path: PathBuf, mode: CassetteMode, state: State) -> Self {
        Cassette {
            inner: Arc::new(Inner {
                path,
                mode,
                state: Mutex::new(state),
            }),
        }
    }

    /// The cassette file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Recording or replaying.
    pub fn mode(&self) -> CassetteMode {
        self.inner.mode
    }

    /// How many exchanges the cassette holds.
    pub fn len(&self) -> usize {
        self.inner
            .state
            .lock()
            .expect("cassette lock")
            .interactions
            .len()
    }

    /// Whether the cassette holds no exchange.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replay: the next recorded response for this request.
    pub(crate) fn lookup(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
    ) -> Result<RecordedResponse, CassetteError> {
        let key = RequestKey::new(method, url, body);
        let mut state = self.inner.state.lock().expect("cassette lock");
        let Some(indices) = state.by_key.get(&key) else {
            return Err(CassetteError::UnknownRequest {
                method: key.method,
                url: key.url,
                body_blake3: key.body_blake3,
                path: self.inner.path.clone(),
            });
        };
        let served = state.served.get(&key).copied().unwrap_or(0);
        let index = indices[served.min(indices.len() - 1)];
        let response = state.interactions[index].1.clone();
        state.served.insert(key, served + 1);
        Ok(response)
    }

    /// Record: stores one exchange and rewrites the file.
    pub(crate) fn store(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        response: RecordedResponse,
    ) -> Result<(), CassetteError> {
        let key = RequestKey::new(method, url, body);
        let mut state = self.inner.state.lock().expect("cassette lock");
        state.interactions.push((key, response));
        self.save(&state)
    }

    /// Writes the cassette: sorted, pretty JSON, via a temporary file and a
    /// rename so a reader never sees half a file.
    fn save(&self, state: &State) -> Result<(), CassetteError> {
        let path = &self.inner.path;
        let text = render(&state.interactions);
        let write_err = |e: std::io::Error| CassetteError::Write {
            path: path.clone(),
            message: e.to_string(),
        };
        crate::fsutil::write_atomically(path, text.as_bytes()).map_err(write_err)
    }
}

impl Cassette {
    /// A replay cassette from JSON given in a forge request (a test case's
    /// `cassette`): the file format's document, or its `interactions`
    /// array alone. `label` names it in messages where a file's path
    /// would (`testCases[0].cassette`).
    pub fn from_json(label: &str, value: &serde_json::Value) -> Result<Self, CassetteError> {
        let document = match value {
            serde_json::Value::Array(interactions) => serde_json::json!({
                "format": FORMAT,
                "version": VERSION,
                "interactions": interactions,
            }),
            other => other.clone(),
        };
        let state = parse(&document.to_string()).map_err(|message| CassetteError::Format {
            path: PathBuf::from(label),
            message,
        })?;
        Ok(Cassette::new(
            PathBuf::from(label),
            CassetteMode::Replay,
            state,
        ))
    }
}

tokio::task_local! {
    static SCOPED: Cassette;
}

/// Runs `fut` with `cassette` serving every `fetch` it makes, in place of
/// the runtime's transport (replay: no network), e.g. one test case of a
/// forge. The policy still checks every request and response.
pub async fn scoped<F: std::future::Future>(cassette: Cassette, fut: F) -> F::Output {
    SCOPED.scope(cassette, fut).await
}

/// The cassette [`scoped`] put in place for the running task, if any.
pub(crate) fn scoped_cassette() -> Option<Cassette> {
    SCOPED.try_with(Cassette::clone).ok()
}

/// The file's text for these exchanges: sorted by request (stable, so
/// repeated requests keep their order), no timestamps.
fn render(interactions: &[(RequestKey, RecordedResponse)]) -> String {
    let mut sorted: Vec<&(RequestKey, RecordedResponse)> = interactions.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let file = FileFormat {
        format: FORMAT.to_string(),
        version: VERSION,
        interactions: sorted
            .into_iter()
            .map(|(key, r)| {
                let (body, body_base64) = match std::str::from_utf8(&r.body) {
                    Ok(text) => (Some(text.to_string()), None),
                    Err(_) => (None, Some(base64_encode(&r.body))),
                };
                FileInteraction {
                    request: key.clone(),
                    response: FileResponse {
                        status: r.status,
                        headers: r.headers.clone(),
                        body,
                        body_base64,
                    },
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).expect("cassette serializes");
    text.push('\n');
    text
}

/// Parses and validates a cassette file's text.
fn parse(text: &str) -> Result<State, String> {
    let file: FileFormat = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if file.format != FORMAT {
        return Err(format!(
            "format is \"{}\", expected \"{FORMAT}\"",
            file.format
        ));
    }
    if file.version != VERSION {
        return Err(format!(
            "version {} is not supported (this host reads version {VERSION})",
            file.version
        ));
    }
    let mut state = State::default();
    for (i, item) in file.interactions.into_iter().enumerate() {
        let at = |why: String| format!("interaction {i}: {why}");
        let key = item.request;
        if key.method.is_empty()
            || key.method != key.method.to_ascii_uppercase()
            || !key.method.bytes().all(|b| b.is_ascii_alphabetic())
        {
            return Err(at(format!(
                "bad method \"{}\" (upper-case letters)",
                key.method
            )));
        }
        let parsed =
            url::Url::parse(&key.url).map_err(|e| at(format!("bad URL \"{}\": {e}", key.url)))?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return Err(at(format!("URL \"{}\" is not http or https", key.url)));
        }
        if let Some(hash) = &key.body_blake3
            && (hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        {
            return Err(at(format!(
                "body_blake3 \"{hash}\" is not 64 lower-case hex digits"
            )));
        }
        let r = item.response;
        if !(100..=599).contains(&r.status) {
            return Err(at(format!("status {} is not an HTTP status", r.status)));
        }
        let body = match (r.body, r.body_base64) {
            (Some(_), Some(_)) => return Err(at("both body and body_base64".into())),
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => {
                base64_decode(&b64).map_err(|e| at(format!("body_base64: {e}")))?
            }
            (None, None) => Vec::new(),
        };
        let index = state.interactions.len();
        state.by_key.entry(key.clone()).or_default().push(index);
        state.interactions.push((
            key,
            RecordedResponse {
                status: r.status,
                headers: r.headers,
                body,
            },
        ));
    }
    Ok(state)
}

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes standard base64 with padding; anything else is an error.
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for len in 0..40usize {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = base64_encode(&data);
            assert_eq!(base64_decode(&text).unwrap(), data, "{text}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"f"), "Zg==");
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Z!8=", "Zm9v\n"] {
            assert!(base64_decode(bad).is_err(), "{bad:?}");
        }
    }

    fn response(status: u16, body: &[u8]) -> RecordedResponse {
        RecordedResponse {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: body.to_vec(),
        }
    }

    #[test]
    fn records_sorted_and_replays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let rec = Cassette::record(&path).unwrap();
        assert!(rec.is_empty());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"format\": \"temper-cassette\",\n  \"version\": 1,\n  \"interactions\": []\n}\n"
        );
        rec.store("get", "https://b.example.test/", None, response(200, b"b1"))
            .unwrap();
        rec.store("GET", "https://a.example.test/", None, response(200, b"a"))
            .unwrap();
        rec.store(
            "GET",
            "https://b.example.test/",
            None,
            response(500, &[0, 255]),
        )
        .unwrap();
        rec.store(
            "POST",
            "https://a.example.test/",
            Some(b"x"),
            response(201, b""),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let urls: Vec<String> = doc["interactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| format!("{} {}", i["request"]["method"], i["request"]["url"]))
            .collect();
        assert_eq!(
            urls,
            [
                r#""GET" "https://a.example.test/""#,
                r#""GET" "https://b.example.test/""#,
                r#""GET" "https://b.example.test/""#,
                r#""POST" "https://a.example.test/""#,
            ]
        );
        assert_eq!(doc["interactions"][2]["response"]["body_base64"], "AP8=");
        assert_eq!(
            doc["interactions"][3]["request"]["body_blake3"],
            blake3::hash(b"x").to_hex().as_str()
        );
        assert!(!text.contains("date") && !text.contains("time"), "{text}");

        let play = Cassette::replay(&path).unwrap();
        assert_eq!(play.len(), 4);
        let get = |url: &str| play.lookup("GET", url, None).map(|r| (r.status, r.body));
        assert_eq!(
            get("https://b.example.test/").unwrap(),
            (200, b"b1".to_vec())
        );
        assert_eq!(get("https://b.example.test/").unwrap(), (500, vec![0, 255]));
        // Past the recorded ones, the last repeats.
        assert_eq!(get("https://b.example.test/").unwrap(), (500, vec![0, 255]));
        assert_eq!(
            get("https://a.example.test/").unwrap(),
            (200, b"a".to_vec())
        );
        assert_eq!(
            play.lookup("POST", "https://a.example.test/", Some(b"x"))
                .unwrap()
                .status,
            201
        );
        let err = play
            .lookup("POST", "https://a.example.test/", Some(b"y"))
            .unwrap_err();
        assert!(
            matches!(&err, CassetteError::UnknownRequest { method, url, body_blake3: Some(_), .. }
            if method == "POST" && url == "https://a.example.test/")
        );
        let msg = err.to_string();
        assert!(
            msg.contains("POST https://a.example.test/ with body blake3 ")
                && msg.contains("replay mode: no network"),
            "{msg}"
        );
        let err = play
            .lookup("GET", "https://c.example.test/x", None)
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "fetch: no recorded response for GET https://c.example.test/x in cassette "
            ),
            "{err}"
        );
    }

    #[test]
    fn same_exchanges_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, order: &[usize]| {
            let path = dir.path().join(name);
            let rec = Cassette::record(&path).unwrap();
            let all = [
                ("GET", "https://a.example.test/1"),
                ("HEAD", "https://a.example.test/2"),
                ("GET", "https://0.example.test/"),
            ];
            for &i in order {
                rec.store(all[i].0, all[i].1, None, response(200, b"ok"))
                    .unwrap();
            }
            std::fs::read(&path).unwrap()
        };
        assert_eq!(write("a.json", &[0, 1, 2]), write("b.json", &[2, 1, 0]));
    }

    #[test]
    fn malformed_cassettes_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let case = |text: &str, needle: &str| {
            let path = dir.path().join("bad.json");
            std::fs::write(&path, text).unwrap();
            let err = Cassette::replay(&path).unwrap_err();
            assert!(matches!(err, CassetteError::Format { .. }), "{err:?}");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        };
        let one = |request: &str, response: &str| {
            format!(
                r#"{{"format":"temper-cassette","version":1,"interactions":[{{"request":{request},"response":{response}}}]}}"#
            )
        };
        case("not json", "expected");
        case(
            r#"{"format":"vcr","version":1,"interactions":[]}"#,
            "\"vcr\"",
        );
        case(
            r#"{"format":"temper-cassette","version":2,"interactions":[]}"#,
            "version 2",
        );
        case(
            r#"{"format":"temper-cassette","version":1,"interactions":[],"extra":1}"#,
            "extra",
        );
        let ok_resp = r#"{"status":200}"#;
        case(
            &one(r#"{"method":"get","url":"https://a.test/"}"#, ok_resp),
            "interaction 0: bad method",
        );
        case(&one(r#"{"method":"GET","url":"nope"}"#, ok_resp), "bad URL");
        case(
            &one(r#"{"method":"GET","url":"ftp://a.test/"}"#, ok_resp),
            "not http",
        );
        case(
            &one(
                r#"{"method":"GET","url":"https://a.test/","body_blake3":"xyz"}"#,
                ok_resp,
            ),
            "body_blake3",
        );
        let req = r#"{"method":"GET","url":"https://a.test/"}"#;
        case(&one(req, r#"{"status":42}"#), "status 42");
        case(
            &one(req, r#"{"status":200,"body":"a","body_base64":"YQ=="}"#),
            "both",
        );
        case(
            &one(req, r#"{"status":200,"body_base64":"Y"}"#),
            "body_base64",
        );
        case(&one(req, r#"{"status":200,"cookies":[]}"#), "cookies");

        let missing = dir.path().join("missing.json");
        let err = Cassette::replay(&missing).unwrap_err();
        assert!(matches!(err, CassetteError::Read { .. }), "{err:?}");
        assert!(err.to_string().contains("missing.json"), "{err}");

        let err = Cassette::record(dir.path().join("no/such/dir/c.json")).unwrap_err();
        assert!(matches!(err, CassetteError::Write { .. }), "{err:?}");
    }

    #[test]
    fn a_request_cassette_is_read_from_json() {
        let interactions = serde_json::json!([{
            "request": {"method": "GET", "url": "https://httpstat.us/200"},
            "response": {"status": 200, "headers": [["content-type", "text/plain"]], "body": "200 OK"}
        }]);
        let c = Cassette::from_json("testCases[0].cassette", &interactions).unwrap();
        assert_eq!(c.mode(), CassetteMode::Replay);
        let r = c.lookup("GET", "https://httpstat.us/200", None).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"200 OK"[..]));
        let err = c
            .lookup("GET", "https://httpstat.us/404", None)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "fetch: no recorded response for GET https://httpstat.us/404 in cassette testCases[0].cassette (replay mode: no network)"
        );
        let bad = serde_json::json!([{"request": {"method": "get", "url": "x"}, "response": {"status": 200}}]);
        let err = Cassette::from_json("testCases[1].cassette", &bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "fetch cassette testCases[1].cassette: invalid: interaction 0: bad method \"get\" (upper-case letters)"
        );
    }
}
