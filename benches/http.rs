//! HTTP load benchmark on loopback: fixed duration and concurrency, unique messageIds.
//!
//! `cargo bench --bench http` starts our listener in-process with an agent that settles
//! each Task at once, then measures `message:send` (blocking), `GET /tasks/{id}`,
//! `message:stream` and `GET /tasks` with 10,000 Tasks stored: requests/s, p50, p99, and
//! with `--pid` the server process's peak RSS per case and its CPU per request, thread by
//! thread (the thread's name, as `/proc/<pid>/task/*/comm` gives it).
//!
//! `cargo bench --bench http -- --url <interface url> [--token T]` measures any A2A
//! HTTP+JSON server the same way (e.g. the official SDK's, see `benches/sdk-server.ts`).
//! The `rpc-*` cases do the same work over JSON-RPC 2.0, at the JSONRPC interface the
//! server's Agent Card lists (`http/jsonrpc.rs`); the `grpc-*` cases over gRPC, at its GRPC
//! interface (`http/grpc.rs`).
//! Every loop stops by itself (seconds per case, bounded requests).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::Listener;
use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::plane::{PlaneOptions, TaskPlane};
use a2a_task_plane::record::{ArtifactRecord, MessageRecord, PartRecord};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[path = "http/grpc.rs"]
mod grpc;
#[path = "http/jsonrpc.rs"]
mod jsonrpc;
#[path = "http/pairs.rs"]
mod pairs;

const TOKEN: &str = "bench-token-0123456789abcdef";

struct Target {
    addr: SocketAddr,
    host: String,
    base_path: String,
    token: String,
    /// A JSON-RPC endpoint: a reply must carry a `result`, not an `error` (HTTP 200 either way).
    jsonrpc: bool,
}

struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    /// One request on the keep-alive connection; returns (status, body).
    async fn call(
        &mut self,
        t: &Target,
        method: &str,
        path: &str,
        body: &str,
        accept: &str,
    ) -> (u16, Vec<u8>) {
        let head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nA2A-Version: 1.0\r\nAccept: {accept}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            t.base_path,
            t.host,
            t.token,
            body.len()
        );
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).await.unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line).await.unwrap();
            let l = line.trim_end().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.strip_prefix("content-length:") {
                length = v.trim().parse::<usize>().ok();
            }
            if l.starts_with("transfer-encoding:") && l.contains("chunked") {
                chunked = true;
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).await.unwrap();
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = length {
            out.resize(n, 0);
            self.reader.read_exact(&mut out).await.unwrap();
        }
        (status, out)
    }
}

fn send_body(tag: &str, i: usize) -> String {
    format!(
        r#"{{"message":{{"messageId":"{tag}-{i}-{}","role":"ROLE_USER","parts":[{{"text":"please summarise the report"}}]}},"configuration":{{}}}}"#,
        std::process::id()
    )
}

/// What a case sends, request by request: (method, path, body, accept).
type Requests = Arc<dyn Fn(usize) -> (String, String, String, String) + Send + Sync>;

/// A run's result, as `load` (and the JSON-RPC and gRPC modes' `load`) gives it: (rate,
/// latencies, the first replies; over gRPC the first Task ids, as bytes).
type Outcome = (f64, Vec<Duration>, Vec<Vec<u8>>);

/// `POST path` of message `i` tagged `tag` ([`send_body`], changed by `body`), accepting
/// `accept`.
fn posts(
    tag: &'static str,
    path: &'static str,
    accept: &'static str,
    body: fn(String) -> String,
) -> Requests {
    Arc::new(move |i| {
        (
            "POST".into(),
            path.into(),
            body(send_body(tag, i)),
            accept.into(),
        )
    })
}

/// Runs `conns` connections until `duration` passes; `request(i)` gives (method, path, body, accept).
async fn load(t: Arc<Target>, conns: usize, duration: Duration, request: Requests) -> Outcome {
    let start = Instant::now();
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles: Vec<_> = (0..conns)
        .map(|_| {
            let (t, request, counter) = (t.clone(), request.clone(), counter.clone());
            tokio::spawn(async move {
                let mut conn = Conn::open(t.addr).await;
                let mut latencies = Vec::new();
                let mut bodies = Vec::new();
                while start.elapsed() < duration && latencies.len() < 200_000 {
                    let i = counter.fetch_add(1, Ordering::Relaxed);
                    let (method, path, body, accept) = request(i);
                    let began = Instant::now();
                    let (status, reply) = conn.call(&t, &method, &path, &body, &accept).await;
                    latencies.push(began.elapsed());
                    assert!(
                        status == 200 && !(t.jsonrpc && is_rpc_error(&reply)),
                        "{method} {}{path}: HTTP {status}: {}",
                        t.base_path,
                        String::from_utf8_lossy(&reply)
                    );
                    if bodies.len() < 64 {
                        bodies.push(reply);
                    }
                }
                (latencies, bodies)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut bodies = Vec::new();
    for h in handles {
        let (l, b) = h.await.unwrap();
        all.extend(l);
        bodies.extend(b);
    }
    let elapsed = start.elapsed().as_secs_f64();
    (all.len() as f64 / elapsed, all, bodies)
}

/// A JSON-RPC reply that is (or, in an event stream, carries) an error response.
fn is_rpc_error(reply: &[u8]) -> bool {
    reply.windows(8).any(|w| w == b"\"error\":")
}

fn report(label: &str, (rate, mut latencies, _): Outcome) -> (f64, f64, f64) {
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    println!(
        "{label:<44} {rate:>8.0} req/s   p50 {:>7.2} ms   p99 {:>7.2} ms   ({} requests)",
        pct(0.5),
        pct(0.99),
        latencies.len()
    );
    (rate, pct(0.5), pct(0.99))
}

/// Tops the caller's Tasks up to `total` with `returnImmediately` sends on 32 connections.
async fn fill(t: &Arc<Target>, total: usize) {
    let have = {
        let mut conn = Conn::open(t.addr).await;
        let (_, body) = conn
            .call(t, "GET", "/tasks?pageSize=1", "", "application/json")
            .await;
        serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["totalSize"].as_u64())
            .unwrap_or(0) as usize
    };
    let per = total.saturating_sub(have).div_ceil(32);
    let fillers: Vec<_> = (0..32)
        .map(|c| {
            let t = t.clone();
            tokio::spawn(async move {
                let mut conn = Conn::open(t.addr).await;
                for i in 0..per {
                    let body = send_body(&format!("fill{c}"), i).replace(
                        r#""configuration":{}"#,
                        r#""configuration":{"returnImmediately":true}"#,
                    );
                    conn.call(&t, "POST", "/message:send", &body, "application/json")
                        .await;
                }
            })
        })
        .collect();
    for f in fillers {
        f.await.unwrap();
    }
}

/// Waits (at most 120 s) until none of the caller's Tasks is SUBMITTED or WORKING, so an
/// agent that settles in the background has no backlog when a case starts. A server whose
/// listing has no status filter counts as drained.
async fn drain(t: &Arc<Target>) {
    let mut conn = Conn::open(t.addr).await;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        let mut open = 0;
        for state in ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"] {
            let path = format!("/tasks?pageSize=1&status={state}");
            let (status, body) = conn.call(t, "GET", &path, "", "application/json").await;
            if status != 200 {
                return;
            }
            open += serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["totalSize"].as_u64())
                .unwrap_or(0);
        }
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("the server still had open Tasks after 120 s; measuring anyway");
}

/// The peak resident set (VmHWM) of process `pid` in MB.
fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resets the peak RSS of `pid` to its current RSS (Linux: `5` to `/proc/<pid>/clear_refs`).
fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// CPU time (user + system, in clock ticks) of each of `pid`'s threads so far, summed by
/// thread name. A thread that ends between two readings takes its time with it.
fn thread_cpu(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_name;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue;
        };
        // After the `(comm)` field: state is field 3, utime 14 and stime 15 (proc(5)).
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        *by_name.entry(comm.trim().to_string()).or_default() += ticks(11) + ticks(12);
    }
    by_name
}

/// The server's CPU per request over a case, thread by thread: what each thread spent
/// between `before` and now, divided by `requests`.
fn cpu_per_request(pid: u32, before: &std::collections::BTreeMap<String, u64>, requests: usize) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let micros = |ticks: u64| ticks as f64 / hz * 1e6 / requests.max(1) as f64;
    let mut threads: Vec<(String, f64)> = thread_cpu(pid)
        .into_iter()
        .map(|(name, now)| {
            let spent = now.saturating_sub(before.get(&name).copied().unwrap_or(0));
            (name, micros(spent))
        })
        .filter(|(_, us)| *us >= 0.5)
        .collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = threads.iter().map(|(_, us)| us).sum();
    let each: Vec<String> = threads
        .iter()
        .map(|(name, us)| format!("{name} {us:.1}"))
        .collect();
    println!(
        "{:<44} server CPU {total:.0} µs per request: {} (µs, by thread name)",
        "",
        each.join(", ")
    );
}

fn task_ids(bodies: &[Vec<u8>]) -> Vec<String> {
    bodies
        .iter()
        .filter_map(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .filter_map(|v| v["task"]["id"].as_str().map(str::to_string))
        .collect()
}

/// An in-process agent that settles every accepted Task at once (16 workers, so the
/// agent's own fsynced writes are not the bottleneck being measured).
fn instant_agent(plane: TaskPlane, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    // A watch misses no acceptance (a broadcast would drop some once the agent lags).
    let (watch, accepted) = plane.events().watch_accepted();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (plane, rx) = (plane.clone(), rx.clone());
            std::thread::spawn(move || loop {
                let next = rx.lock().unwrap().recv();
                let Ok(task_id) = next else { return };
                let artifact = ArtifactRecord {
                    artifact_id: a2a_task_plane::ids::mint(),
                    name: Some("answer".into()),
                    description: None,
                    parts: vec![PartRecord::text("done")],
                    metadata: None,
                    extensions: vec![],
                };
                let _ = plane.start_work(&task_id);
                let _ = plane.complete(
                    &task_id,
                    vec![artifact],
                    Some(MessageRecord::agent(vec![PartRecord::text("ok")])),
                );
            })
        })
        .collect();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if let Ok(a) = accepted.recv_timeout(Duration::from_millis(100)) {
                let _ = tx.send(a.task_id);
            }
        }
        plane.events().unwatch(watch);
        drop(tx);
        workers.into_iter().for_each(|w| {
            let _ = w.join();
        });
    })
}

fn parse_url(url: &str) -> (SocketAddr, String, String) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (hostport, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, String::new()));
    let addr = std::net::ToSocketAddrs::to_socket_addrs(hostport)
        .unwrap()
        .next()
        .unwrap();
    (
        addr,
        hostport.to_string(),
        path.trim_end_matches('/').to_string(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seconds: u64 = arg("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5);
    // `--only send,stream,get,list,rpc-send,rpc-stream,rpc-get,rpc-list,grpc-send,
    // grpc-stream,grpc-get,grpc-list,intake` (any of them, comma-separated): run just those
    // cases, always in this order. The send case also runs when the GET case does (it reads
    // the Tasks the send case made), as does rpc-send for rpc-get and grpc-send for grpc-get.
    let only = arg("--only");
    let wanted = move |case: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|c| c.trim() == case))
    };
    let duration = Duration::from_secs(seconds);
    // `--send-seconds N`: the send case's own length (profiling another case after it).
    let send_duration = arg("--send-seconds")
        .and_then(|s| s.parse().ok())
        .map_or(duration, Duration::from_secs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();

    let mut ours = None;
    let target = match arg("--url") {
        Some(url) => {
            let (addr, host, base_path) = parse_url(&url);
            Target {
                addr,
                host,
                base_path,
                token: arg("--token").unwrap_or_default(),
                jsonrpc: false,
            }
        }
        None => {
            let dir = std::env::temp_dir().join(format!("tp-http-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let credentials = dir.join("credentials.json");
            std::fs::write(
                &credentials,
                format!(r#"{{"credentials":[{{"token":"{TOKEN}","principal":"bench"}}]}}"#),
            )
            .unwrap();
            let plane = TaskPlane::open(&dir.join("store"), PlaneOptions::default()).unwrap();
            let mut config = ListenerConfig::new(credentials);
            config.port = 0;
            config.max_connections = 1024;
            let listener = Listener::start(plane.clone(), config, Arc::new(AlwaysTask)).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let agent = instant_agent(plane.clone(), stop.clone());
            let addr = listener.local_addr();
            ours = Some((listener, plane, stop, agent, dir));
            Target {
                addr,
                host: addr.to_string(),
                base_path: String::new(),
                token: TOKEN.into(),
                jsonrpc: false,
            }
        }
    };
    let t = Arc::new(target);
    // `--pid`: the server's process, whose peak RSS each case reports (reset before it).
    let server_pid: Option<u32> = arg("--pid").and_then(|p| p.parse().ok());
    let conns: usize = arg("--conns").and_then(|c| c.parse().ok()).unwrap_or(64);
    // `--stored N`: Tasks stored before the first case (default 10,000).
    let stored: usize = arg("--stored")
        .and_then(|c| c.parse().ok())
        .unwrap_or(10_000);
    // `--pairs N`: instead of the cases, N pairs of a blocking-send window and a stream
    // window on the same server, alternating which goes first (see `stream_send_pairs`).
    let pairs: usize = arg("--pairs").and_then(|c| c.parse().ok()).unwrap_or(0);
    // `--binding-pairs N`: instead of the cases, N pairs of an HTTP+JSON window and a
    // JSON-RPC window per case (see `pairs::binding_pairs`).
    let binding_pairs: usize = arg("--binding-pairs")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    // `--grpc-pairs N`: the same with gRPC in JSON-RPC's place.
    let grpc_pairs: usize = arg("--grpc-pairs")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    // `--h2-conns N`: the HTTP/2 connections the gRPC callers share (default 4).
    let h2_conns: usize = arg("--h2-conns").and_then(|c| c.parse().ok()).unwrap_or(4);
    // `--versus URL --versus-token T`: with `--pairs`, a second server (B) against the first
    // (A), case by case (see `builds_pairs`): two builds compared.
    let versus = arg("--versus").map(|url| {
        let (addr, host, base_path) = parse_url(&url);
        Arc::new(Target {
            addr,
            host,
            base_path,
            token: arg("--versus-token").unwrap_or_default(),
            jsonrpc: false,
        })
    });
    println!(
        "A2A HTTP+JSON load on {} ({} s per case, {conns} keep-alive connections)",
        t.addr, seconds
    );
    // Each thread's CPU when the current case began (after the fill, then after each case).
    let cpu_before = std::cell::RefCell::new(std::collections::BTreeMap::new());
    let case = |label: &'static str, key: &'static str, result: (f64, Vec<Duration>, _)| {
        let requests = result.1.len();
        let (rate, p50, p99) = report(label, result);
        let rss = server_pid.map(peak_rss_mb);
        // One machine-readable line per case, for benches/compare-sdk.sh.
        println!(
            "RESULT {key} {rate:.0} {p50:.2} {p99:.2} {}",
            rss.map_or("-".to_string(), |r| format!("{r:.0}"))
        );
        if let Some(pid) = server_pid {
            cpu_per_request(pid, &cpu_before.borrow(), requests);
            reset_peak_rss(pid);
            *cpu_before.borrow_mut() = thread_cpu(pid);
        }
    };
    if let Some(pid) = server_pid {
        reset_peak_rss(pid);
    }
    runtime.block_on(async {
        // 10,000 Tasks stored before anything is measured (returnImmediately keeps it quick).
        fill(&t, stored).await;
        drain(&t).await;
        if let Some(b) = &versus {
            fill(b, stored).await;
            drain(b).await;
            pairs::builds_pairs(&t, b, conns, duration, pairs.max(1), &wanted).await;
            return;
        }
        if let Some(pid) = server_pid {
            reset_peak_rss(pid);
            *cpu_before.borrow_mut() = thread_cpu(pid);
        }
        if pairs > 0 {
            pairs::stream_send_pairs(&t, conns, duration, pairs).await;
            return;
        }
        if binding_pairs > 0 {
            let rpc = Arc::new(jsonrpc::discover(&t).await);
            let jsonrpc = pairs::Binding {
                name: "JSON-RPC",
                key: "binding",
                letter: "b",
                run: |case, tag, ids| {
                    load(
                        rpc.clone(),
                        conns,
                        duration,
                        jsonrpc::requests(case, tag, ids),
                    )
                },
            };
            pairs::binding_pairs(
                &t,
                &jsonrpc,
                conns,
                duration,
                binding_pairs,
                &wanted,
                server_pid,
            )
            .await;
            return;
        }
        if grpc_pairs > 0 {
            let g = Arc::new(grpc::discover(&t, h2_conns).await);
            let grpc = pairs::Binding {
                name: "gRPC",
                key: "grpc-binding",
                letter: "g",
                run: |case, tag, ids| grpc::paired_case(&g, conns, duration, case, tag, ids),
            };
            pairs::binding_pairs(&t, &grpc, conns, duration, grpc_pairs, &wanted, server_pid).await;
            return;
        }
        let mut ids = Arc::new(Vec::new());
        if wanted("send") || wanted("get") {
            let requests = posts("send", "/message:send", "application/json", |b| b);
            let sends = load(t.clone(), conns, send_duration, requests).await;
            ids = Arc::new(task_ids(&sends.2));
            case("message:send (blocking until COMPLETED)", "send", sends);
        }
        if wanted("stream") {
            let requests = posts("stream", "/message:stream", "text/event-stream", |b| b);
            case(
                "message:stream (to the terminal frame)",
                "stream",
                load(t.clone(), conns, duration, requests).await,
            );
        }
        if wanted("get") {
            let ids_for_get = ids.clone();
            case(
                "GET /tasks/{id}",
                "get",
                load(
                    t.clone(),
                    conns,
                    duration,
                    Arc::new(move |i| {
                        (
                            "GET".into(),
                            format!("/tasks/{}", ids_for_get[i % ids_for_get.len()]),
                            String::new(),
                            "application/json".into(),
                        )
                    }),
                )
                .await,
            );
        }
        if wanted("list") {
            case(
                "GET /tasks?pageSize=50 (10,000+ Tasks)",
                "list",
                load(
                    t.clone(),
                    conns,
                    duration,
                    Arc::new(|_| {
                        (
                            "GET".into(),
                            "/tasks?pageSize=50".into(),
                            String::new(),
                            "application/json".into(),
                        )
                    }),
                )
                .await,
            );
        }
        if ["rpc-send", "rpc-stream", "rpc-get", "rpc-list"]
            .iter()
            .any(|c| wanted(c))
        {
            let rpc = Arc::new(jsonrpc::discover(&t).await);
            jsonrpc::cases(&rpc, conns, duration, send_duration, &wanted, &case).await;
        }
        if ["grpc-send", "grpc-stream", "grpc-get", "grpc-list"]
            .iter()
            .any(|c| wanted(c))
        {
            let g = Arc::new(grpc::discover(&t, h2_conns).await);
            grpc::cases(&g, conns, duration, send_duration, &wanted, &case).await;
        }
        // Last: an agent that settles in the background has a backlog after it.
        if wanted("intake") {
            let requests = posts("intake", "/message:send", "application/json", |b| {
                b.replace(
                    r#""configuration":{}"#,
                    r#""configuration":{"returnImmediately":true}"#,
                )
            });
            case(
                "message:send (returnImmediately)",
                "intake",
                load(t.clone(), conns, duration, requests).await,
            );
        }
    });
    if let Some((mut listener, plane, stop, agent, dir)) = ours {
        stop.store(true, Ordering::SeqCst);
        let _ = agent.join();
        listener.close();
        plane.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
