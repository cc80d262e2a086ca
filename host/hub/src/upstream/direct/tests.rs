//! The direct path against `cat` children: routing by id, progress, log
//! messages and requests attributed to the sole call, timeouts, the
//! request line.

use std::time::Duration;

use serde_json::json;

use super::*;

/// A direct path whose requests go to a child that discards them.
fn direct() -> (Arc<Direct>, tokio::process::Child) {
    let mut child = tokio::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("cat runs");
    let stdin = child.stdin.take().unwrap();
    (relaying(stdin), child)
}

/// A direct path over `stdin` that relays elicitation (not sampling)
/// and cuts `s3cr3t-value` out of what it relays.
fn relaying(stdin: tokio::process::ChildStdin) -> Arc<Direct> {
    let d = Arc::new(Direct::new(
        Arc::new(tokio::sync::Mutex::new(stdin)),
        vec!["s3cr3t-value".into()],
        "up".into(),
        RelayRequests {
            elicitation: true,
            sampling: false,
        },
    ));
    d.enable(None);
    d
}

/// Starts a request and waits until it is registered.
async fn pending(
    d: &Arc<Direct>,
    relay: Option<Relay>,
) -> tokio::task::JoinHandle<Result<Reply, NoReply>> {
    pending_method(d, "tools/call", relay).await
}

/// Starts a request of `method` and waits until it is registered.
async fn pending_method(
    d: &Arc<Direct>,
    method: &'static str,
    relay: Option<Relay>,
) -> tokio::task::JoinHandle<Result<Reply, NoReply>> {
    let before = crate::lock(&d.waiting).as_ref().map_or(0, HashMap::len);
    let d2 = d.clone();
    let call = tokio::spawn(async move {
        d2.request(method, &Map::new(), relay, Duration::from_secs(10))
            .await
    });
    while crate::lock(&d.waiting)
        .as_ref()
        .is_none_or(|w| w.len() == before)
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    call
}

#[tokio::test]
async fn answers_are_routed_by_id_and_others_left_to_rmcp() {
    let (d, _child) = direct();
    let call = pending(&d, None).await;
    // Not ours: rmcp's numeric ids, a request from the upstream, a
    // line that only mentions the prefix.
    assert!(!d.route(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    assert!(!d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-1","method":"ping"}"#));
    assert!(!d.route(br#"{"jsonrpc":"2.0","method":"x","params":{"a":"\"temper-hub-1"}}"#));
    let text = r#"{ "content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"structuredContent":{"a":1}}"#;
    let line = format!(r#"{{"jsonrpc":"2.0","id":"temper-hub-1","result":{text}}}"#);
    assert!(d.route(line.as_bytes()));
    match call.await.unwrap() {
        // The upstream's text, as it came.
        Ok(Reply::Result(raw)) => assert_eq!(raw.get(), text),
        other => panic!("{other:?}"),
    }
    // A late answer (no call waits for it) is dropped, not given to rmcp.
    assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-9","result":{}}"#));

    let call = pending(&d, None).await;
    assert!(d.route(
        br#"{"jsonrpc":"2.0","id":"temper-hub-2","error":{"code":-32602,"message":"bad"}}"#
    ));
    match call.await.unwrap() {
        Ok(Reply::Error(m)) => assert_eq!(m, "error -32602: bad"),
        other => panic!("{other:?}"),
    }
    assert!(crate::lock(&d.waiting).as_ref().unwrap().is_empty());
}

#[tokio::test]
async fn progress_goes_to_the_request_that_asked_for_it() {
    let (d, _child) = direct();
    let (relay, mut rx) = Relay::new(true);
    let call = pending(&d, Some(relay)).await;
    assert!(d.route(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"temper-hub-1","progress":1,"total":2}}"#
    ));
    // Another token of ours, not waiting: taken, dropped.
    assert!(d.route(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"temper-hub-77","progress":1}}"#
    ));
    // A token not ours: rmcp's.
    assert!(!d.route(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"note":"temper-hub-1\""}}"#
    ));
    let Some(CallNote::Progress(note)) = rx.recv().await else {
        panic!("a progress note")
    };
    assert_eq!(
        note,
        json!({"progressToken": "temper-hub-1", "progress": 1, "total": 2})
    );
    assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-1","result":{}}"#));
    assert!(matches!(call.await.unwrap(), Ok(Reply::Result(_))));
}

const LOG: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"x","data":"token s3cr3t-value used"}}"#;

#[tokio::test]
async fn a_log_message_goes_to_the_sole_call_in_flight_and_nowhere_else() {
    let (d, _child) = direct();
    // No call in flight: rmcp's (noted in Temper's log).
    assert!(!d.route(LOG));
    let (relay, mut rx) = Relay::new(false);
    let first = pending(&d, Some(relay)).await;
    // A tools/list in flight beside it does not count.
    let list = pending_method(&d, "tools/list", None).await;
    assert!(d.route(LOG));
    let Some(CallNote::Log(params)) = rx.recv().await else {
        panic!("a log note")
    };
    // The upstream's secret is cut out.
    assert_eq!(
        params,
        json!({"level": "info", "logger": "x", "data": "token [redacted] used"})
    );
    // A second call in flight: neither caller gets it.
    let (relay2, mut rx2) = Relay::new(false);
    let second = pending(&d, Some(relay2)).await;
    assert!(!d.route(LOG));
    assert!(rx.try_recv().is_err() && rx2.try_recv().is_err());
    for (id, call) in [(1, first), (2, list), (3, second)] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":"temper-hub-{id}","result":{{}}}}"#);
        assert!(d.route(line.as_bytes()));
        assert!(matches!(call.await.unwrap(), Ok(Reply::Result(_))));
    }
    // The sole call has no relay: not attributed.
    let bare = pending(&d, None).await;
    assert!(!d.route(LOG));
    assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-4","result":{}}"#));
    assert!(matches!(bare.await.unwrap(), Ok(Reply::Result(_))));
}

#[tokio::test]
async fn an_upstreams_request_goes_to_the_sole_call_and_its_answer_back() {
    use tokio::io::AsyncBufReadExt;
    // A child that echoes what Temper writes: the answer comes back.
    let mut child = tokio::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut echoed = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let d = relaying(stdin);
    let ask = br#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"message":"key s3cr3t-value?","requestedSchema":{"type":"object"}}}"#;
    let sample =
        br#"{"jsonrpc":"2.0","id":10,"method":"sampling/createMessage","params":{"messages":[]}}"#;
    // No call in flight: rmcp's (it refuses).
    assert!(!d.route(ask));
    let (relay, mut rx) = Relay::new(false);
    let call = pending(&d, Some(relay)).await;
    // Not in `relay`: rmcp's.
    assert!(!d.route(sample));
    assert!(d.route(ask));
    let Some(CallNote::Ask(a)) = rx.recv().await else {
        panic!("an ask")
    };
    assert_eq!(a.method, "elicitation/create");
    assert_eq!(a.params["message"], "key [redacted]?");
    a.reply
        .send(Ok(json!({"action": "accept", "content": {"pick": "b"}})))
        .unwrap();
    // The request line, then the answer the upstream gets.
    let mut answer = Value::Null;
    while let Some(line) = echoed.next_line().await.unwrap() {
        let v: Value = serde_json::from_str(&line).unwrap();
        if v.get("id") == Some(&json!(9)) && v.get("result").is_some() {
            answer = v;
            break;
        }
    }
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 9, "result": {"action": "accept", "content": {"pick": "b"}}})
    );
    // A refusal goes back as a JSON-RPC error.
    assert!(d.route(ask));
    let Some(CallNote::Ask(a)) = rx.recv().await else {
        panic!("an ask")
    };
    drop(a.reply);
    while let Some(line) = echoed.next_line().await.unwrap() {
        let v: Value = serde_json::from_str(&line).unwrap();
        if v.get("id") == Some(&json!(9)) && v.get("error").is_some() {
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("upstream \"up\" asked for elicitation/create: "),
                "{v}"
            );
            break;
        }
    }
    assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-1","result":{}}"#));
    assert!(matches!(call.await.unwrap(), Ok(Reply::Result(_))));
}

#[tokio::test]
async fn closing_fails_the_waiting_calls_and_later_ones() {
    let (d, _child) = direct();
    let call = pending(&d, None).await;
    d.close();
    assert!(matches!(call.await.unwrap(), Err(NoReply::Gone(None))));
    let later = d
        .request("tools/call", &Map::new(), None, Duration::from_secs(10))
        .await;
    assert!(matches!(later, Err(NoReply::Gone(None))));
}

#[tokio::test]
async fn a_call_without_answer_times_out_and_leaves_no_entry() {
    let (d, _child) = direct();
    let r = d
        .request("tools/call", &Map::new(), None, Duration::from_millis(50))
        .await;
    assert!(matches!(r, Err(NoReply::Timeout)));
    assert!(crate::lock(&d.waiting).as_ref().unwrap().is_empty());
}

#[test]
fn a_request_carries_the_meta_of_its_revision() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let (d, _child) = direct();
    let params: Map<String, Value> =
        serde_json::from_value(json!({"name": "t", "arguments": {"q": "x"}})).unwrap();
    let line: Value =
        serde_json::from_slice(&d.request_line(4, "tools/call", &params, false)).unwrap();
    assert_eq!(
        line,
        json!({"jsonrpc": "2.0", "id": "temper-hub-4", "method": "tools/call", "params": {"name": "t", "arguments": {"q": "x"}}})
    );
    let line: Value =
        serde_json::from_slice(&d.request_line(5, "tools/call", &params, true)).unwrap();
    assert_eq!(
        line["params"]["_meta"],
        json!({"progressToken": "temper-hub-5"})
    );
    let (modern, _child2) = {
        let mut child = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        (
            Direct::new(
                Arc::new(tokio::sync::Mutex::new(stdin)),
                Vec::new(),
                "up".into(),
                RelayRequests::default(),
            ),
            child,
        )
    };
    modern.enable(Some(
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
    ));
    for progress in [false, true] {
        let line: Value =
            serde_json::from_slice(&modern.request_line(6, "tools/list", &Map::new(), progress))
                .unwrap();
        let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        if progress {
            meta["progressToken"] = json!("temper-hub-6");
        }
        assert_eq!(line["params"], json!({"_meta": meta}));
        assert_eq!(line["method"], json!("tools/list"));
    }
}
