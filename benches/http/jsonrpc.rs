//! The JSON-RPC 2.0 mode of `benches/http.rs`: the same work as the HTTP+JSON cases
//! (a blocking send, a stream to the terminal event, a GET of a Task, a page of 50) as the
//! JSON-RPC calls `SendMessage`, `SendStreamingMessage`, `GetTask` and `ListTasks`, POSTed
//! to the JSON-RPC interface the server's Agent Card lists (ours serves it at its interface
//! URL, the SDK's at a URL of its own). Cases `rpc-send`, `rpc-stream`, `rpc-get` and
//! `rpc-list`; and `--binding-pairs N`: each binding against the other on one server.

use std::sync::Arc;
use std::time::Duration;

use super::{load, parse_url, send_body, Conn, Outcome, Requests, Target};

/// The Agent Card of the server `t` serves HTTP+JSON for (`/.well-known/agent-card.json`
/// on the same host).
pub async fn agent_card(t: &Target) -> serde_json::Value {
    let at_root = Target {
        addr: t.addr,
        host: t.host.clone(),
        base_path: String::new(),
        token: t.token.clone(),
        jsonrpc: false,
    };
    let mut conn = Conn::open(t.addr).await;
    let (status, body) = conn
        .call(
            &at_root,
            "GET",
            "/.well-known/agent-card.json",
            "",
            "application/json",
        )
        .await;
    assert!(
        status == 200,
        "GET /.well-known/agent-card.json: HTTP {status}"
    );
    serde_json::from_slice(&body).expect("the Agent Card is JSON")
}

/// The JSON-RPC endpoint of the server `t` serves HTTP+JSON for: the `JSONRPC` interface of
/// its Agent Card, with `t`'s token.
pub async fn discover(t: &Target) -> Target {
    let card = agent_card(t).await;
    let url = card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["protocolBinding"] == "JSONRPC")
        .and_then(|i| i["url"].as_str())
        .unwrap_or_else(|| panic!("the Agent Card lists no JSONRPC interface: {card}"));
    let (addr, host, base_path) = parse_url(url);
    Target {
        addr,
        host,
        // A request line needs a path: the root when the interface URL has none.
        base_path: if base_path.is_empty() {
            "/".into()
        } else {
            base_path
        },
        token: t.token.clone(),
        jsonrpc: true,
    }
}

/// A JSON-RPC call (method, path, body, accept) for `load`: id `i`, `method` and `params`.
fn call(i: usize, method: &str, params: &str, accept: &str) -> (String, String, String, String) {
    (
        "POST".into(),
        String::new(),
        format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{params}}}"#),
        accept.into(),
    )
}

/// The calls of case `case` (send, stream, get or list): the same messages as the
/// HTTP+JSON cases' (tagged `tag`), the same Tasks read (`ids`), the same page.
pub fn requests(case: &str, tag: &'static str, ids: Arc<Vec<String>>) -> Requests {
    match case {
        "send" => Arc::new(move |i| call(i, "SendMessage", &send_body(tag, i), "application/json")),
        "stream" => Arc::new(move |i| {
            call(
                i,
                "SendStreamingMessage",
                &send_body(tag, i),
                "text/event-stream",
            )
        }),
        "get" => Arc::new(move |i| {
            let id = &ids[i % ids.len()];
            call(
                i,
                "GetTask",
                &format!(r#"{{"id":"{id}"}}"#),
                "application/json",
            )
        }),
        "list" => Arc::new(|i| call(i, "ListTasks", r#"{"pageSize":50}"#, "application/json")),
        other => panic!("no JSON-RPC case `{other}`"),
    }
}

/// The Task ids of `SendMessage` results.
pub fn result_task_ids(bodies: &[Vec<u8>]) -> Vec<String> {
    bodies
        .iter()
        .filter_map(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .filter_map(|v| v["result"]["task"]["id"].as_str().map(str::to_string))
        .collect()
}

/// The JSON-RPC cases `wanted` picks, in a fixed order (send, stream, get, list), against
/// `rpc`, each reported through `case(label, key, outcome)`. The GET case reads the Tasks
/// the send case made, so the send case runs when either does.
pub async fn cases(
    rpc: &Arc<Target>,
    conns: usize,
    duration: Duration,
    send_duration: Duration,
    wanted: &impl Fn(&str) -> bool,
    case: &impl Fn(&'static str, &'static str, Outcome),
) {
    let none = Arc::new(Vec::new());
    let mut ids = none.clone();
    if wanted("rpc-send") || wanted("rpc-get") {
        let sends = load(
            rpc.clone(),
            conns,
            send_duration,
            requests("send", "rpcsend", none.clone()),
        )
        .await;
        ids = Arc::new(result_task_ids(&sends.2));
        case("JSON-RPC SendMessage (blocking)", "rpc-send", sends);
    }
    if wanted("rpc-stream") {
        let calls = requests("stream", "rpcstream", none.clone());
        case(
            "JSON-RPC SendStreamingMessage (to the end)",
            "rpc-stream",
            load(rpc.clone(), conns, duration, calls).await,
        );
    }
    if wanted("rpc-get") {
        let calls = requests("get", "rpcget", ids);
        case(
            "JSON-RPC GetTask",
            "rpc-get",
            load(rpc.clone(), conns, duration, calls).await,
        );
    }
    if wanted("rpc-list") {
        let calls = requests("list", "rpclist", none);
        case(
            "JSON-RPC ListTasks (pageSize 50)",
            "rpc-list",
            load(rpc.clone(), conns, duration, calls).await,
        );
    }
}
