//! Structured logs: one JSON object per line on stderr, each with a stable `event` name
//! (`a2a_server_started`, `a2a_server_stopped`, ...), so operators can grep and parse them.

use serde_json::{Map, Value};

/// Writes `{"ts": <unix ms>, "event": name, ...fields}` as one line to stderr.
pub fn event(name: &str, fields: Value) {
    let mut line = Map::new();
    line.insert(
        "ts".into(),
        Value::from(crate::clock::Clock::now_ms(&crate::clock::SystemClock)),
    );
    line.insert("event".into(), Value::from(name));
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    eprintln!("{}", Value::Object(line));
}
