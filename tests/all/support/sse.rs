//! Reading Server-Sent Events as the MCP Streamable HTTP tests get them.

use serde_json::Value;
use tokio::sync::mpsc;

/// The JSON-RPC messages in the `data:` lines of SSE `text`.
pub fn sse_messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// Reads the SSE stream `resp` in a task; each message arrives on the
/// returned channel as its event completes.
pub fn sse_receiver(mut resp: reqwest::Response) -> mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                for m in sse_messages(&event) {
                    let _ = tx.send(m);
                }
            }
        }
    });
    rx
}
