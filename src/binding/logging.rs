//! The process's structured log sink, seen from JS, and the startup warnings.

use std::path::PathBuf;

use napi_derive::napi;
use serde_json::Value;

use crate::config;

/// Where `configureLogging` sends log lines.
#[napi(object)]
pub struct LoggingOptions {
    /// Also write lines to stderr (for journald, print and RPC modes). Never in Pi's
    /// interactive mode: it would draw over the screen.
    pub stderr: bool,
    /// The directory of the rotating log file; default `A2A_LOG_DIR`, else
    /// `<storeRoot>/logs`.
    pub directory: Option<String>,
    /// The store root whose `logs/` folder to use when no directory is given; default the
    /// configured one (`CHANNELS_TASK_STORE_PATH` or its default).
    pub store_root: Option<String>,
}

/// What `configureLogging` set up.
#[napi(object)]
pub struct LoggingConfigured {
    /// The log file, when one could be opened.
    pub file: Option<String>,
    /// What could not be applied, one sentence each (show them to the person).
    pub problems: Vec<String>,
}

/// Points this process's structured log lines (Rust's and `log()`'s) at a size-bounded,
/// rotating file and, optionally, stderr; filtered by `A2A_LOG` (EnvFilter syntax, default
/// `info`). Whether lines go to stderr is always applied, whatever else fails; an unusable
/// filter keeps the default, a directory that cannot hold the file leaves none, and each
/// problem is returned. Before the first call lines go to stderr only.
#[napi(catch_unwind)]
pub fn configure_logging(options: LoggingOptions) -> LoggingConfigured {
    let mut problems = Vec::new();
    let directory = match options.directory {
        Some(dir) => Some(PathBuf::from(dir)),
        None => config::log_dir(
            &config::process_env,
            options.store_root.as_deref().map(std::path::Path::new),
        )
        .map_err(|e| problems.push(format!("no log file: {e}")))
        .ok(),
    };
    let configured = crate::log::configure(&crate::log::LogTarget {
        directory,
        stderr: options.stderr,
        filter: config::var(&config::process_env, crate::log::LOG_FILTER_VAR),
    });
    problems.extend(configured.problems);
    LoggingConfigured {
        file: configured.file.map(|p| p.display().to_string()),
        problems,
    }
}

js_enum! {
    [" The level of a log line."]
    pub enum LogLevel for "level" {
        Debug = "debug",
        Info = "info",
        Warn = "warn",
        Error = "error",
    }
}

/// Writes one structured log line `{ts, level, event, ...fields}` through the same sink as
/// the Rust core, so an event name means one thing in both (`level` default `info`).
/// Secret-named fields (`token`, ...) are redacted.
#[napi(
    catch_unwind,
    ts_args_type = "event: string, fields?: Record<string, unknown> | undefined | null, level?: LogLevel | undefined | null"
)]
pub fn log(event: String, fields: Option<Value>, level: Option<LogLevel>) {
    let level = match level.unwrap_or(LogLevel::Info) {
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Error => tracing::Level::ERROR,
    };
    crate::log::event_at(level, &event, fields.unwrap_or(Value::Null));
}

/// Warnings about the environment to show once at startup (e.g. the legacy
/// `A2A_STORE_PATH`, which is not merged into the task-plane store).
#[napi(catch_unwind)]
pub fn startup_warnings() -> Vec<String> {
    config::startup_warnings(&config::process_env)
}
