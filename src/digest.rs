//! Content addresses: `sha256:<hex>` of bytes, and of JSON in canonical form (object keys
//! sorted at every level), so equal payloads have equal digests whatever order their
//! members came in. A leaf: the store addresses evidence with it, the plane payloads, the
//! listener its Agent Card's ETag.

use serde_json::Value;
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

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
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
}
