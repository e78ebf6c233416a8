//! Structured logs through `tracing`: one JSON object per line,
//! `{"ts": <unix ms>, "level": "info", "event": "<stable name>", ...fields}`, so operators
//! can grep and parse them, and an event name means one thing in Rust and in the Pi
//! extension (which logs through [`event_at`] via the addon's `log()`).
//!
//! Where lines go is the process's one log sink (a `tracing` subscriber is process-wide by
//! nature; nothing else here is global): a size-bounded, rotating file (see [`RotatingFile`])
//! once [`configure`] names a directory, and stderr unless [`configure`] turns it off (Pi's
//! interactive screen must never be written to). Before [`configure`] is called, lines go
//! to stderr only, so tests and embedders see them. `A2A_LOG` filters with `EnvFilter`
//! syntax (default `info`). Values of fields whose name says they hold a secret (`token`,
//! `authorization`, `secret`, `password`) are replaced by `[redacted]` before they are
//! written: tokens never reach a log.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

/// The variable that filters log lines (`EnvFilter` syntax).
pub const LOG_FILTER_VAR: &str = "A2A_LOG";
/// The variable that moves the log directory away from `<store root>/logs`.
pub const LOG_DIR_VAR: &str = "A2A_LOG_DIR";
/// The log file's name inside the log directory.
pub const LOG_FILE_NAME: &str = "task-plane.log";
/// A log file is rotated once it would grow past this many bytes.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Rotated files kept (`task-plane.log.1` is the newest); older ones are removed.
pub const KEPT_FILES: u32 = 3;
/// The target our own events use (filter on it, e.g. `A2A_LOG=a2a=debug`).
pub const TARGET: &str = "a2a";

const REDACTED: &str = "[redacted]";

/// Whether a field's name says its value is a secret.
fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["token", "authorization", "secret", "password"]
        .iter()
        .any(|s| name.contains(s))
}

/// Replaces the values of secret-named fields, at any depth.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => redact_members(map),
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// [`redact`] for an object's members.
fn redact_members(map: &mut Map<String, Value>) {
    for (key, v) in map.iter_mut() {
        if is_secret_field(key) {
            *v = Value::from(REDACTED);
        } else {
            redact(v);
        }
    }
}

/// A log level our callers name (`debug`, `info`, `warn`, `error`).
pub fn parse_level(name: &str) -> Result<Level, String> {
    match name {
        "trace" => Ok(Level::TRACE),
        "debug" => Ok(Level::DEBUG),
        "info" => Ok(Level::INFO),
        "warn" => Ok(Level::WARN),
        "error" => Ok(Level::ERROR),
        other => Err(format!(
            "invalid log level `{other}`; use debug, info, warn or error"
        )),
    }
}

/// Logs `name` at info with `fields` (a JSON object).
pub fn event(name: &str, fields: Value) {
    event_at(Level::INFO, name, fields)
}

/// Logs `name` at warn with `fields` (a JSON object).
pub fn warn(name: &str, fields: Value) {
    event_at(Level::WARN, name, fields)
}

/// Logs `name` at `level` with `fields` (a JSON object; other values are put under
/// `value`). Secret-named fields are redacted.
pub fn event_at(level: Level, name: &str, fields: Value) {
    sink();
    let fields = line_fields(fields);
    let fields = fields.as_str();
    match level {
        Level::ERROR => tracing::error!(target: TARGET, event = name, fields = fields),
        Level::WARN => tracing::warn!(target: TARGET, event = name, fields = fields),
        Level::INFO => tracing::info!(target: TARGET, event = name, fields = fields),
        Level::DEBUG => tracing::debug!(target: TARGET, event = name, fields = fields),
        Level::TRACE => tracing::trace!(target: TARGET, event = name, fields = fields),
    }
}

/// `fields` as the JSON object whose members follow a line's head, serialised here, once:
/// the sink writes the members into the line as they are.
fn line_fields(fields: Value) -> String {
    let mut fields = match fields {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => Map::from_iter([("value".to_string(), other)]),
    };
    members_of_a_line(&mut fields);
    Value::Object(fields).to_string()
}

/// Makes `fields` fit to follow a line's head: secrets redacted, and no member named like
/// the ones that lead every line (`ts`, `level`, `event`).
fn members_of_a_line(fields: &mut Map<String, Value>) {
    for key in ["ts", "level", "event"] {
        fields.remove(key);
    }
    redact_members(fields);
}

/// A file that is renamed to `<name>.1` (shifting older ones up to [`KEPT_FILES`]) before
/// a write would take it past its size bound, so the logs never use more than about
/// `(KEPT_FILES + 1) × max_bytes`.
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    kept: u32,
}

impl RotatingFile {
    /// Opens (appending) or creates `dir/<LOG_FILE_NAME>`, creating `dir` (mode 0700).
    pub fn open(dir: &Path, max_bytes: u64, kept: u32) -> Result<RotatingFile, String> {
        create_private_dir(dir)
            .map_err(|e| format!("cannot create the log directory {}: {e}", dir.display()))?;
        let path = dir.join(LOG_FILE_NAME);
        let file = open_append(&path)
            .map_err(|e| format!("cannot open the log file {}: {e}", path.display()))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RotatingFile {
            path,
            file,
            size,
            max_bytes: max_bytes.max(1),
            kept,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if self.kept == 0 {
            self.file = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&self.path)?;
        } else {
            let _ = std::fs::remove_file(self.rotated(self.kept));
            for n in (1..self.kept).rev() {
                let _ = std::fs::rename(self.rotated(n), self.rotated(n + 1));
            }
            // The file may be gone (an operator removed it): start a new one all the same,
            // so logging never stops for good.
            let _ = std::fs::rename(&self.path, self.rotated(1));
            self.file = open_append(&self.path)?;
        }
        self.size = 0;
        Ok(())
    }

    /// Writes one line, rotating first when it would pass the bound.
    pub fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Where lines go: the process's one sink.
struct Sink {
    stderr: AtomicBool,
    file: Mutex<Option<RotatingFile>>,
    filter: reload::Handle<EnvFilter, Registry>,
}

static SINK: OnceLock<Option<Sink>> = OnceLock::new();

/// The filter `A2A_LOG` asks for (`info` when unset), or an error naming the variable.
pub fn filter_from_env(value: Option<&str>) -> Result<EnvFilter, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(EnvFilter::new("info")),
        Some(spec) => EnvFilter::try_new(spec).map_err(|e| {
            format!("{LOG_FILTER_VAR}=`{spec}` is not a valid log filter ({e}); use a level such as `info` or `debug`, or EnvFilter syntax such as `a2a=debug`")
        }),
    }
}

/// Installs the sink once (stderr only, filter `info`); `None` when another `tracing`
/// subscriber already owns the process (then our lines go through that one).
fn sink() -> Option<&'static Sink> {
    SINK.get_or_init(|| {
        let (filter, handle) = reload::Layer::new(EnvFilter::new("info"));
        let subscriber = Registry::default().with(filter).with(JsonLines);
        tracing::subscriber::set_global_default(subscriber)
            .ok()
            .map(|()| Sink {
                stderr: AtomicBool::new(true),
                file: Mutex::new(None),
                filter: handle,
            })
    })
    .as_ref()
}

/// Where [`configure`] sends lines.
#[derive(Debug, Clone)]
pub struct LogTarget {
    /// The directory of the rotating log file; `None` keeps no file.
    pub directory: Option<PathBuf>,
    /// Whether lines also go to stderr (never in Pi's interactive mode).
    pub stderr: bool,
    /// The filter (`A2A_LOG`); `None` means `info`.
    pub filter: Option<String>,
}

/// What [`configure`] managed to set up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Configured {
    /// The log file, when one could be opened.
    pub file: Option<PathBuf>,
    /// What could not be applied, one sentence each (naming the variable or directory).
    pub problems: Vec<String>,
}

/// Points the process's log sink at `target`, as far as it can: whether lines go to stderr
/// is applied first and always (so Pi's interactive screen is never written to, whatever
/// else fails), an unusable filter leaves the default (`info`), and a directory that cannot
/// hold the log file leaves no file; each such problem is reported.
pub fn configure(target: &LogTarget) -> Configured {
    let mut configured = Configured::default();
    let Some(sink) = sink() else {
        configured
            .problems
            .push("another tracing subscriber already owns this process's logs".into());
        return configured;
    };
    sink.stderr.store(target.stderr, Ordering::SeqCst);
    let filter = filter_from_env(target.filter.as_deref()).unwrap_or_else(|problem| {
        configured.problems.push(problem);
        EnvFilter::new("info")
    });
    if let Err(e) = sink.filter.reload(filter) {
        configured
            .problems
            .push(format!("cannot apply the log filter: {e}"));
    }
    let file = target.directory.as_ref().and_then(|dir| {
        RotatingFile::open(dir, MAX_FILE_BYTES, KEPT_FILES)
            .map_err(|problem| configured.problems.push(problem))
            .ok()
    });
    configured.file = file.as_ref().map(|f| f.path().to_path_buf());
    *sink.file.lock().unwrap_or_else(|p| p.into_inner()) = file;
    configured
}

/// Collects an event's fields: our `event` and already serialised `fields` (events of
/// [`TARGET`] only, which [`event_at`] logs), or any other `tracing` event's fields (a
/// dependency's `message`, say).
struct Fields {
    ours: bool,
    event: Option<String>,
    fields: Option<String>,
    other: Map<String, Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "event" => self.event = Some(value.to_string()),
            "fields" if self.ours => self.fields = Some(value.to_string()),
            name => {
                self.other.insert(name.into(), Value::from(value));
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.other
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

/// Formats every event as one JSON line and hands it to the sink.
struct JsonLines;

impl<S: Subscriber> Layer<S> for JsonLines {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(sink) = SINK.get().and_then(Option::as_ref) else {
            return;
        };
        let metadata = event.metadata();
        let mut fields = Fields {
            ours: metadata.target() == TARGET,
            event: None,
            fields: None,
            other: Map::new(),
        };
        event.record(&mut fields);
        let line = json_line(
            crate::clock::Clock::now_ms(&crate::clock::SystemClock),
            metadata.level(),
            fields,
            metadata.target(),
        );
        if let Some(file) = sink.file.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            // A log write that fails (disk full) must not take the plane down with it.
            let _ = file.write_line(&line);
        }
        if sink.stderr.load(Ordering::SeqCst) {
            let _ = std::io::stderr().lock().write_all(&line);
        }
    }
}

/// One log line: `ts`, `level` and `event` lead (an event without a name is named by its
/// target), the fields follow; `\n` ends it.
fn json_line(ts_ms: i64, level: &Level, fields: Fields, target: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(128);
    let name = fields.event.as_deref().unwrap_or(target);
    let _ = write!(
        line,
        "{{\"ts\":{ts_ms},\"level\":\"{}\",\"event\":",
        level.as_str().to_ascii_lowercase()
    );
    let _ = serde_json::to_writer(&mut line, name);
    // `fields` is an object `event_at` wrote: its members go in as they are.
    let members = fields
        .fields
        .as_deref()
        .and_then(|object| object.strip_prefix('{')?.strip_suffix('}'))
        .unwrap_or("");
    if !members.is_empty() {
        line.push(b',');
        line.extend_from_slice(members.as_bytes());
    }
    let mut other = fields.other;
    members_of_a_line(&mut other);
    for (key, value) in &other {
        line.push(b',');
        let _ = serde_json::to_writer(&mut line, key);
        line.push(b':');
        let _ = serde_json::to_writer(&mut line, value);
    }
    line.extend_from_slice(b"}\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_named_fields_are_redacted_at_any_depth() {
        let mut v = serde_json::json!({"token": "abc", "nested": {"Authorization": "Bearer x", "ok": 1}, "list": [{"password": "p"}]});
        redact(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"token": REDACTED, "nested": {"Authorization": REDACTED, "ok": 1}, "list": [{"password": REDACTED}]})
        );
    }

    #[test]
    fn a_line_leads_with_ts_level_and_event_and_its_fields_follow_redacted() {
        let ours = |name: &str, fields: Value| Fields {
            ours: true,
            event: Some(name.into()),
            fields: Some(line_fields(fields)),
            other: Map::new(),
        };
        let line = |fields| String::from_utf8(json_line(7, &Level::WARN, fields, TARGET)).unwrap();
        assert_eq!(
            line(ours(
                "a2a_x",
                serde_json::json!({"taskId": "t-1", "event": "shadow", "ts": 0, "auth": {"apiToken": "s"}, "n": 1.5}),
            )),
            "{\"ts\":7,\"level\":\"warn\",\"event\":\"a2a_x\",\"auth\":{\"apiToken\":\"[redacted]\"},\"n\":1.5,\"taskId\":\"t-1\"}\n"
        );
        assert_eq!(
            line(ours("a2a_\"y\"", Value::Null)),
            "{\"ts\":7,\"level\":\"warn\",\"event\":\"a2a_\\\"y\\\"\"}\n"
        );
        assert_eq!(
            line(ours("a2a_z", serde_json::json!([1]))),
            "{\"ts\":7,\"level\":\"warn\",\"event\":\"a2a_z\",\"value\":[1]}\n"
        );
        // Another crate's event: named by its target, its fields redacted, a `fields` of
        // its own kept as a field.
        let foreign = Fields {
            ours: false,
            event: None,
            fields: None,
            other: Map::from_iter([
                ("message".to_string(), Value::from("hi")),
                ("password".to_string(), Value::from("p")),
                ("fields".to_string(), Value::from("{}")),
            ]),
        };
        assert_eq!(
            String::from_utf8(json_line(7, &Level::INFO, foreign, "hyper::proto")).unwrap(),
            "{\"ts\":7,\"level\":\"info\",\"event\":\"hyper::proto\",\"fields\":\"{}\",\"message\":\"hi\",\"password\":\"[redacted]\"}\n"
        );
    }

    #[test]
    fn log_file_rotates_at_its_size_bound_and_keeps_only_kept_files() {
        let dir = std::env::temp_dir().join(format!("a2a-log-rotate-{}", crate::ids::mint()));
        let mut file = RotatingFile::open(&dir, 100, 2).unwrap();
        let line = [b'x'; 40];
        for _ in 0..20 {
            file.write_line(&line).unwrap();
        }
        let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(len(dir.join(LOG_FILE_NAME)) <= 100);
        assert!(len(dir.join(format!("{LOG_FILE_NAME}.1"))) <= 100);
        assert!(len(dir.join(format!("{LOG_FILE_NAME}.2"))) <= 100);
        assert!(!dir.join(format!("{LOG_FILE_NAME}.3")).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_log_filter_names_the_variable() {
        let err = filter_from_env(Some("a2a=[")).unwrap_err();
        assert!(err.contains(LOG_FILTER_VAR), "{err}");
        assert!(filter_from_env(None).is_ok());
        assert!(filter_from_env(Some("warn,a2a=debug")).is_ok());
    }
}
