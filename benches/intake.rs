//! Intake benchmark: durable accepts per second (every acceptance fsynced before it is
//! acknowledged) with 1 and 64 concurrent callers, on an empty store and on one holding
//! 100,000 retained Tasks. Run: `cargo bench --bench intake` (bounded: a few seconds per
//! case). `INTAKE_BENCH_TASKS` overrides the store size of the second half.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use a2a_task_plane::plane::{PlaneOptions, TaskPlane};
use a2a_task_plane::record::MessageRecord;

struct Sample {
    accepts: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.accepts as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort();
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }
}

/// `callers` threads each accept until `per_case` has passed (or `max_each` accepts).
fn run(
    plane: &TaskPlane,
    tag: &str,
    callers: usize,
    per_case: Duration,
    max_each: usize,
) -> Sample {
    let barrier = Arc::new(Barrier::new(callers + 1));
    let handles: Vec<_> = (0..callers)
        .map(|c| {
            let (plane, barrier, tag) = (plane.clone(), barrier.clone(), tag.to_string());
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut latencies = Vec::new();
                for i in 0..max_each {
                    if start.elapsed() > per_case {
                        break;
                    }
                    let t = Instant::now();
                    let message = MessageRecord::user_text(
                        format!("{tag}-{c}-{i}"),
                        "please summarise the attached report",
                    );
                    plane
                        .accept_in_context("bench", None, message, Vec::new())
                        .expect("accept");
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let latencies: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    Sample {
        accepts: latencies.len(),
        elapsed: start.elapsed(),
        latencies,
    }
}

fn fill(plane: &TaskPlane, tasks: usize) {
    let callers = 64;
    let each = tasks.div_ceil(callers);
    let handles: Vec<_> = (0..callers)
        .map(|c| {
            let plane = plane.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    let message =
                        MessageRecord::user_text(format!("fill-{c}-{i}"), "retained task");
                    plane
                        .accept_in_context("bench", None, message, Vec::new())
                        .expect("fill");
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
}

fn report(label: &str, mut s: Sample) -> f64 {
    let (p50, p99) = (s.percentile(0.5), s.percentile(0.99));
    println!(
        "{label:<34} {:>9.0} accepts/s   p50 {:>7.2} ms   p99 {:>7.2} ms   ({} accepts in {:.2} s)",
        s.rate(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        s.accepts,
        s.elapsed.as_secs_f64()
    );
    s.rate()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let retained: usize = std::env::var("INTAKE_BENCH_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = std::env::temp_dir().join(format!("tp-bench-{}", std::process::id()));
    let plane = TaskPlane::open(&dir, PlaneOptions::default()).expect("open");
    let case = Duration::from_secs(4);
    println!(
        "durable intake (SQLite WAL, synchronous=FULL: every accept is fsynced before it returns)"
    );
    let empty_1 = report("empty store, 1 caller", run(&plane, "e1", 1, case, 100_000));
    let empty_64 = report(
        "empty store, 64 callers",
        run(&plane, "e64", 64, case, 100_000),
    );
    let t = Instant::now();
    fill(&plane, retained);
    println!(
        "filled to {retained} retained Tasks in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let full_1 = report(
        &format!("{retained} Tasks, 1 caller"),
        run(&plane, "f1", 1, case, 100_000),
    );
    let full_64 = report(
        &format!("{retained} Tasks, 64 callers"),
        run(&plane, "f64", 64, case, 100_000),
    );
    println!(
        "ratios: 64 callers / 1 caller = {:.1}x (empty), {:.1}x (full); full / empty = {:.2} (1 caller), {:.2} (64 callers)",
        empty_64 / empty_1,
        full_64 / full_1,
        full_1 / empty_1,
        full_64 / empty_64
    );
    plane.close();
    let _ = std::fs::remove_dir_all(&dir);
}
