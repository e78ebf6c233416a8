//! An A2A v1 task plane for a resident coding agent.
//!
//! # Layout
//!
//! The data flow and which thread owns what: `docs/architecture.md`.
//!
//! - [`store`]: the durable store behind a boundary (`store::boundary`: typed read and
//!   write transactions, the handle's job model); everything else uses only that. SQLite
//!   (`store::sqlite`) is the embedded default: one writer thread (group commit), read
//!   connections, schema migrations, the store-root lock, failure injection for tests;
//!   and every SQL statement, behind typed functions, one module per table or concern
//!   (`store::tasks`, `store::claims`, `store::contexts`, `store::evidence`,
//!   `store::anchors`, `store::checkpoints`, `store::deliveries`, `store::retention`,
//!   `store::inspect`).
//! - [`pg`]: the durable store on PostgreSQL for a fleet (`A2A_STORE_URL`): a writer thread
//!   that commits queued jobs in batches (a savepoint per job), pooled connections over TLS
//!   as the URL's `sslmode` says, versioned migrations.
//! - [`plane`]: the trusted intake and every rule of the contract's Task and conversation
//!   semantics (contexts, continuation, idempotency, acceptance, retention, delivery, the
//!   durable half of the wake queue). Rules only: it reads typed rows from the store,
//!   decides, and writes through the store's typed transactions.
//! - [`events`]: per-Task broadcast of updates after commit, and acceptances for agent drivers.
//! - [`handler`]: the A2A request handler under every binding: one function per A2A
//!   operation with its rules (principal, version and extension negotiation, idempotency,
//!   page sizes and signed page tokens, the blocking wait, the executor, the stream pool),
//!   what a caller sees of a Task, and errors with their A2A reasons.
//! - [`http`]: the A2A listener (hyper, own router): HTTP+JSON and JSON-RPC 2.0 on one port,
//!   gRPC (tonic over HTTP/2, `http::grpc`) on its own, thin adapters over [`handler`]; SSE,
//!   the Agent Card, and what a client may hold (connections, write deadlines; see
//!   `docs/reliability.md`).
//! - [`log`]: structured JSON log lines with stable event names.
//! - [`metrics`]: what an operator watches: Prometheus metrics and the health summary,
//!   one set per open plane.
//! - [`wake`]: the wake queue's admission and the one active turn (turn authority).
//! - [`tools`]: the four agent tools' rules and the workflow manifest.
//! - [`elicitation`]: `elicitation/v1` schema and answer checks.
//! - [`record`]: the native records the store keeps (not wire types), with the one
//!   definition of each state set (terminal, settled, awaiting the caller, claim and
//!   delivery states, evidence kinds).
//! - [`ids`]: the identifier pattern, locator bounds, server-minted ids.
//! - [`field_error`]: the one error that names a field.
//! - [`digest`]: content addresses (`sha256:<hex>`), of bytes and of canonical JSON.
//! - [`clock`]: injectable time.
//! - [`config`]: environment → configuration, with errors that name the variable.
//! - [`wire`]: the A2A v1 wire model (prost + pbjson from `proto/`): exact ProtoJSON in and
//!   out, REQUIRED-member checks, errors that name the field.
//! - [`binding`]: the napi surface of the Node addon; conversions at the JS boundary,
//!   no rules.
//!
//! # Module graph
//!
//! Imports point down, never up or sideways: a module uses only modules on lower rows
//! (the test `module_graph::imports_point_down_the_rows_drawn_in_lib_rs` reads the rows
//! below and every `crate::` path under `src/`, so a cycle, or a new module left out of
//! this picture, fails the build's tests).
//!
//! ```text
//! 8  binding
//! 7  tools  http
//! 6  wake  handler
//! 5  plane
//! 4  pg
//! 3  store  events  wire  config  metrics
//! 2  record  log
//! 1  ids  elicitation
//! 0  field_error  clock  digest
//!
//! binding ─► tools ─► wake ─► plane ─► store ─► record ─► ids ─► field_error
//!    │         │               ▲ │ │               ▲ ▲
//!    └─► http ─► handler ──────┘ │ └─► events ─────┘ │
//!         │    │   └─► wire ─────┼───────────────────┘
//!         └────┴─────► wire      └─► elicitation
//! ```
//!
//! (`config`, `log`, `clock`, `digest` and `field_error` are used across the layers; the
//! plane opens a PostgreSQL store through `pg`, which implements `store`'s boundary; the
//! rows are the whole truth, the drawing the main paths.)

pub mod clock;
pub mod config;
pub mod digest;
pub mod elicitation;
pub mod events;
pub mod field_error;
pub mod handler;
pub mod http;
pub mod ids;
pub mod log;
pub mod metrics;
pub mod pg;
pub mod plane;
pub mod record;
pub mod store;
pub mod tools;
pub mod wake;
pub mod wire;

pub mod binding;

#[cfg(test)]
mod module_graph {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// The rows of the module graph drawn in this file's docs: module → row.
    fn drawn_rows(lib_rs: &str) -> BTreeMap<String, u32> {
        let mut rows = BTreeMap::new();
        let block = lib_rs
            .split("# Module graph")
            .nth(1)
            .and_then(|rest| rest.split("```text").nth(1))
            .and_then(|rest| rest.split("```").next())
            .expect("lib.rs draws the module graph in a ```text block");
        for line in block.lines() {
            // A row: `<row>  <module>  <module>…`.
            let mut words = line.trim_start_matches("//!").split_whitespace();
            let Some(row) = words.next().and_then(|w| w.parse::<u32>().ok()) else {
                continue;
            };
            for word in words {
                rows.insert(word.to_string(), row);
            }
        }
        rows
    }

    /// Every `crate::<module>` named outside comments in `source`.
    fn used_modules(source: &str) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for line in source.lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    used.insert(name);
                }
            }
        }
        used
    }

    /// The top-level module of each `.rs` file under `dir` (`src/plane/wakes.rs` → `plane`).
    fn sources(dir: &Path, top: Option<&str>, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                sources(&path, Some(top.unwrap_or(&name)), out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let module = top.unwrap_or(stem).to_string();
                let text = std::fs::read_to_string(&path).expect("a source file is readable");
                out.push((module, text));
            }
        }
    }

    /// What is wrong with `files` (module, source) against `rows`: a use of a module on
    /// the same row or above, or a module the rows leave out.
    fn violations(rows: &BTreeMap<String, u32>, files: &[(String, String)]) -> Vec<String> {
        let mut wrong = Vec::new();
        for (module, text) in files {
            if module == "lib" {
                continue;
            }
            let Some(&from) = rows.get(module) else {
                wrong.push(format!(
                    "module `{module}` is not drawn in lib.rs's module graph"
                ));
                continue;
            };
            for used in used_modules(text) {
                match rows.get(&used) {
                    _ if used == *module => {}
                    Some(&to) if to < from => {}
                    Some(&to) => wrong.push(format!(
                        "`{module}` (row {from}) uses `{used}` (row {to}): imports must point down"
                    )),
                    None => wrong.push(format!(
                        "`{module}` uses `{used}`, which is not drawn in lib.rs's module graph"
                    )),
                }
            }
        }
        wrong.sort();
        wrong.dedup();
        wrong
    }

    /// What reaches past the storage boundary (`store::boundary`) in `files` (module,
    /// source): outside `store`, no code names `rusqlite` or takes the SQLite escape hatch
    /// (`.sqlite()`); only typed operations cross. A file's tests (after its first
    /// `#[cfg(test)]`) may look at SQLite's own state.
    fn past_the_storage_boundary(files: &[(String, String)]) -> Vec<String> {
        let mut wrong = Vec::new();
        for (module, text) in files {
            if module == "store" {
                continue;
            }
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for line in code.lines() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                if line.contains("rusqlite") || line.contains(".sqlite()") {
                    wrong.push(format!(
                        "`{module}` reaches past the storage boundary: {}",
                        line.trim()
                    ));
                }
            }
        }
        wrong
    }

    #[test]
    fn only_the_store_speaks_sql() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, None, &mut files);
        assert!(
            files.iter().any(|(m, _)| m == "plane"),
            "the sources were read"
        );
        let wrong = past_the_storage_boundary(&files);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        let file = |module: &str, text: &str| (module.to_string(), text.to_string());
        let refused = [
            file(
                "plane",
                "let n: i64 = tx.sqlite().unwrap().conn().query_row(..);",
            ),
            file("wake", "use rusqlite::Connection;"),
        ];
        assert_eq!(past_the_storage_boundary(&refused).len(), 2);
        let fine = [
            file("store", "use rusqlite::Connection;"),
            file(
                "plane",
                "// rusqlite is the store's\nlet row = tx.task_by_id(id)?;",
            ),
            file(
                "plane",
                "fn f() {}\n#[cfg(test)]\nmod t { fn g() { tx.sqlite(); } }",
            ),
        ];
        assert!(past_the_storage_boundary(&fine).is_empty());
    }

    #[test]
    fn imports_point_down_the_rows_drawn_in_lib_rs() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let rows = drawn_rows(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
        assert!(rows.len() >= 15, "the rows were read: {rows:?}");
        let mut files = Vec::new();
        sources(&src, None, &mut files);
        let wrong = violations(&rows, &files);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_cycle_or_an_undrawn_module_is_refused() {
        let rows = drawn_rows(
            "# Module graph\n```text\n1  plane  wake\n0  store\n\nplane ─► store\n```\n",
        );
        assert_eq!(rows.get("wake"), Some(&1));
        assert_eq!(rows.get("store"), Some(&0));
        let file = |module: &str, text: &str| (module.to_string(), text.to_string());
        let fine = [
            file(
                "plane",
                "use crate::store::X;\n// crate::wake is only named here",
            ),
            file("store", "let now = crate::store::clock();"),
        ];
        assert!(violations(&rows, &fine).is_empty());
        let cycle = [
            file("plane", "use crate::wake::Queue;"),
            file("store", "crate::plane::f()"),
        ];
        assert_eq!(violations(&rows, &cycle).len(), 2);
        let undrawn = [
            file("http", "use crate::store::X;"),
            file("plane", "crate::tools::f()"),
        ];
        assert_eq!(violations(&rows, &undrawn).len(), 2);
    }
}
