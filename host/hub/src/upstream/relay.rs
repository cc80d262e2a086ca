//! What an upstream sends during one of its calls that is meant for the
//! caller, and how it reaches the caller: the call's [`Relay`].
//!
//! MCP over stdio says nothing on the wire about which of a client's
//! requests an upstream's log message, elicitation or sampling request
//! belongs to (progress names its request by token; nothing else does).
//! Temper's upstream connection is shared by every caller, so a message is
//! given to a caller only when it can be attributed: it arrived while that
//! caller's `tools/call` was the only one in flight on the connection
//! ([`attribute`]). Otherwise a log message stays in Temper's own log and a
//! request is refused naming the upstream, never handed to a caller it may
//! not be meant for.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// How many notes a [`Relay`] queue should hold; later notifications are
/// dropped while it is full (progress and logs are advisory), and a
/// request waits for room.
pub const RELAY_QUEUE: usize = 64;

/// One thing an upstream sent during a call, for its caller.
#[derive(Debug)]
pub enum CallNote {
    /// `notifications/progress`: the upstream's `params` (`progress`,
    /// `total`, `message`, and the `progressToken` Temper gave the
    /// upstream, which a relay replaces with its caller's).
    Progress(Value),
    /// `notifications/message` (logging): the upstream's `params`
    /// (`level`, `logger`, `data`) with the upstream's secrets cut out.
    Log(Value),
    /// A request of the upstream's (`elicitation/create`,
    /// `sampling/createMessage`) made during the call.
    Ask(UpstreamAsk),
}

/// A request an upstream made during a call, for the caller to answer.
#[derive(Debug)]
pub struct UpstreamAsk {
    /// The upstream (table name), for messages.
    pub upstream: String,
    /// `elicitation/create` or `sampling/createMessage`.
    pub method: &'static str,
    /// Its `params`, with the upstream's secrets cut out.
    pub params: Value,
    /// Where the caller's answer goes: the result the upstream gets, or a
    /// refusal. Dropping it refuses the request.
    pub reply: oneshot::Sender<Result<Value, AskRefused>>,
}

/// A refusal of an upstream's request: the JSON-RPC error it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRefused {
    /// The JSON-RPC error code.
    pub code: i32,
    /// The message.
    pub message: String,
}

impl AskRefused {
    /// The refusal of `method` asked by `upstream`, saying `why`.
    pub fn new(upstream: &str, method: &str, why: &str) -> Self {
        Self {
            code: -32601,
            message: format!("upstream \"{upstream}\" asked for {method}: {why}"),
        }
    }
}

/// Where the notes of one call go, and whether its caller asked for
/// progress (then the upstream is asked for progress with a token of
/// Temper's).
#[derive(Debug, Clone)]
pub struct Relay {
    /// The call's notes ([`RELAY_QUEUE`] long).
    pub notes: mpsc::Sender<CallNote>,
    /// The caller sent a progress token.
    pub progress: bool,
}

impl Relay {
    /// A relay and the receiving end of its notes.
    pub fn new(progress: bool) -> (Self, mpsc::Receiver<CallNote>) {
        let (notes, rx) = mpsc::channel(RELAY_QUEUE);
        (Self { notes, progress }, rx)
    }
}

/// Whether the upstream's requests of kind `method` may be relayed: the
/// tools file's `relay` list for that upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayRequests {
    /// `elicitation/create` is relayed (and the capability declared).
    pub elicitation: bool,
    /// `sampling/createMessage` is relayed (and the capability declared).
    pub sampling: bool,
}

/// The notes queue of the one `tools/call` in flight, out of `calls` (the
/// queues of every call in flight, `None` for one whose caller gave no
/// relay); `None` when there is not exactly one call in flight, or it has
/// no relay.
pub(super) fn attribute<'a>(
    mut calls: impl Iterator<Item = Option<&'a mpsc::Sender<CallNote>>>,
) -> Option<mpsc::Sender<CallNote>> {
    let first = calls.next()?;
    if calls.next().is_some() {
        return None;
    }
    first.cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sole_call_with_a_relay_is_attributed() {
        let (a, _ra) = Relay::new(false);
        let (b, _rb) = Relay::new(false);
        assert!(attribute(std::iter::empty()).is_none());
        assert!(attribute([Some(&a.notes)].into_iter()).is_some());
        // Two calls in flight: nobody's.
        assert!(attribute([Some(&a.notes), Some(&b.notes)].into_iter()).is_none());
        assert!(attribute([Some(&a.notes), None].into_iter()).is_none());
        // One call, without a relay.
        assert!(attribute([None].into_iter()).is_none());
    }
}
