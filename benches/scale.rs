//! How reads and opening cost as the store grows (issue 10's scale table).
//!
//! `cargo bench --bench scale -- [--sizes 10000,100000,1000000] [--settled half|all]`
//!
//! For each size: a fresh store filled with that many Tasks of one principal (accepted
//! through the plane, 32 callers so commits group), half of them settled (or all, with
//! `--settled all`: then opening has no live Task to recover); then the cost of
//! `GET /tasks`-style pages (first, middle and last page of 50, with `totalSize`), of
//! reading one Task, and of opening the store (recovery and compaction). Bounded: each
//! measurement repeats a fixed number of times.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_task_plane::plane::{ListFilter, PageCursor, PlaneOptions, TaskPlane};
use a2a_task_plane::record::{MessageRecord, PartRecord};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let settle_every: usize = match args
        .iter()
        .position(|a| a == "--settled")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        None | Some("half") => 2,
        Some("all") => 1,
        Some(other) => panic!("--settled takes half or all, not {other}"),
    };
    println!(
        "| Tasks | fill | open | first page | middle page | last page | GET one Task |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for size in sizes {
        let dir = std::env::temp_dir().join(format!("tp-scale-{}-{size}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = dir.join("store");
        let plane = TaskPlane::open(&store, PlaneOptions::default()).unwrap();
        let started = Instant::now();
        let ids = fill(&plane, size, settle_every);
        let fill_time = started.elapsed();
        plane.close();
        let started = Instant::now();
        let plane = TaskPlane::open(&store, PlaneOptions::default()).unwrap();
        let open_time = started.elapsed();
        // Cursors of the first, middle and last pages, found by walking from the newest.
        let filter = |after: Option<PageCursor>| ListFilter {
            page_size: 50,
            after,
            ..ListFilter::default()
        };
        let pages = size.div_ceil(50);
        let mut cursors = vec![None];
        let mut after = None;
        for page in 1..pages {
            after = plane.list_tasks("bench", &filter(after)).unwrap().next;
            if page == pages / 2 || page == pages - 1 {
                cursors.push(after);
            }
        }
        let times: Vec<Duration> = cursors
            .iter()
            .map(|cursor| {
                median(50, || {
                    let page = plane.list_tasks("bench", &filter(*cursor)).unwrap();
                    assert_eq!(page.total, size as u64);
                })
            })
            .collect();
        let get = median(2000, || {
            let id = &ids[ids.len() / 2];
            plane.get_task("bench", id, None, true).unwrap().unwrap();
        });
        println!(
            "| {size} | {:.1} s | {} | {} | {} | {} | {} |",
            fill_time.as_secs_f64(),
            ms(open_time),
            ms(times[0]),
            ms(*times.get(1).unwrap_or(&times[0])),
            ms(*times.last().unwrap()),
            ms(get),
        );
        plane.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// The median of `n` runs of `work`.
fn median(n: usize, mut work: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

/// Accepts `size` Tasks for one principal from 32 callers; every `settle_every`th one is
/// completed.
fn fill(plane: &TaskPlane, size: usize, settle_every: usize) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let ids = std::sync::Mutex::new(Vec::with_capacity(size));
    std::thread::scope(|scope| {
        for _ in 0..32 {
            scope.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= size {
                    return;
                }
                let accepted = plane
                    .accept_in_context(
                        "bench",
                        None,
                        MessageRecord::user_text(format!("m-{n}"), "summarise the report"),
                        vec![],
                    )
                    .unwrap();
                let id = accepted.task_id.unwrap();
                if n.is_multiple_of(settle_every) {
                    plane
                        .complete(
                            &id,
                            vec![],
                            Some(MessageRecord::agent(vec![PartRecord::text("done")])),
                        )
                        .unwrap();
                }
                ids.lock().unwrap().push(id);
            });
        }
    });
    ids.into_inner().unwrap()
}
