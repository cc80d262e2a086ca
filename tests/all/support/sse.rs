//! Reading Server-Sent Events as the MCP Streamable HTTP tests get them,
//! with `sse-stream` (the parser rmcp's Streamable HTTP client uses): it
//! cuts lines at `\n`, `\r\n` or `\r`, joins multi-line `data:` fields and
//! decodes UTF-8 per line, so a character split across two chunks arrives
//! whole.

use bytes::Bytes;
use futures_util::{Stream, StreamExt, stream};
use serde_json::Value;
use sse_stream::SseStream;
use tokio::sync::mpsc;

/// The JSON-RPC messages of an SSE byte stream's events (comments and
/// events without data skipped); panics on malformed SSE or JSON.
pub async fn sse_messages_of<S, E>(chunks: S) -> Vec<Value>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut events = std::pin::pin!(SseStream::from_bytes_stream(chunks));
    let mut out = Vec::new();
    while let Some(event) = events.next().await {
        if let Some(m) = message(event.expect("well-formed SSE")) {
            out.push(m);
        }
    }
    out
}

/// The JSON-RPC messages of the SSE `text` (a whole body).
pub fn sse_messages(text: &str) -> Vec<Value> {
    let chunks = stream::iter([Ok::<_, std::io::Error>(Bytes::copy_from_slice(
        text.as_bytes(),
    ))]);
    futures_util::FutureExt::now_or_never(sse_messages_of(chunks))
        .expect("an in-memory stream is ready at once")
}

fn message(event: sse_stream::Sse) -> Option<Value> {
    let data = event.data?;
    if data.is_empty() {
        return None;
    }
    Some(serde_json::from_str(&data).unwrap_or_else(|e| panic!("SSE data {data:?}: {e}")))
}

/// Reads the SSE stream `resp` in a task; each message arrives on the
/// returned channel as its event completes.
pub fn sse_receiver(resp: reqwest::Response) -> mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = mpsc::unbounded_channel();
    let chunks = stream::unfold(resp, |mut resp| async move {
        match resp.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), resp)),
            Ok(None) => None,
            Err(e) => Some((Err(e), resp)),
        }
    });
    tokio::spawn(async move {
        let mut events = std::pin::pin!(SseStream::from_bytes_stream(chunks));
        while let Some(Ok(event)) = events.next().await {
            if let Some(m) = message(event)
                && tx.send(m).is_err()
            {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunked(parts: &[&[u8]]) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
        let parts: Vec<_> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        stream::iter(parts)
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_arrives_whole() {
        let event = "event: message\ndata: {\"text\":\"h\u{e9}llo \u{4e16}\u{754c}\"}\n\n";
        let bytes = event.as_bytes();
        // Cut inside the two-byte é and inside the three-byte 世.
        let e_acute = event.find('\u{e9}').unwrap() + 1;
        let shi = event.find('\u{4e16}').unwrap() + 2;
        let got = sse_messages_of(chunked(&[
            &bytes[..e_acute],
            &bytes[e_acute..shi],
            &bytes[shi..],
        ]))
        .await;
        assert_eq!(got, [json!({"text": "h\u{e9}llo \u{4e16}\u{754c}"})]);
    }

    #[tokio::test]
    async fn crlf_line_ends_multi_line_data_and_comments() {
        let got = sse_messages_of(chunked(&[
            b": keep-alive\r\n\r\nevent: message\r\ndata: {\"a\":\r",
            b"\ndata: 1}\r\n\r\n",
            b"data: {\"b\": 2}\n\n",
        ]))
        .await;
        assert_eq!(got, [json!({"a": 1}), json!({"b": 2})]);
        assert_eq!(
            sse_messages("data: [1,\ndata: 2]\n\n: ping\n\n"),
            [json!([1, 2])]
        );
    }
}
