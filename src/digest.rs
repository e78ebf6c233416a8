//! Content addresses: `sha256:<hex>` of bytes, and of JSON in canonical form (object keys
//! sorted at every level), so equal payloads have equal digests whatever order their
//! members came in. A leaf: the store addresses evidence with it, the plane payloads, the
//! listener its Agent Card's ETag.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`: the content address of payloads and evidence.
pub fn content_address(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for byte in digest {
        out.push(HEX[usize::from(byte >> 4)] as char);
        out.push(HEX[usize::from(byte & 0x0f)] as char);
    }
    out
}

/// Whether `value` has the shape of a content address (`sha256:` and 64 lowercase hex
/// digits).
pub fn is_content_address(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The content address of `value` in canonical JSON.
pub fn canonical_json(value: &Value) -> String {
    let mut text = Vec::new();
    write_canonical(value, &mut text);
    content_address(&text)
}

/// Writes `value` in canonical JSON.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_canonical_map(map, out),
        Value::Array(items) => write_array(items, out, write_canonical),
        // Strings, numbers, booleans and null as serde_json writes them compactly.
        other => write_json(other, out),
    }
}

/// Writes the object `map` in canonical JSON.
pub fn write_canonical_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    out.push(b'{');
    // serde_json keeps an object's members sorted by key (unless a crate turns on its
    // `preserve_order`): then they are written as they come, else sorted here.
    if map.keys().is_sorted() {
        write_members(map.iter(), out);
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_by(|a, b| a.0.cmp(b.0));
        write_members(members.into_iter(), out);
    }
    out.push(b'}');
}

fn write_members<'a>(members: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(key, out);
        out.push(b':');
        write_canonical(value, out);
    }
}

/// Writes `items` as a JSON array, each by `write_item`.
pub fn write_array<T>(
    items: impl IntoIterator<Item = T>,
    out: &mut Vec<u8>,
    mut write_item: impl FnMut(T, &mut Vec<u8>),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_item(item, out);
    }
    out.push(b']');
}

/// Writes `text` as a JSON string.
pub fn write_string(text: &str, out: &mut Vec<u8>) {
    write_json(text, out);
}

/// A JSON object written member by member in canonical form, for a record that writes
/// its own canonical JSON without building a `serde_json::Value` first. The members must
/// come in key order (checked in debug builds); [`CanonicalObject::member`] writes the key
/// and hands back the output for its value.
pub struct CanonicalObject<'a> {
    out: &'a mut Vec<u8>,
    last_key: Option<&'static str>,
}

impl<'a> CanonicalObject<'a> {
    pub fn start(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        CanonicalObject {
            out,
            last_key: None,
        }
    }

    /// Writes `key` (greater than the keys before it) and returns where its value goes.
    pub fn member(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(
            self.last_key.is_none_or(|last| last < key),
            "canonical members out of order: {key} after {:?}",
            self.last_key
        );
        if self.last_key.is_some() {
            self.out.push(b',');
        }
        self.last_key = Some(key);
        write_json(key, self.out);
        self.out.push(b':');
        self.out
    }

    pub fn end(self) {
        self.out.push(b'}');
    }
}

fn write_json<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing a string or a scalar JSON value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_payloads_have_equal_digests_whatever_their_member_order() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, {"p": 3, "q": 2}]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_ne!(canonical_json(&a), canonical_json(&json!({"b": 2})));
        assert!(is_content_address(&canonical_json(&a)));
        assert!(!is_content_address("sha256:ABC"));
    }

    /// Stored digests are compared with new ones (a retry after an upgrade is still a
    /// duplicate), so the canonical bytes of a payload never change: escapes, numbers,
    /// nesting and member order as first written.
    #[test]
    fn a_payload_digest_is_the_same_in_every_build() {
        let payload = json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hé \"q\" \n", "metadata": {"z": 1.5, "a": [true, null, -3, 1e300], "é": "ü"}}], "extensions": []}});
        assert_eq!(
            canonical_json(&payload),
            "sha256:fea632bd439167573bf01c5d5c265d0ad769694e1a2373dfa4742a3ea7847c91"
        );
        let mut unsorted = serde_json::Map::new();
        unsorted.insert("b".into(), json!(1));
        unsorted.insert("a".into(), json!(2));
        let mut text = Vec::new();
        write_canonical(&Value::Object(unsorted), &mut text);
        assert_eq!(text, br#"{"a":2,"b":1}"#);
    }
}
