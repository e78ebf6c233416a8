//! The durable store on PostgreSQL, for a fleet of nodes sharing one database
//! (`A2A_STORE_URL=postgres://…`; the embedded SQLite store in [`crate::store`] stays the
//! default).
//!
//! - **Jobs on worker threads.** Like the SQLite writer, callers hand the store a job (a
//!   sync closure) and wait for its reply, blocking or async. N worker threads ([`pool`])
//!   each run one job at a time as one transaction on a connection from an `r2d2` pool of
//!   N, and commit it (`synchronous_commit` on: the commit is durable) before replying.
//! - **Versioned migrations** ([`schema`]): run at open, under an advisory lock, so nodes
//!   starting together migrate once.
//! - Errors name the database by host, port, name and user, never by its password.

mod pool;
pub mod schema;

use std::fmt;

pub use pool::{PgOptions, PgStore};
pub use schema::SCHEMA_VERSION;

/// A failure of the PostgreSQL store itself (not of a rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgError {
    /// The database could not be reached or refused the connection.
    Connect { target: String, message: String },
    /// PostgreSQL refused a statement or a commit.
    Sql(String),
    /// The schema is newer than this build, or a migration failed.
    Schema(String),
    /// A stored record could not be decoded.
    Corrupt(String),
    /// The store was closed.
    Closed,
}

impl PgError {
    /// The same error, saying what was being done when it happened.
    pub fn during(self, what: &str) -> PgError {
        match self {
            PgError::Sql(message) => PgError::Schema(format!("{what}: {message}")),
            other => other,
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::Connect { target, message } => write!(
                f,
                "task-plane store: cannot connect to PostgreSQL {target}: {message}; \
                 check that the server runs and accepts this user (A2A_STORE_URL)"
            ),
            PgError::Sql(message) => write!(f, "task-plane store (PostgreSQL): {message}"),
            PgError::Schema(message) => write!(f, "task-plane store (PostgreSQL): {message}"),
            PgError::Corrupt(message) => write!(
                f,
                "task-plane store (PostgreSQL): a stored record is unreadable: {message}"
            ),
            PgError::Closed => write!(f, "task-plane store (PostgreSQL) is closed"),
        }
    }
}

impl std::error::Error for PgError {}

impl From<postgres::Error> for PgError {
    fn from(err: postgres::Error) -> Self {
        PgError::Sql(describe(&err))
    }
}

impl From<serde_json::Error> for PgError {
    fn from(err: serde_json::Error) -> Self {
        PgError::Corrupt(err.to_string())
    }
}

/// A PostgreSQL error as one line: the server's message, detail and SQLSTATE when it
/// answered, else the client's own words.
pub fn describe(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => {
            let mut line = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                line.push_str(&format!(": {detail}"));
            }
            line
        }
        None => match std::error::Error::source(err) {
            Some(source) => format!("{err}: {source}"),
            None => err.to_string(),
        },
    }
}

/// Names a database for messages: hosts with ports, database and user; never the password.
pub fn target(config: &postgres::Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let host = match host {
                postgres::config::Host::Tcp(name) => name.clone(),
                postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let user = config.get_user().unwrap_or("(default user)");
    let database = config.get_dbname().unwrap_or(user);
    format!(
        "database `{database}` on {} as user `{user}`",
        hosts.join(",")
    )
}
