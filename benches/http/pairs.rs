//! The paired modes of `benches/http.rs` (`--pairs`): our stream against our blocking send
//! on one server, and two servers (two builds) against each other (`--versus`).

use std::sync::Arc;
use std::time::Duration;

use super::{drain, load, posts, report, task_ids, Requests, Target};

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
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = (ratios[(n - 1) / 2] + ratios[n / 2]) / 2.0;
    println!(
        "RESULT pairs {median:.3} {:.3} {:.3}",
        ratios[0],
        ratios[n - 1]
    );
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
        ratios.sort_by(f64::total_cmp);
        let n = ratios.len();
        let median = (ratios[(n - 1) / 2] + ratios[n / 2]) / 2.0;
        println!(
            "RESULT versus {case} {median:.3} {:.3} {:.3}",
            ratios[0],
            ratios[n - 1]
        );
    }
}
