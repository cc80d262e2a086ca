//! The caller's side of a hub call's relay ([`temper_hub::Relay`]): what
//! an upstream sends during a `tools/call` reaches the caller of that call.
//!
//! - Progress (`notifications/progress`) goes out as progress of the
//!   caller's request, under its token, when it sent one.
//! - Log messages (`notifications/message`) go out as notifications of the
//!   caller's request, when its transport can carry them (stdio; HTTP when
//!   the answer is an event stream).
//! - An upstream's request (`elicitation/create`, `sampling/createMessage`)
//!   goes to a 2026-07-28 caller that declares the capability as an
//!   `input_required` result (Multi Round-Trip Requests): the upstream's
//!   call is parked ([`Parked`]) until the caller retries the `tools/call`
//!   with `requestState` and `inputResponses`, whose answer goes back to
//!   the upstream; the call then goes on. Any other caller's request is
//!   refused (the upstream gets a JSON-RPC error naming it and why).
//!
//! The hub attributes these to a call only when it is the only one in
//! flight on the upstream's connection (see `temper_hub`'s `relay.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use temper_forge::CallOutput;
use temper_hub::{AskRefused, CallNote, UpstreamAsk};
use tokio::sync::{mpsc, oneshot};

use crate::jsonrpc;
use crate::protocol::meta;

/// The outcome of a hub call, as `Forge::call_native_output` gives it.
pub(crate) type Outcome = Option<Result<CallOutput, String>>;

/// At most this many calls wait for their callers' input at once (per
/// process); an upstream's request beyond it is refused.
pub const MAX_PARKED: usize = 256;

/// How long a parked call waits for its caller's retry before it is
/// dropped (its upstream request then refused). The upstream's own
/// `timeout_ms` bounds the call as a whole, waiting included.
pub const PARK_TTL: Duration = Duration::from_secs(600);

/// A hub call in progress: on this request's task, or spawned once parked
/// (so its time limit keeps running while it waits).
pub(crate) enum Call {
    /// Polled by the request's own task.
    Here(Pin<Box<dyn Future<Output = Outcome> + Send>>),
    /// Running on a task of its own.
    Spawned(tokio::task::JoinHandle<Outcome>),
}

impl Future for Call {
    type Output = Outcome;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        match self.get_mut() {
            Self::Here(f) => f.as_mut().poll(cx),
            Self::Spawned(h) => Pin::new(h).poll(cx).map(|r| match r {
                Ok(outcome) => outcome,
                Err(e) => Some(Err(format!("the hub call's task failed: {e}"))),
            }),
        }
    }
}

impl Call {
    /// The call on a task of its own.
    fn spawned(self) -> tokio::task::JoinHandle<Outcome> {
        match self {
            Self::Here(f) => tokio::spawn(f),
            Self::Spawned(h) => h,
        }
    }
}

/// Who may resume a parked call: the agent and session it was made in,
/// and the tool it called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub agent: String,
    pub session: String,
    pub tool: String,
}

/// A call waiting for its caller's input.
struct Parked {
    owner: Owner,
    call: tokio::task::JoinHandle<Outcome>,
    notes: mpsc::Receiver<CallNote>,
    /// The upstream's request, by the key the caller was given.
    asked: (String, oneshot::Sender<Result<Value, AskRefused>>),
    since: Instant,
}

/// `m` locked (a panic elsewhere does not poison it for the others).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Calls waiting for their callers' input, by `requestState`: at most
/// `capacity`, each for at most `ttl`.
pub(crate) struct ParkedCalls {
    map: Mutex<HashMap<String, Parked>>,
    capacity: usize,
    ttl: Duration,
}

/// The parked calls of this process ([`MAX_PARKED`], [`PARK_TTL`]).
pub(crate) fn parked() -> &'static ParkedCalls {
    static PARKED: OnceLock<ParkedCalls> = OnceLock::new();
    PARKED.get_or_init(|| ParkedCalls::new(MAX_PARKED, PARK_TTL))
}

/// How a caller may answer an upstream's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answers {
    /// A 2026-07-28 caller (input_required results).
    pub modern: bool,
    /// It declares `elicitation`.
    pub elicitation: bool,
    /// It declares `sampling`.
    pub sampling: bool,
}

impl Answers {
    /// What the caller of a request with `params` may answer.
    pub fn of(params: Option<&Value>, modern: bool) -> Self {
        let caps = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(meta::CLIENT_CAPABILITIES));
        let has = |c: &str| modern && caps.and_then(|caps| caps.get(c)).is_some();
        Self {
            modern,
            elicitation: has("elicitation"),
            sampling: has("sampling"),
        }
    }

    /// Whether an upstream's request of `method` may go to the caller.
    fn takes(self, method: &str) -> Result<(), &'static str> {
        let declared = match method {
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            _ => false,
        };
        if declared {
            Ok(())
        } else {
            Err("the caller does not declare that capability")
        }
    }
}

/// Where a driven call ended.
pub(crate) enum Driven {
    /// The call's outcome.
    Done(Outcome),
    /// The call waits for the caller's input: this `input_required` result.
    InputRequired(Value),
}

/// Where a legacy caller's answer to a relayed request comes.
pub type AskReceiver = oneshot::Receiver<Result<Value, AskRefused>>;

/// The capability a caller declares for the request `method`.
pub(crate) fn capability_of(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        _ => None,
    }
}

/// The requests a legacy connection sent its client and waits on, by id
/// (`temper-ask-N`): at most [`MAX_ASKS`] at once.
#[derive(Default)]
pub(crate) struct ClientAsks {
    next: std::sync::atomic::AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Result<Value, AskRefused>>>>,
}

/// Requests a connection's client may owe answers to at once.
pub const MAX_ASKS: usize = 64;

impl ClientAsks {
    /// A new request's id and where its answer will come; `None` when
    /// [`MAX_ASKS`] wait already.
    pub fn register(&self) -> Option<(String, AskReceiver)> {
        let mut waiting = lock(&self.waiting);
        // A receiver dropped (its call ended): its entry goes now.
        waiting.retain(|_, tx| !tx.is_closed());
        if waiting.len() >= MAX_ASKS {
            return None;
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("temper-ask-{n}");
        let (tx, rx) = oneshot::channel();
        waiting.insert(id.clone(), tx);
        Some((id, rx))
    }

    /// Hands the client's answer (`result`, or its `error` object) to the
    /// request `id`; false when no request of ours waits for it.
    pub fn answer(&self, id: &Value, outcome: Result<Value, Value>) -> bool {
        let Some(tx) = id.as_str().and_then(|id| lock(&self.waiting).remove(id)) else {
            return false;
        };
        let answer = outcome.map_err(|error| AskRefused {
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(-32603),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the client's error")
                .to_string(),
        });
        let _ = tx.send(answer);
        true
    }
}

/// Why a retry carrying `requestState` was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResumeError {
    /// No parked call has it (never made, answered already, or expired).
    #[error("requestState is unknown or expired (a call waits for input at most {} s)", PARK_TTL.as_secs())]
    Unknown,
    /// It is another caller's, or another tool's.
    #[error("requestState belongs to another caller or tool")]
    NotYours,
}

impl ParkedCalls {
    /// An empty table of at most `capacity` calls, each kept for `ttl`.
    pub(crate) fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            map: Mutex::default(),
            capacity,
            ttl,
        }
    }

    /// The table, with the calls older than its `ttl` dropped (their
    /// tasks stopped, their upstream requests refused as their reply
    /// senders drop).
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        let mut map = lock(&self.map);
        map.retain(|_, p| {
            let keep = p.since.elapsed() < self.ttl;
            if !keep {
                p.call.abort();
            }
            keep
        });
        map
    }

    /// Takes the call parked under `state` for `owner`, handing the caller's
    /// `responses` to the upstream's request (a missing one refuses it).
    pub(crate) fn resume(
        &self,
        state: &str,
        owner: &Owner,
        responses: Option<&Map<String, Value>>,
    ) -> Result<(Call, mpsc::Receiver<CallNote>), ResumeError> {
        let p = {
            let mut map = self.table();
            let Some(p) = map.get(state) else {
                return Err(ResumeError::Unknown);
            };
            if &p.owner != owner {
                return Err(ResumeError::NotYours);
            }
            map.remove(state).ok_or(ResumeError::Unknown)?
        };
        let (key, reply) = p.asked;
        let answer = match responses.and_then(|r| r.get(&key)) {
            Some(v) => Ok(v.clone()),
            None => Err(AskRefused {
                code: -32602,
                message: "the caller's retry carried no response to it".into(),
            }),
        };
        let _ = reply.send(answer);
        Ok((Call::Spawned(p.call), p.notes))
    }

    /// Parks `call` for the caller to answer `ask`: the `input_required`
    /// result; the call and its notes back when no room is left (the request
    /// is refused then).
    fn park(
        &self,
        call: Call,
        notes: mpsc::Receiver<CallNote>,
        ask: UpstreamAsk,
        owner: &Owner,
    ) -> Result<Value, (Call, mpsc::Receiver<CallNote>)> {
        let mut map = self.table();
        if map.len() >= self.capacity {
            drop(map);
            let _ = ask.reply.send(Err(AskRefused::new(
                &ask.upstream,
                ask.method,
                &format!(
                    "{} calls already wait for their callers' input",
                    self.capacity
                ),
            )));
            return Err((call, notes));
        }
        let state = format!("{:032x}", rand::random::<u128>());
        let key = format!("{}:{}", ask.upstream, ask.method);
        let request = json!({ "method": ask.method, "params": ask.params });
        map.insert(
            state.clone(),
            Parked {
                owner: owner.clone(),
                call: call.spawned(),
                notes,
                asked: (key.clone(), ask.reply),
                since: Instant::now(),
            },
        );
        Ok(json!({
            "resultType": "input_required",
            "inputRequests": { key: request },
            "requestState": state,
        }))
    }
}

/// The rest of a drive: the caller's progress token and notes.
pub(crate) struct Sink<'a> {
    /// Where the caller's request notes go.
    pub notes: &'a dyn super::Notifier,
    /// The caller's progress token.
    pub token: Option<&'a Value>,
    /// Whether its transport carries request notes.
    pub carries: bool,
    /// The lowest level of log message the caller takes (an index into
    /// `LOG_LEVELS`); `None`: none.
    pub log_level: Option<usize>,
}

/// The lowest log level the caller of a request with `params` takes: a
/// 2026-07-28 request opts in with `_meta["io.modelcontextprotocol/logLevel"]`
/// (none without it); a legacy caller takes every level (Temper keeps no
/// `logging/setLevel` state).
pub(crate) fn log_level(params: Option<&Value>, modern: bool) -> Option<usize> {
    if !modern {
        return Some(0);
    }
    let level = params?.get("_meta")?.get(meta::LOG_LEVEL)?.as_str()?;
    super::LOG_LEVELS.iter().position(|l| *l == level)
}

/// Whether a log message with `params` is at or above `min`.
fn at_least(params: &Value, min: usize) -> bool {
    let level = params.get("level").and_then(Value::as_str).unwrap_or("");
    super::LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .is_some_and(|l| l >= min)
}

/// Runs `call` to its end, relaying its notes to `sink`; parks it and
/// answers `input_required` when the upstream asks something `answers`
/// allows. Returns how many progress notifications were relayed too.
pub(crate) async fn drive(
    call: Call,
    mut notes: mpsc::Receiver<CallNote>,
    sink: &Sink<'_>,
    answers: Answers,
    owner: &Owner,
) -> (Driven, usize) {
    let mut call = call;
    let mut relayed = 0usize;
    loop {
        let note = tokio::select! {
            biased;
            Some(note) = notes.recv() => note,
            outcome = &mut call => {
                // What came before the end goes first.
                while let Ok(note) = notes.try_recv() {
                    if let CallNote::Progress(_) | CallNote::Log(_) = note {
                        relayed += usize::from(pass_on(note, sink));
                    }
                }
                return (Driven::Done(outcome), relayed);
            }
        };
        match note {
            CallNote::Ask(ask) if !answers.modern => relay_to_legacy(ask, sink),
            CallNote::Ask(ask) => {
                if let Err(why) = answers.takes(ask.method) {
                    let _ = ask
                        .reply
                        .send(Err(AskRefused::new(&ask.upstream, ask.method, why)));
                    continue;
                }
                match parked().park(call, notes, ask, owner) {
                    Ok(result) => return (Driven::InputRequired(result), relayed),
                    Err(back) => (call, notes) = back,
                }
            }
            note => relayed += usize::from(pass_on(note, sink)),
        }
    }
}

/// Sends the upstream's request to a legacy caller that declared its
/// capability (its answer goes back to the upstream when it comes), or
/// refuses it naming why.
fn relay_to_legacy(ask: UpstreamAsk, sink: &Sink<'_>) {
    let UpstreamAsk {
        upstream,
        method,
        params,
        reply,
    } = ask;
    match sink.notes.ask(method, params) {
        Some(answer) => {
            tokio::spawn(async move {
                let answer = answer.await.unwrap_or_else(|_| {
                    Err(AskRefused::new(
                        &upstream,
                        method,
                        "the caller's connection ended before it answered",
                    ))
                });
                let _ = reply.send(answer);
            });
        }
        None => {
            let _ = reply.send(Err(AskRefused::new(
                &upstream,
                method,
                "this caller (an older revision) did not declare that capability, or its transport cannot carry requests",
            )));
        }
    }
}

/// Sends a progress or log note to the caller; true for a progress
/// notification relayed.
fn pass_on(note: CallNote, sink: &Sink<'_>) -> bool {
    match note {
        CallNote::Progress(params) => {
            let Some(params) = sink.token.and_then(|t| relayed_progress(&params, t)) else {
                return false;
            };
            sink.notes
                .request_note(jsonrpc::notification("notifications/progress", params));
            true
        }
        CallNote::Log(params) => {
            if sink.carries && sink.log_level.is_some_and(|min| at_least(&params, min)) {
                sink.notes
                    .request_note(jsonrpc::notification("notifications/message", params));
            }
            false
        }
        CallNote::Ask(_) => false,
    }
}

/// The params of a relayed progress notification: the upstream's
/// `progress` (a number), `total` (a number) and `message` (a string) under
/// the caller's `token`; `None` when the upstream's has no numeric
/// `progress`.
pub(crate) fn relayed_progress(note: &Value, token: &Value) -> Option<Value> {
    let progress = note.get("progress").filter(|p| p.is_number())?;
    let mut params = Map::new();
    params.insert("progressToken".into(), token.clone());
    params.insert("progress".into(), progress.clone());
    if let Some(total) = note.get("total").filter(|t| t.is_number()) {
        params.insert("total".into(), total.clone());
    }
    if let Some(message) = note.get("message").filter(|m| m.is_string()) {
        params.insert("message".into(), message.clone());
    }
    Some(Value::Object(params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_messages_follow_the_callers_opt_in() {
        let asked = json!({"_meta": {meta::LOG_LEVEL: "warning"}});
        let min = log_level(Some(&asked), true).unwrap();
        assert!(at_least(&json!({"level": "error"}), min));
        assert!(at_least(&json!({"level": "warning"}), min));
        assert!(!at_least(&json!({"level": "info"}), min));
        assert!(!at_least(&json!({"level": "loud"}), min));
        // A modern request without the opt-in takes none; a legacy one all.
        assert_eq!(log_level(Some(&json!({})), true), None);
        assert_eq!(log_level(None, false), Some(0));
    }

    #[test]
    fn answers_follow_the_revision_and_the_declared_capabilities() {
        let params = json!({"_meta": {meta::CLIENT_CAPABILITIES: {"elicitation": {}}}});
        let modern = Answers::of(Some(&params), true);
        assert!(modern.takes("elicitation/create").is_ok());
        assert!(modern.takes("sampling/createMessage").is_err());
        // The same capabilities on a legacy request: nothing goes to it.
        let legacy = Answers::of(Some(&params), false);
        assert!(!legacy.elicitation && !legacy.sampling);
        assert!(legacy.takes("elicitation/create").is_err());
    }

    #[tokio::test]
    async fn a_legacy_clients_answers_go_to_the_requests_that_wait_for_them() {
        let asks = ClientAsks::default();
        let (id, answer) = asks.register().unwrap();
        assert!(id.starts_with("temper-ask-"));
        // Not ours: left alone.
        assert!(!asks.answer(&json!("temper-ask-99"), Ok(json!({}))));
        assert!(!asks.answer(&json!(1), Ok(json!({}))));
        assert!(asks.answer(&json!(id), Err(json!({"code": -1, "message": "no"}))));
        assert_eq!(
            answer.await.unwrap(),
            Err(AskRefused {
                code: -1,
                message: "no".into()
            })
        );
        // Answered once only.
        assert!(!asks.answer(&json!(id), Ok(json!({}))));
        // Bounded: the receivers kept, no more than MAX_ASKS wait.
        let kept: Vec<_> = (0..MAX_ASKS).map(|_| asks.register().unwrap()).collect();
        assert!(asks.register().is_none());
        drop(kept);
        // Their callers gone: room again.
        assert!(asks.register().is_some());
    }

    /// An upstream's elicitation for `park`, and where its answer goes.
    fn asking() -> (UpstreamAsk, oneshot::Receiver<Result<Value, AskRefused>>) {
        let (reply, answered) = oneshot::channel();
        let ask = UpstreamAsk {
            upstream: "up".into(),
            method: "elicitation/create",
            params: json!({"message": "name?"}),
            reply,
        };
        (ask, answered)
    }

    fn pending_call() -> Call {
        Call::Here(Box::pin(std::future::pending()))
    }

    #[tokio::test]
    async fn parked_calls_are_bounded_and_the_one_past_the_bound_is_refused() {
        let table = ParkedCalls::new(2, PARK_TTL);
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (ask, answered) = asking();
            let (_tx, notes) = mpsc::channel(1);
            assert!(table.park(pending_call(), notes, ask, &owner("a")).is_ok());
            kept.push(answered);
        }
        let (ask, answered) = asking();
        let (_tx, notes) = mpsc::channel(1);
        // Handed back to go on (its upstream refused), not parked.
        assert!(table.park(pending_call(), notes, ask, &owner("a")).is_err());
        let refused = answered.await.unwrap().unwrap_err();
        assert!(
            refused.message.contains("2 calls already wait"),
            "{}",
            refused.message
        );
        assert_eq!(lock(&table.map).len(), 2);
    }

    #[tokio::test]
    async fn an_expired_parked_call_is_dropped_and_its_upstream_refused() {
        let table = ParkedCalls::new(MAX_PARKED, Duration::ZERO);
        let (ask, answered) = asking();
        let (_tx, notes) = mpsc::channel(1);
        let Ok(result) = table.park(pending_call(), notes, ask, &owner("a")) else {
            panic!("parked")
        };
        let state = result["requestState"].as_str().unwrap();
        assert!(matches!(
            table.resume(state, &owner("a"), None),
            Err(ResumeError::Unknown)
        ));
        // Its reply sender dropped with it: the upstream hears a refusal.
        assert!(answered.await.is_err());
        assert!(lock(&table.map).is_empty());
    }

    fn owner(agent: &str) -> Owner {
        Owner {
            agent: agent.into(),
            session: "default".into(),
            tool: "t".into(),
        }
    }

    #[tokio::test]
    async fn a_parked_call_is_resumed_by_its_owner_only_and_once() {
        let (tx, notes) = mpsc::channel(4);
        let (reply, answered) = oneshot::channel();
        let ask = UpstreamAsk {
            upstream: "up".into(),
            method: "elicitation/create",
            params: json!({"message": "name?"}),
            reply,
        };
        let call = Call::Here(Box::pin(async { Some(Ok(CallOutput::value(json!(1)))) }));
        let table = ParkedCalls::new(MAX_PARKED, PARK_TTL);
        let Ok(result) = table.park(call, notes, ask, &owner("alice")) else {
            panic!("parked")
        };
        assert_eq!(result["resultType"], "input_required");
        let key = "up:elicitation/create";
        assert_eq!(result["inputRequests"][key]["method"], "elicitation/create");
        assert_eq!(
            result["inputRequests"][key]["params"],
            json!({"message": "name?"})
        );
        let state = result["requestState"].as_str().unwrap().to_string();
        assert_eq!(state.len(), 32);
        // Another agent, another tool: refused, and the call stays parked.
        assert!(matches!(
            table.resume(&state, &owner("mallory"), None),
            Err(ResumeError::NotYours)
        ));
        let mut other_tool = owner("alice");
        other_tool.tool = "u".into();
        assert!(matches!(
            table.resume(&state, &other_tool, None),
            Err(ResumeError::NotYours)
        ));
        let responses = json!({key: {"action": "accept", "content": {"name": "Ada"}}});
        let (call, _notes) = table
            .resume(&state, &owner("alice"), responses.as_object())
            .unwrap();
        assert_eq!(
            answered.await.unwrap(),
            Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
        );
        assert!(matches!(call.await, Some(Ok(_))));
        // Once only.
        assert!(matches!(
            table.resume(&state, &owner("alice"), None),
            Err(ResumeError::Unknown)
        ));
        drop(tx);
    }
}
