//! Re-checkable guarantees (see docs/reliability.md). Bounded in count and time; stops by
//! itself; ends only the server processes it started.
//!
//! `cargo bench --bench soak -- kill [--cycles 30] [--clients 16] [--max-seconds 300]`
//!   Runs the listener in a child process (this same binary, `serve` mode) with an agent
//!   that settles each Task at once, loads it with `message:send` from concurrent clients,
//!   kills it with SIGKILL at a random moment of each cycle, restarts it, and checks that
//!   every acknowledged message is present exactly once: its Task is readable, sending it
//!   again returns that same Task, and a full listing holds one Task per message id.
//!
//! `cargo bench --bench soak -- slow [--rounds 3] [--subscribers 40] [--crowd 1000]`
//!   Slow clients against the same child: rounds of subscribers that never read while their
//!   Task gets 200 updates of 256 KiB (the child's RSS before, at peak and after each
//!   round), rounds of 200 such subscribers on a 1 MiB Task, then the owner's `GET /tasks` and cancel with `--crowd` live subscribers and
//!   200 idle sockets open (their latency).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::Listener;
use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::plane::{PlaneOptions, TaskPlane};
use a2a_task_plane::record::{ArtifactRecord, MessageRecord, PartContent, PartRecord};
use serde_json::{json, Value};

const TOKEN: &str = "soak-token-0123456789abcdef";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    match args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
    {
        Some("serve") => serve(Path::new(&args[1])),
        Some("kill") => kill_soak(
            arg("--cycles", 30),
            arg("--clients", 16) as usize,
            Duration::from_secs(arg("--max-seconds", 300)),
        ),
        Some("slow") => slow_clients(
            arg("--rounds", 3),
            arg("--subscribers", 40) as usize,
            arg("--crowd", 1000) as usize,
        ),
        _ => {
            eprintln!("usage: cargo bench --bench soak -- kill [--cycles N] [--clients C] [--max-seconds S]\n       cargo bench --bench soak -- slow [--rounds N] [--subscribers N] [--crowd N]");
            // `cargo bench` with no arguments runs every bench: a short kill soak.
            if args.iter().any(|a| a == "--bench") {
                kill_soak(5, 8, Duration::from_secs(60));
            }
        }
    }
}

// ---- The server child ------------------------------------------------------------------

/// Serves the store at `dir/store` until killed; prints `LISTENING <addr>` when ready.
fn serve(dir: &Path) {
    let plane = TaskPlane::open(&dir.join("store"), PlaneOptions::default()).unwrap();
    let mut config = ListenerConfig::new(dir.join("credentials.json"));
    config.port = 0;
    config.max_streams_per_principal = 2000;
    config.max_streams = 2000;
    config.max_connections = 64;
    config.write_timeout_ms = 2_000;
    let listener = Listener::start(plane.clone(), config, Arc::new(AlwaysTask)).unwrap();
    agent(plane);
    println!("LISTENING {}", listener.local_addr());
    loop {
        std::thread::park();
    }
}

/// Settles each Task at once, except: `hold` stays WORKING; `emit <taskId> <n> <kib>`
/// records n artifacts of that size on another (WORKING) Task, then completes.
fn agent(plane: TaskPlane) {
    let (_, accepted) = plane.events().watch_accepted();
    std::thread::spawn(move || {
        while let Ok(event) = accepted.recv() {
            let plane = plane.clone();
            let task_id = event.task_id;
            let Ok(Some(task)) = plane.task(&task_id, None, false) else {
                continue;
            };
            let text = match task.history.last().map(|m| &m.parts[0].content) {
                Some(PartContent::Text(t)) => t.clone(),
                _ => String::new(),
            };
            let done = |plane: &TaskPlane| {
                plane.complete(
                    &task_id,
                    vec![],
                    Some(MessageRecord::agent(vec![PartRecord::text("ok")])),
                )
            };
            let result = if text == "hold" {
                plane.start_work(&task_id).map(|_| ())
            } else if let Some(rest) = text.strip_prefix("emit ") {
                let mut words = rest.split_whitespace();
                let target = words.next().unwrap_or("").to_string();
                let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let kib: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
                plane.start_work(&task_id).and_then(|_| {
                    for i in 0..n {
                        plane.record_artifact(
                            &target,
                            ArtifactRecord {
                                artifact_id: format!("emit-{i}"),
                                name: None,
                                description: None,
                                parts: vec![PartRecord::text("x".repeat(kib * 1024))],
                                metadata: None,
                                extensions: vec![],
                            },
                        )?;
                    }
                    done(&plane)
                })
            } else {
                plane.start_work(&task_id).and_then(|_| done(&plane))
            };
            if let Err(err) = result {
                eprintln!("soak agent: {task_id}: {err}");
            }
        }
    });
}

struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

impl ServerProcess {
    fn start(dir: &Path) -> ServerProcess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("serve")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("the server did not start: {line:?}"))
            .parse()
            .unwrap();
        ServerProcess { child, addr }
    }

    /// SIGKILL: no chance to flush, close or unlock anything.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Resident set size and its peak, in MiB.
    fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tp-soak-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("credentials.json"),
        json!({"credentials": [{"token": TOKEN, "principal": "soak"}]}).to_string(),
    )
    .unwrap();
    dir
}

// ---- A fallible client ------------------------------------------------------------------

/// One request on its own connection; `Err` when the connection fails (the server died).
fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no complete reply"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let value = serde_json::from_str(body).map_err(|e| std::io::Error::other(format!("{e}")))?;
    Ok((status, value))
}

fn send_body(message_id: &str, text: &str) -> Value {
    json!({
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": true}
    })
}

// ---- kill -----------------------------------------------------------------------------

fn kill_soak(cycles: u64, clients: usize, max: Duration) {
    let dir = scratch("kill");
    let started = Instant::now();
    // messageId -> taskId, for every acknowledged send.
    let acknowledged: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let unacknowledged = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let mut rng = seed();
    let mut done_cycles = 0;
    for cycle in 0..cycles {
        if started.elapsed() > max {
            break;
        }
        let server = ServerProcess::start(&dir);
        let addr = server.addr;
        verify_sample(addr, &acknowledged.lock().unwrap(), cycle);
        let stop = Arc::new(AtomicBool::new(false));
        let load: Vec<_> = (0..clients)
            .map(|_| {
                let (stop, acknowledged, unacknowledged, next) = (
                    stop.clone(),
                    acknowledged.clone(),
                    unacknowledged.clone(),
                    next.clone(),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let id = format!("soak-{}", next.fetch_add(1, Ordering::SeqCst));
                        match call(addr, "POST", "/message:send", Some(&send_body(&id, "go"))) {
                            Ok((200, reply)) => {
                                let task = reply["task"]["id"].as_str().unwrap().to_string();
                                acknowledged.lock().unwrap().insert(id, task);
                            }
                            Ok((status, reply)) => panic!("{id}: {status} {reply}"),
                            Err(_) => {
                                // The server died mid-request: maybe committed, never acknowledged.
                                unacknowledged.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100 + rng() % 900));
        server.kill();
        stop.store(true, Ordering::SeqCst);
        for client in load {
            client.join().unwrap();
        }
        done_cycles += 1;
    }
    let server = ServerProcess::start(&dir);
    let acknowledged = acknowledged.lock().unwrap().clone();
    let (listed, by_message) = list_everything(server.addr);
    let mut lost = 0;
    let mut wrong = 0;
    for (message_id, task_id) in &acknowledged {
        match by_message.get(message_id) {
            None => lost += 1,
            Some(ids) if ids.len() != 1 || ids[0] != *task_id => wrong += 1,
            Some(_) => {}
        }
    }
    let duplicated = by_message.values().filter(|ids| ids.len() > 1).count();
    let unacknowledged = unacknowledged.load(Ordering::SeqCst);
    println!(
        "kill soak: {done_cycles} SIGKILL cycles, {clients} clients, {:.0} s; {} acknowledged, {} unacknowledged (in flight at a kill), {listed} Tasks listed; lost {lost}, duplicated {duplicated}, wrong task {wrong}",
        started.elapsed().as_secs_f64(),
        acknowledged.len(),
        unacknowledged,
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        lost == 0 && duplicated == 0 && wrong == 0,
        "a guarantee failed; the store was removed, rerun to reproduce"
    );
    assert!(
        listed as u64 <= acknowledged.len() as u64 + unacknowledged,
        "more Tasks than sends"
    );
}

/// After a restart: up to 200 acknowledged sends are readable, and sending one again
/// returns its Task (the duplicate is recognised, not new work).
fn verify_sample(addr: SocketAddr, acknowledged: &HashMap<String, String>, cycle: u64) {
    for (message_id, task_id) in acknowledged.iter().take(200) {
        let (status, task) = call(addr, "GET", &format!("/tasks/{task_id}"), None).unwrap();
        assert_eq!(
            status, 200,
            "cycle {cycle}: acknowledged {message_id} lost: {task}"
        );
        let (status, again) = call(
            addr,
            "POST",
            "/message:send",
            Some(&send_body(message_id, "go")),
        )
        .unwrap();
        assert_eq!(status, 200, "{again}");
        assert_eq!(
            again["task"]["id"],
            task_id.as_str(),
            "cycle {cycle}: {message_id} made a second Task"
        );
    }
}

/// Every Task, and the Task ids of each first message id.
fn list_everything(addr: SocketAddr) -> (usize, HashMap<String, Vec<String>>) {
    let mut by_message: HashMap<String, Vec<String>> = HashMap::new();
    let mut seen = HashSet::new();
    let mut token = String::new();
    loop {
        let path = format!("/tasks?pageSize=100&pageToken={token}");
        let (status, page) = call(addr, "GET", &path, None).unwrap();
        assert_eq!(status, 200, "{page}");
        for task in page["tasks"].as_array().unwrap() {
            let id = task["id"].as_str().unwrap().to_string();
            assert!(seen.insert(id.clone()), "{id} listed twice");
            let first = task["history"]
                .as_array()
                .and_then(|h| h.iter().find(|m| m["role"] == "ROLE_USER"))
                .and_then(|m| m["messageId"].as_str());
            if let Some(first) = first {
                by_message.entry(first.to_string()).or_default().push(id);
            }
        }
        token = page["nextPageToken"].as_str().unwrap_or("").to_string();
        if token.is_empty() {
            return (seen.len(), by_message);
        }
    }
}

/// A small xorshift generator seeded from the clock (the kill points need no quality).
fn seed() -> impl FnMut() -> u64 {
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

// ---- slow -----------------------------------------------------------------------------

/// Opens a subscription and reads only its status line; the socket is never read again.
fn subscribe_raw(addr: SocketAddr, task_id: &str) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    write!(
        stream,
        "GET /tasks/{task_id}:subscribe HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    (&head[9..12] == b"200").then_some(stream)
}

fn held_task(addr: SocketAddr, message_id: &str) -> String {
    let (status, reply) = call(
        addr,
        "POST",
        "/message:send",
        Some(&send_body(message_id, "hold")),
    )
    .unwrap();
    assert_eq!(status, 200, "{reply}");
    reply["task"]["id"].as_str().unwrap().to_string()
}

fn slow_clients(rounds: u64, subscribers: usize, crowd: usize) {
    let dir = scratch("slow");
    let server = ServerProcess::start(&dir);
    let addr = server.addr;
    let (rss, _) = server.rss_mib();
    println!("slow readers: the server starts at {rss:.0} MiB RSS");
    for round in 1..=rounds {
        let task = held_task(addr, &format!("hold-{round}"));
        let readers: Vec<TcpStream> = (0..subscribers)
            .filter_map(|_| subscribe_raw(addr, &task))
            .collect();
        let (before, _) = server.rss_mib();
        let (status, _) = call(
            addr,
            "POST",
            "/message:send",
            Some(&json!({"message": {"messageId": format!("emit-{round}"), "role": "ROLE_USER", "parts": [{"text": format!("emit {task} 200 256")}]}})),
        )
        .unwrap();
        assert_eq!(status, 200);
        // Readers that never read are dropped after the write timeout (2 s here).
        let mut peak = before;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            peak = peak.max(server.rss_mib().0);
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(readers);
        std::thread::sleep(Duration::from_millis(500));
        let (after, _) = server.rss_mib();
        println!(
            "round {round}: {} readers that never read, 200 updates of 256 KiB: RSS {before:.0} MiB before, {peak:.0} MiB peak, {after:.0} MiB after",
            subscribers
        );
    }
    // Readers that never read a large Task: each is sent its snapshot (about 1 MiB) at once.
    for round in 1..=rounds {
        let task = held_task(addr, &format!("big-{round}"));
        let (status, _) = call(
            addr,
            "POST",
            "/message:send",
            Some(&json!({"message": {"messageId": format!("grow-{round}"), "role": "ROLE_USER", "parts": [{"text": format!("emit {task} 4 256")}]}})),
        )
        .unwrap();
        assert_eq!(status, 200);
        let (before, _) = server.rss_mib();
        let readers: Vec<TcpStream> = (0..200)
            .filter_map(|_| subscribe_raw(addr, &task))
            .collect();
        let mut peak = before;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            peak = peak.max(server.rss_mib().0);
            std::thread::sleep(Duration::from_millis(100));
        }
        let opened = readers.len();
        drop(readers);
        std::thread::sleep(Duration::from_millis(1500));
        let (after, _) = server.rss_mib();
        println!(
            "round {round}: {opened} readers that never read a 1 MiB Task: RSS {before:.0} MiB before, {peak:.0} MiB peak, {after:.0} MiB after"
        );
    }
    // Availability with a crowd of live subscribers and idle sockets.
    let task = held_task(addr, "crowd");
    let streams: Vec<TcpStream> = (0..crowd)
        .filter_map(|_| subscribe_raw(addr, &task))
        .collect();
    let idle: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    let started = Instant::now();
    let (status, _) = call(addr, "GET", "/tasks?pageSize=50", None).unwrap();
    assert_eq!(status, 200);
    let listed = started.elapsed();
    let started = Instant::now();
    let (status, canceled) = call(addr, "POST", &format!("/tasks/{task}:cancel"), None).unwrap();
    assert_eq!(status, 200, "{canceled}");
    let cancel = started.elapsed();
    println!(
        "{} live subscribers and {} idle sockets: the owner's GET /tasks took {:.1} ms, its cancel {:.1} ms",
        streams.len(),
        idle.len(),
        listed.as_secs_f64() * 1000.0,
        cancel.as_secs_f64() * 1000.0
    );
    drop(streams);
    drop(idle);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
