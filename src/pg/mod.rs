//! The durable store on PostgreSQL, for a fleet of nodes sharing one database
//! (`A2A_STORE_URL=postgres://…`; the embedded SQLite store in [`crate::store`] stays the
//! default).
//!
//! - [`PgStore`] is a [`crate::store::Backend`]: the plane drives it through the same handle
//!   and typed transactions as the SQLite store ([`crate::store::Store::with_backend`]).
//!   Its writer runs the queued write jobs in batches, one transaction per batch with a
//!   savepoint per job, and commits (`synchronous_commit` on: durable) before answering
//!   ([`backend`]); the typed
//!   operations, with the same semantics as SQLite's, are in [`tx`].
//! - **Versioned migrations** ([`schema`]): run at open, under an advisory lock, so nodes
//!   starting together migrate once.
//! - TLS to the database as the URL's `sslmode` and `sslrootcert` say, as libpq reads them
//!   ([`tls`]; `prefer` when absent).
//! - Errors name the database by host, port, name and user, never by its password.

mod backend;
pub mod listen;
pub mod schema;
pub mod tls;
mod tx;

pub use backend::{PgOptions, PgStore, ATTEMPTS, MAX_BATCH};
pub use schema::SCHEMA_VERSION;
pub use tx::{BACKEND, TASK_CHANNEL, WAKE_CHANNEL};

use crate::store::{Store, StoreError, StoreOptions};

/// The store handle on the PostgreSQL database `url` names, for this node's local store
/// `root` (created and locked first, see [`Store::open_with_backend`]).
/// `node` is the id of the node that writes through it (its changes and notifications
/// carry it).
pub fn open_store(
    root: &std::path::Path,
    url: &crate::config::PostgresUrl,
    options: StoreOptions,
    node: &str,
) -> Result<Store, StoreError> {
    let pg_options = PgOptions {
        faults: options.faults.clone(),
        node: node.into(),
        ..PgOptions::default()
    };
    Store::open_with_backend(root, options, || {
        let pg = PgStore::open(url, root, pg_options)?;
        Ok(std::sync::Arc::new(pg))
    })
}

/// The PostgreSQL store behind `store`, if PostgreSQL holds it (a store other nodes may
/// share: wake leases, LISTEN).
pub fn of(store: &Store) -> Option<&PgStore> {
    store.backend().as_any().downcast_ref::<PgStore>()
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
