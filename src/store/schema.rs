//! The SQLite schema and its migrations. `PRAGMA user_version` is the schema version; each
//! migration moves it up by one inside the transaction that applies it.

use rusqlite::Connection;

use super::StoreError;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 8;

/// The store's schema version, refused when a newer build wrote it.
pub fn readable_version(conn: &Connection, path: &std::path::Path) -> Result<i64, StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Schema(format!(
            "{} has schema version {version}, but this build only knows up to {SCHEMA_VERSION}: \
             it was written by a newer a2a-task-plane; upgrade the package (stores are never downgraded)",
            path.display()
        )));
    }
    Ok(version)
}

const V1: &str = r#"
-- (principal, source, conversationKey) -> contextId, plus contexts minted without a key.
CREATE TABLE contexts (
  context_id       TEXT PRIMARY KEY,
  principal        TEXT NOT NULL,
  source           TEXT NOT NULL,
  conversation_key TEXT,
  created_ms       INTEGER NOT NULL,
  last_event_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX contexts_by_conversation
  ON contexts(principal, source, conversation_key) WHERE conversation_key IS NOT NULL;
CREATE INDEX contexts_by_last_event ON contexts(last_event_ms);

CREATE TABLE tasks (
  seq                INTEGER PRIMARY KEY,
  task_id            TEXT NOT NULL UNIQUE,
  principal          TEXT NOT NULL,
  context_id         TEXT NOT NULL,
  source             TEXT NOT NULL,
  continuation       TEXT NOT NULL,
  state              TEXT NOT NULL,
  status_message     TEXT,
  status_ms          INTEGER NOT NULL,
  created_ms         INTEGER NOT NULL,
  input_request_seq  INTEGER NOT NULL DEFAULT 0,
  input_request_open INTEGER NOT NULL DEFAULT 0,
  extensions         TEXT NOT NULL DEFAULT '[]',
  history_len        INTEGER NOT NULL DEFAULT 0,
  artifact_len       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_by_principal ON tasks(principal, status_ms DESC, seq DESC);
CREATE INDEX tasks_by_context ON tasks(context_id, status_ms DESC, seq DESC);
CREATE INDEX tasks_by_state ON tasks(state, status_ms);

CREATE TABLE history (
  task_seq INTEGER NOT NULL,
  n        INTEGER NOT NULL,
  body     TEXT NOT NULL,
  PRIMARY KEY (task_seq, n)
) WITHOUT ROWID;

CREATE TABLE artifacts (
  task_seq    INTEGER NOT NULL,
  n           INTEGER NOT NULL,
  artifact_id TEXT NOT NULL,
  body        TEXT NOT NULL,
  PRIMARY KEY (task_seq, n)
) WITHOUT ROWID;

-- The activation journal: one claim per (principal, dedupe key); the dedupe authority.
CREATE TABLE claims (
  activation_id        TEXT PRIMARY KEY,
  principal            TEXT NOT NULL,
  dedupe_key           TEXT NOT NULL,
  source               TEXT NOT NULL,
  route                TEXT NOT NULL,
  task_id              TEXT,
  context_id           TEXT NOT NULL,
  digest               TEXT NOT NULL,
  requested_context_id TEXT,
  requested_task_id    TEXT,
  direct_reply         TEXT,
  state                TEXT NOT NULL,
  deliveries           INTEGER NOT NULL DEFAULT 0,
  claimed_ms           INTEGER NOT NULL,
  UNIQUE (principal, dedupe_key)
) WITHOUT ROWID;
CREATE INDEX claims_by_task ON claims(task_id, claimed_ms) WHERE task_id IS NOT NULL;
CREATE INDEX claims_by_time ON claims(claimed_ms);

-- Each claim's state records, in order: ACCEPTED, WOKEN, WAKE_DELIVERED n, WAKE_FAILED,
-- QUARANTINED.
CREATE TABLE claim_states (
  activation_id TEXT NOT NULL,
  n             INTEGER NOT NULL,
  kind          TEXT NOT NULL,
  count         INTEGER,
  at_ms         INTEGER NOT NULL,
  detail        TEXT,
  PRIMARY KEY (activation_id, n)
) WITHOUT ROWID;

-- Content-addressed evidence (`sha256:<hex>` of the content) with its locator.
CREATE TABLE evidence (
  evidence_id   TEXT PRIMARY KEY,
  kind          TEXT NOT NULL,
  healthy       INTEGER NOT NULL,
  task_id       TEXT,
  activation_id TEXT,
  locator       TEXT NOT NULL,
  content       TEXT NOT NULL,
  recorded_ms   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX evidence_by_task ON evidence(task_id) WHERE task_id IS NOT NULL;
CREATE INDEX evidence_by_time ON evidence(recorded_ms);

-- (principal, source, providerResponseId) -> taskId, for the input request it answered.
CREATE TABLE reply_anchors (
  principal            TEXT NOT NULL,
  source               TEXT NOT NULL,
  provider_response_id TEXT NOT NULL,
  task_id              TEXT NOT NULL,
  input_request_seq    INTEGER NOT NULL,
  recorded_ms          INTEGER NOT NULL,
  PRIMARY KEY (principal, source, provider_response_id)
) WITHOUT ROWID;
CREATE INDEX reply_anchors_by_time ON reply_anchors(recorded_ms);

CREATE TABLE deliveries (
  delivery_id          TEXT PRIMARY KEY,
  principal            TEXT NOT NULL,
  source               TEXT NOT NULL,
  task_id              TEXT,
  operation_id         TEXT NOT NULL,
  payload_digest       TEXT NOT NULL,
  recovery             TEXT NOT NULL,
  state                TEXT NOT NULL,
  provider_response_id TEXT,
  attempts             INTEGER NOT NULL DEFAULT 0,
  detail               TEXT,
  created_ms           INTEGER NOT NULL,
  updated_ms           INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX deliveries_by_operation ON deliveries(source, operation_id);
CREATE INDEX deliveries_by_time ON deliveries(updated_ms);

CREATE TABLE checkpoints (
  principal  TEXT NOT NULL,
  source     TEXT NOT NULL,
  cursor     TEXT NOT NULL,
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (principal, source)
) WITHOUT ROWID;
"#;

/// Version 2: the MCP elicitation schema of a Task's open input request, so an answer can
/// be checked against it.
const V2: &str = r#"
ALTER TABLE tasks ADD COLUMN input_schema TEXT;
"#;

/// Version 3: the store's own secrets, made once from SQLite's randomness (seeded by the
/// operating system). `page_tokens` signs `GET /tasks` page tokens, so a token is bound to
/// the caller and the query it was issued for, and stays valid across restarts.
const V3: &str = r#"
CREATE TABLE secrets (
  name  TEXT PRIMARY KEY,
  value BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO secrets (name, value) VALUES ('page_tokens', randomblob(32));
"#;

/// Version 4: each principal's Task count by state, kept by triggers in the transaction
/// that inserts, deletes or moves a Task, so `GET /tasks` reports `totalSize` without
/// counting the principal's Tasks on every page. Filled from the Tasks already stored.
const V4: &str = r#"
CREATE TABLE task_counts (
  principal TEXT NOT NULL,
  state     TEXT NOT NULL,
  n         INTEGER NOT NULL,
  PRIMARY KEY (principal, state)
) WITHOUT ROWID;
INSERT INTO task_counts (principal, state, n)
  SELECT principal, state, COUNT(*) FROM tasks GROUP BY principal, state;
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO task_counts (principal, state, n) VALUES (NEW.principal, NEW.state, 1)
    ON CONFLICT (principal, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
  UPDATE task_counts SET n = n - 1 WHERE principal = OLD.principal AND state = OLD.state;
END;
CREATE TRIGGER task_counts_move AFTER UPDATE OF principal, state ON tasks
  WHEN OLD.principal IS NOT NEW.principal OR OLD.state IS NOT NEW.state BEGIN
  UPDATE task_counts SET n = n - 1 WHERE principal = OLD.principal AND state = OLD.state;
  INSERT INTO task_counts (principal, state, n) VALUES (NEW.principal, NEW.state, 1)
    ON CONFLICT (principal, state) DO UPDATE SET n = n + 1;
END;
"#;

/// Version 5: the ids of Tasks removed since the last startup recovery (a trigger notes
/// each delete), so recovery looks for orphaned claims among their claims only instead of
/// scanning every claim at every start. Filled on upgrade with the Tasks of claims that
/// are orphaned already (one scan, once).
const V5: &str = r#"
CREATE TABLE removed_tasks (
  task_id TEXT PRIMARY KEY
) WITHOUT ROWID;
INSERT OR IGNORE INTO removed_tasks (task_id)
  SELECT task_id FROM claims c WHERE task_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id);
CREATE TRIGGER tasks_removed AFTER DELETE ON tasks BEGIN
  INSERT OR IGNORE INTO removed_tasks (task_id) VALUES (OLD.task_id);
END;
"#;

/// Version 6: evidence in insertion order. Keyed by its content address (random), every
/// insert landed on a random page of the whole table, and a commit of a dozen acceptances
/// rewrote ~40 evidence pages of ~85 (a profile of `message:send`). Rows now go in rowid
/// order, and "the same content twice is one record" is kept per Task by a unique index on
/// `(task_id, evidence_id)` (Task ids are minted in time order, so its inserts land at its
/// end too), and for evidence about no Task by a unique index on `evidence_id` alone.
const V6: &str = r#"
CREATE TABLE evidence_v6 (
  seq           INTEGER PRIMARY KEY,
  evidence_id   TEXT NOT NULL,
  kind          TEXT NOT NULL,
  healthy       INTEGER NOT NULL,
  task_id       TEXT,
  activation_id TEXT,
  locator       TEXT NOT NULL,
  content       TEXT NOT NULL,
  recorded_ms   INTEGER NOT NULL
);
INSERT INTO evidence_v6 (evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms)
  SELECT evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms
  FROM evidence ORDER BY recorded_ms, evidence_id;
DROP TABLE evidence;
ALTER TABLE evidence_v6 RENAME TO evidence;
CREATE UNIQUE INDEX evidence_by_task ON evidence(task_id, evidence_id) WHERE task_id IS NOT NULL;
CREATE UNIQUE INDEX evidence_without_task ON evidence(evidence_id) WHERE task_id IS NULL;
CREATE INDEX evidence_by_time ON evidence(recorded_ms);
"#;

/// Version 7: a Task's insert and state change keep its principal's count themselves
/// (`store::tasks::counts`) instead of by trigger: a statement that fires a trigger
/// copies every page it touches into a statement journal first. Deletes (compaction) keep
/// theirs by the `task_counts_delete` trigger.
const V7: &str = r#"
DROP TRIGGER IF EXISTS task_counts_insert;
DROP TRIGGER IF EXISTS task_counts_move;
"#;

/// Version 8: a Task's next history and artifact positions come from those tables (the
/// last `n` of the Task, found in the primary key), not from `history_len` and
/// `artifact_len` on its row: keeping those rewrote the Task's row once more for every
/// message and artifact appended. The two columns stay (dropping them rewrites the whole
/// table) and are no longer kept; Tasks created since hold 0 there. Nothing changes on
/// upgrade but the version, which keeps older builds (that still number from the columns)
/// from opening the store.
const V8: &str = "";

/// The store's secret `name` (see [`V3`]).
pub fn secret(conn: &Connection, name: &str) -> Result<Vec<u8>, StoreError> {
    Ok(
        conn.query_row("SELECT value FROM secrets WHERE name = ?1", [name], |r| {
            r.get(0)
        })?,
    )
}

/// Brings the schema to [`SCHEMA_VERSION`]. Refuses a store written by a newer build.
pub fn migrate(conn: &mut Connection, path: &std::path::Path) -> Result<(), StoreError> {
    let version = readable_version(conn, path)?;
    for (target, sql) in [
        (1, V1),
        (2, V2),
        (3, V3),
        (4, V4),
        (5, V5),
        (6, V6),
        (7, V7),
        (8, V8),
    ] {
        if version < target {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", target)?;
            tx.commit()?;
        }
    }
    Ok(())
}
