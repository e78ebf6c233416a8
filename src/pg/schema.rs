//! The PostgreSQL schema and its versioned migrations.
//!
//! Version 1 of this line is the SQLite store's final shape (`store::schema`, versions 1–8)
//! in PostgreSQL types, plus the fleet's wake lease on `claims` (the claim carries a pending
//! wake): which node holds it (`lease_owner`) and until when (`lease_until`, on the
//! database's clock: leases are compared with its `now()`, never a node's; see
//! docs/fleet.md).
//!
//! `schema_migrations(version, applied_at)` records each applied version. Each migration
//! runs in one transaction that first takes a transaction-scoped advisory lock, so nodes
//! starting together apply it once, one after another; a database at a newer version than
//! this build knows is refused (never downgraded).

use postgres::{Client, Transaction};

use crate::store::StoreError;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = 3;

/// The advisory lock key every migrator of this schema takes (`a2a_sch` in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_3261_5f73_6368;

/// Column types: ids, states and JSON bodies are TEXT (bodies stay byte for byte what was
/// written, which JSONB's normal form would not keep, and no query looks inside them);
/// times in ms and counters are BIGINT; flags BOOLEAN, except `input_request_open`, a 0/1
/// SMALLINT, so the store's one SQL form of "waits for its caller"
/// (`store::tasks::awaits_caller_sql`) reads it on both backends; the secret BYTEA.
const V1: &str = r#"
CREATE TABLE contexts (
  context_id       TEXT PRIMARY KEY,
  principal        TEXT NOT NULL,
  source           TEXT NOT NULL,
  conversation_key TEXT,
  created_ms       BIGINT NOT NULL,
  last_event_ms    BIGINT NOT NULL
);
CREATE UNIQUE INDEX contexts_by_conversation
  ON contexts(principal, source, conversation_key) WHERE conversation_key IS NOT NULL;
CREATE INDEX contexts_by_last_event ON contexts(last_event_ms);

CREATE TABLE tasks (
  seq                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id            TEXT NOT NULL UNIQUE,
  principal          TEXT NOT NULL,
  context_id         TEXT NOT NULL,
  source             TEXT NOT NULL,
  continuation       TEXT NOT NULL,
  state              TEXT NOT NULL,
  status_message     TEXT,
  status_ms          BIGINT NOT NULL,
  created_ms         BIGINT NOT NULL,
  input_request_seq  BIGINT NOT NULL DEFAULT 0,
  input_request_open SMALLINT NOT NULL DEFAULT 0 CHECK (input_request_open IN (0, 1)),
  input_schema       TEXT,
  extensions         TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX tasks_by_principal ON tasks(principal, status_ms DESC, seq DESC);
CREATE INDEX tasks_by_context ON tasks(context_id, status_ms DESC, seq DESC);
CREATE INDEX tasks_by_state ON tasks(state, status_ms);

-- A Task's next history and artifact positions are the last `n` + 1 (SQLite v8).
CREATE TABLE history (
  task_seq BIGINT NOT NULL,
  n        BIGINT NOT NULL,
  body     TEXT NOT NULL,
  PRIMARY KEY (task_seq, n)
);

CREATE TABLE artifacts (
  task_seq    BIGINT NOT NULL,
  n           BIGINT NOT NULL,
  artifact_id TEXT NOT NULL,
  body        TEXT NOT NULL,
  PRIMARY KEY (task_seq, n)
);

-- The activation journal: one claim per (principal, dedupe key); the dedupe authority.
-- A deliverable claim is a pending wake; a resident that works it holds its lease.
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
  deliveries           BIGINT NOT NULL DEFAULT 0,
  claimed_ms           BIGINT NOT NULL,
  lease_owner          TEXT,
  lease_until          TIMESTAMPTZ,
  UNIQUE (principal, dedupe_key),
  CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
);
CREATE INDEX claims_by_task ON claims(task_id, claimed_ms) WHERE task_id IS NOT NULL;
CREATE INDEX claims_by_time ON claims(claimed_ms);
CREATE INDEX claims_by_lease ON claims(lease_until) WHERE lease_owner IS NOT NULL;

-- Each claim's state records, in order: ACCEPTED, WOKEN, WAKE_DELIVERED n, WAKE_FAILED,
-- QUARANTINED.
CREATE TABLE claim_states (
  activation_id TEXT NOT NULL,
  n             BIGINT NOT NULL,
  kind          TEXT NOT NULL,
  count         BIGINT,
  at_ms         BIGINT NOT NULL,
  detail        TEXT,
  PRIMARY KEY (activation_id, n)
);

-- Content-addressed evidence in insertion order; the same content twice is one record per
-- Task, and one record among the evidence about no Task (SQLite v6).
CREATE TABLE evidence (
  seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  evidence_id   TEXT NOT NULL,
  kind          TEXT NOT NULL,
  healthy       BOOLEAN NOT NULL,
  task_id       TEXT,
  activation_id TEXT,
  locator       TEXT NOT NULL,
  content       TEXT NOT NULL,
  recorded_ms   BIGINT NOT NULL
);
CREATE UNIQUE INDEX evidence_by_task ON evidence(task_id, evidence_id) WHERE task_id IS NOT NULL;
CREATE UNIQUE INDEX evidence_without_task ON evidence(evidence_id) WHERE task_id IS NULL;
CREATE INDEX evidence_by_time ON evidence(recorded_ms);

CREATE TABLE reply_anchors (
  principal            TEXT NOT NULL,
  source               TEXT NOT NULL,
  provider_response_id TEXT NOT NULL,
  task_id              TEXT NOT NULL,
  input_request_seq    BIGINT NOT NULL,
  recorded_ms          BIGINT NOT NULL,
  PRIMARY KEY (principal, source, provider_response_id)
);
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
  attempts             BIGINT NOT NULL DEFAULT 0,
  detail               TEXT,
  created_ms           BIGINT NOT NULL,
  updated_ms           BIGINT NOT NULL
);
CREATE UNIQUE INDEX deliveries_by_operation ON deliveries(source, operation_id);
CREATE INDEX deliveries_by_time ON deliveries(updated_ms);

CREATE TABLE checkpoints (
  principal  TEXT NOT NULL,
  source     TEXT NOT NULL,
  cursor     TEXT NOT NULL,
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY (principal, source)
);

-- The store's own secrets (`page_tokens` signs GET /tasks page tokens); inserted by the
-- migration with 32 bytes from the operating system.
CREATE TABLE secrets (
  name  TEXT PRIMARY KEY,
  value BYTEA NOT NULL
);

-- Each principal's Task count by state: an insert or state change keeps it in the writing
-- transaction (as the SQLite store's code does); a delete by the trigger below.
CREATE TABLE task_counts (
  principal TEXT NOT NULL,
  state     TEXT NOT NULL,
  n         BIGINT NOT NULL,
  PRIMARY KEY (principal, state)
);

-- The ids of Tasks removed since the last startup recovery (SQLite v5).
CREATE TABLE removed_tasks (
  task_id TEXT PRIMARY KEY
);

CREATE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE task_counts SET n = n - 1 WHERE principal = OLD.principal AND state = OLD.state;
  INSERT INTO removed_tasks (task_id) VALUES (OLD.task_id) ON CONFLICT DO NOTHING;
  RETURN OLD;
END
$$;
CREATE TRIGGER tasks_deleted AFTER DELETE ON tasks
  FOR EACH ROW EXECUTE FUNCTION tasks_deleted();
"#;

fn v1(tx: &mut Transaction<'_>) -> Result<(), StoreError> {
    tx.batch_execute(V1)?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| {
        StoreError::Schema(format!(
            "the operating system gave no random bytes for the page-token secret: {e}"
        ))
    })?;
    tx.execute(
        "INSERT INTO secrets (name, value) VALUES ('page_tokens', $1)",
        &[&&secret[..]],
    )?;
    Ok(())
}

type Migration = fn(&mut Transaction<'_>) -> Result<(), StoreError>;

/// Version 2: each Task's Pi session files, kept when a turn ends and restored on the node
/// that works the Task next (docs/fleet.md, "A Task's Pi session follows it"). A file goes
/// with its Task (retention deletes the Task, the database its session).
const V2: &str = r#"
CREATE TABLE task_sessions (
  task_id    TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
  name       TEXT NOT NULL,
  -- The body's content address (sha256:<hex>): a node whose copy has it reads no body.
  digest     TEXT NOT NULL,
  body       BYTEA NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, name)
);
"#;

fn v2(tx: &mut Transaction<'_>) -> Result<(), StoreError> {
    tx.batch_execute(V2)?;
    Ok(())
}

/// Version 3: each Task's changes, versioned, so a node can publish what another node wrote
/// (docs/fleet.md, "Updates across nodes"). `tasks.version` moves on by one in every
/// transaction that changes the Task's status or artifacts; each change carries that
/// version, its place in the transaction (`step`) and the node that wrote it (`writer`).
/// Status changes are kept in `task_statuses` (the Task's row keeps only the newest);
/// artifacts, which are only ever appended, carry the three columns themselves (rows
/// written before version 3 have version 0: older than any a node follows).
const V3: &str = r#"
ALTER TABLE tasks ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE artifacts
  ADD COLUMN version BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN step    INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN writer  TEXT NOT NULL DEFAULT '';
CREATE TABLE task_statuses (
  task_seq BIGINT NOT NULL REFERENCES tasks(seq) ON DELETE CASCADE,
  version  BIGINT NOT NULL,
  step     INTEGER NOT NULL,
  writer   TEXT NOT NULL,
  state    TEXT NOT NULL,
  message  TEXT,
  at_ms    BIGINT NOT NULL,
  PRIMARY KEY (task_seq, version, step)
);
CREATE INDEX artifacts_by_version ON artifacts(task_seq, version);
"#;

fn v3(tx: &mut Transaction<'_>) -> Result<(), StoreError> {
    tx.batch_execute(V3)?;
    Ok(())
}

/// Every migration, in version order; the last one's version is [`SCHEMA_VERSION`].
const MIGRATIONS: [(i32, Migration); 3] = [(1, v1), (2, v2), (3, v3)];

/// The version recorded in `schema_migrations` (0 when none), inside `tx`, refused when a
/// newer build wrote it.
fn readable_version(tx: &mut Transaction<'_>, target: &str) -> Result<i32, StoreError> {
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
           version    INTEGER PRIMARY KEY,
           applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )?;
    let version: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )?
        .get(0);
    if version > SCHEMA_VERSION {
        return Err(StoreError::Schema(format!(
            "{target} has schema version {version}, but this build only knows up to {SCHEMA_VERSION}: \
             a newer a2a-task-plane migrated it; upgrade this node's package (the database is never downgraded)"
        )));
    }
    Ok(version)
}

/// Brings the database to [`SCHEMA_VERSION`], one transaction per migration, each under
/// the migration lock; returns the version found before. `target` names the database in
/// errors (host and name, never the password).
pub fn migrate(client: &mut Client, target: &str) -> Result<i32, StoreError> {
    let mut found = None;
    for (version, apply) in MIGRATIONS {
        let mut tx = client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        let current = readable_version(&mut tx, target)?;
        found.get_or_insert(current);
        if current < version {
            apply(&mut tx).map_err(|e| {
                StoreError::Schema(format!(
                    "{target}: migration to version {version} failed: {e}"
                ))
            })?;
            tx.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)",
                &[&version],
            )?;
        }
        tx.commit()?;
    }
    Ok(found.unwrap_or(0))
}

/// The applied versions, oldest first.
pub fn applied_versions(client: &mut Client) -> Result<Vec<i32>, StoreError> {
    Ok(client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )?
        .iter()
        .map(|row| row.get(0))
        .collect())
}
