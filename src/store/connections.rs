//! How the store's connections are opened and configured: SQLite's process-wide settings,
//! the writer's pragmas, the readers' (pooled by [`super::Store::read`]) and the
//! operator's read-only connection ([`open_read_only`]); and the one way a transaction
//! statement runs ([`savepoint`]).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{schema, StoreError, DB_FILE};

/// SQLite's process-wide settings, made once before its first connection (afterwards
/// SQLite refuses them, which only costs the speed-up). Memory statistics off: with them on,
/// every allocation SQLite makes takes a global mutex to count it, and a profile of
/// one-core `message:send` spent ~4% of all CPU in that mutex and its bookkeeping. The
/// store never reads the statistics.
pub(super) fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a documented start-up configuration call with an int argument, made
        // before any connection exists in this process (or refused harmlessly if not).
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}

pub(super) fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    // 4 MiB of page cache for the writer (SQLite's default is 2 MiB): the hot index pages
    // of a large store stay in memory instead of being re-read for every insert. Larger
    // costs more than it saves: SQLite scans the cache's hash table at the end of every
    // write transaction, and the cache counts against the resident's memory. 16 MiB put a
    // one-core message:send at 99-108 MB peak RSS, 8 MiB at 94-99 MB; 4 MiB at 90-95 MB
    // with no loss of rate (paired runs of benches/http.rs, and cargo bench --bench
    // intake at 100,000 Tasks, 2026-12-04).
    conn.pragma_update(None, "cache_size", -4_096)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    cache_statements(conn);
    stable_plans(conn)?;
    Ok(())
}

/// Room for every statement the store prepares, so none is compiled twice. rusqlite's
/// cache holds 16 by default and evicts the least recently used: the writer runs more
/// distinct statements than that for each accepted message (Task, claim, evidence,
/// history, counts, contexts, deliveries), so a default cache re-parsed several of them
/// on every Task (a callgrind profile of a blocking `message:send` spent 6% of all
/// instructions in `sqlite3_prepare_v3`).
fn cache_statements(conn: &Connection) {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
}

/// Statements a connection keeps compiled (every distinct SQL text the store runs fits).
const STATEMENT_CACHE: usize = 128;

/// Query plans that do not depend on bound values (SQLite's query planner stability
/// guarantee). Without it, the STAT4 build recompiles a cached statement on the first step
/// after any parameter compared to an indexed column (or used as a LIMIT) is rebound:
/// every Task read re-parsed its history and artifact queries (a profile of
/// `GET /tasks/{id}` spent 10.6% of its CPU in `sqlite3Reprepare`). The store
/// never runs ANALYZE, so no plan is lost.
fn stable_plans(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// Opens the store at `root` for inspection only: read-only, no root lock, no migration,
/// no writer; it works while the resident has the store open (WAL readers never block the
/// writer). Refuses a root without a store and a store written by a newer build.
pub fn open_read_only(root: &Path) -> Result<Connection, StoreError> {
    let db_path = root.join(DB_FILE);
    if !db_path.is_file() {
        return Err(StoreError::Io {
            path: db_path,
            message: "there is no task-plane store here (no database file); check the root (CHANNELS_TASK_STORE_PATH or --store)".into(),
        });
    }
    let conn = open_reader(&db_path)?;
    match schema::readable_version(&conn, &db_path)? {
        0 => Err(StoreError::Schema(format!(
            "{} is not an initialized task-plane store (schema version 0)",
            db_path.display()
        ))),
        _ => Ok(conn),
    }
}

pub(super) fn open_reader(db_path: &Path) -> Result<Connection, StoreError> {
    configure_sqlite();
    let conn = Connection::open_with_flags(
        db_path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Readers keep SQLite's small default cache: after every commit a reader starts with
    // an empty cache anyway (WAL), and clearing a large one costs more than it saves.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    cache_statements(&conn);
    stable_plans(&conn)?;
    Ok(conn)
}

/// Runs a transaction-control statement through the statement cache (one per job or read:
/// parsing it each time is measurable at thousands of requests per second).
pub(super) fn savepoint(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}
