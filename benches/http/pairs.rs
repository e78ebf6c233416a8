//! The paired modes of `benches/http.rs` (`--pairs`): our stream against our blocking send
//! on one server, two servers (two builds) against each other (`--versus`), and another
//! binding against HTTP+JSON on one server (`--binding-pairs`, `--grpc-pairs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{drain, load, posts, report, task_ids, thread_cpu, Outcome, Requests, Target};

/// `message:stream` against `message:send`, paired: `pairs` pairs of `window`-long runs of
/// each, one after the other on the same server, the first of a pair alternating. The
/// host's drift over a run (this machine is shared) touches both sides of a pair alike,
/// where separate runs of each differ by several percent; the store grows under both (each
/// window adds its requests' Tasks), and alternating the first of a pair evens that out. Prints
/// each pair's stream/send rate ratio, then `RESULT pairs <median> <min> <max>` (the median
/// of an even count is the mean of the middle two).
pub async fn stream_send_pairs(t: &Arc<Target>, conns: usize, window: Duration, pairs: usize) {
    let mut ratios = Vec::new();
    for pair in 0..pairs {
        // Unique messageIds in every window (a repeated one would be a cheap replay).
        let tag = |case: &str| -> &'static str { format!("{case}{pair}").leak() };
        let send = posts(tag("send"), "/message:send", "application/json", |b| b);
        let stream = posts(tag("stream"), "/message:stream", "text/event-stream", |b| b);
        let cases = [("message:send", send), ("message:stream", stream)];
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut rates = [0.0; 2];
        for case in order {
            let (label, requests) = &cases[case];
            rates[case] = report(
                label,
                load(t.clone(), conns, window, requests.clone()).await,
            )
            .0;
        }
        let [send, stream] = rates;
        let ratio = stream / send;
        println!("pair {pair}: stream / send {ratio:.3}");
        ratios.push(ratio);
    }
    summary("pairs", ratios);
}

/// Two servers (two builds) against each other, paired: for each case, `pairs` pairs of
/// `window`-long runs, one on each server right after the other, the first of a pair
/// alternating. Both servers stay up (pinned to the same core; the idle one costs
/// nothing), so a pair's two windows see the same host, where separate runs on this shared
/// machine differ by more than two builds do. Prints each pair's B/A rate ratio and a
/// `RESULT versus <case> <median> <min> <max>` line per case.
pub async fn builds_pairs(
    a: &Arc<Target>,
    b: &Arc<Target>,
    conns: usize,
    window: Duration,
    pairs: usize,
    wanted: impl Fn(&str) -> bool,
) {
    // Task ids for the GET case, each server its own (from a short send window).
    let mut ids = [Vec::new(), Vec::new()];
    if wanted("get") {
        for (side, t) in [a, b].into_iter().enumerate() {
            let tag: &'static str = format!("ids{side}").leak();
            let sends = load(
                t.clone(),
                conns,
                Duration::from_secs(1),
                posts(tag, "/message:send", "application/json", |b| b),
            )
            .await;
            ids[side] = task_ids(&sends.2);
        }
    }
    let ids = Arc::new(ids);
    for case in ["send", "stream", "get", "list", "intake"] {
        if !wanted(case) {
            continue;
        }
        let mut ratios = Vec::new();
        for pair in 0..pairs {
            let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut rates = [0.0; 2];
            for side in order {
                // Unique messageIds in every window (a repeated one would be a cheap replay).
                let tag: &'static str = format!("{case}{pair}s{side}").leak();
                let requests: Requests = match case {
                    "send" => posts(tag, "/message:send", "application/json", |b| b),
                    "stream" => posts(tag, "/message:stream", "text/event-stream", |b| b),
                    "intake" => posts(tag, "/message:send", "application/json", |b| {
                        b.replace(
                            r#""configuration":{}"#,
                            r#""configuration":{"returnImmediately":true}"#,
                        )
                    }),
                    "get" => {
                        let ids = ids.clone();
                        Arc::new(move |i| {
                            let mine = &ids[side];
                            (
                                "GET".into(),
                                format!("/tasks/{}", mine[i % mine.len()]),
                                String::new(),
                                "application/json".into(),
                            )
                        })
                    }
                    _ => Arc::new(|_| {
                        (
                            "GET".into(),
                            "/tasks?pageSize=50".into(),
                            String::new(),
                            "application/json".into(),
                        )
                    }),
                };
                let t = if side == 0 { a } else { b };
                let label = format!("{case} {}", ["A", "B"][side]);
                rates[side] = report(&label, load(t.clone(), conns, window, requests).await).0;
            }
            if case == "intake" {
                // The agents settle the backlog before the next pair.
                drain(a).await;
                drain(b).await;
            }
            let ratio = rates[1] / rates[0];
            println!("pair {pair}: {case} B / A {ratio:.3}");
            ratios.push(ratio);
        }
        summary(&format!("versus {case}"), ratios);
    }
}

/// A binding other than HTTP+JSON, as [`binding_pairs`] pairs it with HTTP+JSON.
pub struct Binding<F> {
    /// Its name in the lines printed: `JSON-RPC`, `gRPC`.
    pub name: &'static str,
    /// The key of the `RESULT <key> …` and `RESULT <key>-cpu …` lines.
    pub key: &'static str,
    /// In the messageId tags of its pairs' windows (`{case}{pair}{letter}{side}`), so they
    /// differ from those of the other paired modes.
    pub letter: &'static str,
    /// `run(case, tag, ids)`: one window of `case` (send, stream, get, list) over this
    /// binding, as long as the HTTP+JSON ones, its messages tagged `tag`, the GET case
    /// reading the Tasks `ids`.
    pub run: F,
}

/// Another binding (`other`) against HTTP+JSON (`t`) on one server, paired: for each case
/// `wanted` picks (send, stream, get, list), `pairs` pairs of a `window`-long HTTP+JSON run
/// and one of `other`, one right after the other, the first of a pair alternating, so
/// both sides of a pair see the same host and store (both read the same Tasks, made over
/// HTTP+JSON in a short window). Prints each pair's other / HTTP+JSON rate ratio and
/// `RESULT <key> <case> <median> <min> <max>`; with the server's `pid`, also the ratio of
/// its CPU per request, HTTP+JSON / other (above 1 when the other binding costs less), and
/// `RESULT <key>-cpu <case> <median> <min> <max>`: on a host whose other work takes the
/// server's core, the rate follows that work, the CPU spent per request much less.
pub async fn binding_pairs<F, R>(
    t: &Arc<Target>,
    other: &Binding<F>,
    conns: usize,
    window: Duration,
    pairs: usize,
    wanted: &impl Fn(&str) -> bool,
    pid: Option<u32>,
) where
    F: Fn(&'static str, &'static str, Arc<Vec<String>>) -> R,
    R: Future<Output = Outcome>,
{
    // The server's CPU (clock ticks, every thread) so far.
    let cpu = || pid.map_or(0, |pid| thread_cpu(pid).values().sum::<u64>());
    let mut ids = Arc::new(Vec::new());
    if wanted("get") {
        let sends = load(
            t.clone(),
            conns,
            Duration::from_secs(1),
            http_requests("send", "ids", ids.clone()),
        )
        .await;
        ids = Arc::new(task_ids(&sends.2));
    }
    for case in ["send", "stream", "get", "list"] {
        if !wanted(case) {
            continue;
        }
        let (mut ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
        for pair in 0..pairs {
            let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
            let (mut rates, mut per_request) = ([0.0; 2], [0.0; 2]);
            for side in order {
                // Unique messageIds in every window (a repeated one would be a cheap replay).
                let tag: &'static str = format!("{case}{pair}{}{side}", other.letter).leak();
                let before = cpu();
                let outcome = match side {
                    0 => {
                        load(
                            t.clone(),
                            conns,
                            window,
                            http_requests(case, tag, ids.clone()),
                        )
                        .await
                    }
                    _ => (other.run)(case, tag, ids.clone()).await,
                };
                per_request[side] = (cpu() - before) as f64 / outcome.1.len().max(1) as f64;
                let label = format!("{case} {}", ["HTTP+JSON", other.name][side]);
                rates[side] = report(&label, outcome).0;
            }
            let ratio = rates[1] / rates[0];
            println!("pair {pair}: {case} {} / HTTP+JSON {ratio:.3}", other.name);
            ratios.push(ratio);
            if pid.is_some() {
                let ratio = per_request[0] / per_request[1];
                println!(
                    "pair {pair}: {case} server CPU per request, HTTP+JSON / {} {ratio:.3}",
                    other.name
                );
                cpu_ratios.push(ratio);
            }
        }
        summary(&format!("{} {case}", other.key), ratios);
        if pid.is_some() {
            summary(&format!("{}-cpu {case}", other.key), cpu_ratios);
        }
    }
}

/// The HTTP+JSON calls of case `case`, as `benches/http.rs` makes them.
fn http_requests(case: &str, tag: &'static str, ids: Arc<Vec<String>>) -> Requests {
    let get = |path: String| ("GET".into(), path, String::new(), "application/json".into());
    match case {
        "send" => posts(tag, "/message:send", "application/json", |b| b),
        "stream" => posts(tag, "/message:stream", "text/event-stream", |b| b),
        "get" => Arc::new(move |i| get(format!("/tasks/{}", ids[i % ids.len()]))),
        "list" => Arc::new(move |_| get("/tasks?pageSize=50".into())),
        other => panic!("no HTTP+JSON case `{other}`"),
    }
}

/// `RESULT <what> <median> <min> <max>` of `ratios` (the median of an even count is the
/// mean of the middle two).
fn summary(what: &str, mut ratios: Vec<f64>) {
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = (ratios[(n - 1) / 2] + ratios[n / 2]) / 2.0;
    println!(
        "RESULT {what} {median:.3} {:.3} {:.3}",
        ratios[0],
        ratios[n - 1]
    );
}
