//! `GET /tasks` page tokens: where the previous page ended, signed with the store's key and
//! bound to the caller and the query (contextId, status, statusTimestampAfter). A token
//! that was altered, or issued to another caller or for another query, is refused with
//! 400 naming `pageToken`. Tokens stay valid across restarts (the key is in the store).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::plane::{ListFilter, PageCursor};

/// Bytes of the HMAC-SHA256 tag kept in a token.
const TAG_BYTES: usize = 16;

/// Signs and checks page tokens with one store's key.
#[derive(Clone)]
pub struct PageTokens {
    key: Vec<u8>,
}

impl PageTokens {
    pub fn new(key: Vec<u8>) -> Self {
        PageTokens { key }
    }

    /// The token for the page after `cursor`, for `principal` listing with `filter`.
    pub fn issue(&self, principal: &str, filter: &ListFilter, cursor: PageCursor) -> String {
        let position = format!("{}.{}", cursor.status_ms, cursor.seq);
        let tag = self.tag(principal, filter, &position);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(position),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// Where the page of `token` starts, if this server issued it to `principal` for the
    /// same query.
    pub fn check(&self, principal: &str, filter: &ListFilter, token: &str) -> Option<PageCursor> {
        let (position, tag) = token.split_once('.')?;
        let position = String::from_utf8(URL_SAFE_NO_PAD.decode(position).ok()?).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let expected = self.tag(principal, filter, &position);
        // Constant-time comparison: the time taken says nothing about the right tag.
        if tag.len() != expected.len()
            || tag.iter().zip(&expected).fold(0u8, |d, (a, b)| d | (a ^ b)) != 0
        {
            return None;
        }
        let (status_ms, seq) = position.split_once('.')?;
        Some(PageCursor {
            status_ms: status_ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    fn tag(&self, principal: &str, filter: &ListFilter, position: &str) -> [u8; TAG_BYTES] {
        let state = filter.state.map(|s| s.as_str()).unwrap_or("");
        let since = filter
            .status_since_ms
            .map(|ms| ms.to_string())
            .unwrap_or_default();
        let context = filter.context_id.as_deref().unwrap_or("");
        // Length-prefixed fields: no two different queries share a message.
        let mut message = Vec::with_capacity(128);
        for field in ["page-token-v2", principal, context, state, &since, position] {
            message.extend_from_slice(&(field.len() as u64).to_be_bytes());
            message.extend_from_slice(field.as_bytes());
        }
        let mac = hmac_sha256(&self.key, &message);
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&mac[..TAG_BYTES]);
        tag
    }
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TaskState;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_page_token_is_bound_to_principal_and_filter() {
        let tokens = PageTokens::new(vec![7; 32]);
        let filter = ListFilter {
            state: Some(TaskState::Working),
            ..ListFilter::default()
        };
        let cursor = PageCursor {
            status_ms: 1_700_000_000_000,
            seq: 42,
        };
        let token = tokens.issue("alice", &filter, cursor);
        assert_eq!(tokens.check("alice", &filter, &token), Some(cursor));
        assert_eq!(tokens.check("bob", &filter, &token), None);
        let other = ListFilter {
            context_id: Some("ctx".into()),
            ..filter.clone()
        };
        assert_eq!(tokens.check("alice", &other, &token), None);
        // The page size and what a Task carries are not part of the query.
        let resized = ListFilter {
            page_size: 7,
            include_artifacts: true,
            ..filter.clone()
        };
        assert_eq!(tokens.check("alice", &resized, &token), Some(cursor));
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode("1700000000000.41"),
            token.split_once('.').unwrap().1
        );
        assert_eq!(tokens.check("alice", &filter, &forged), None);
        assert_eq!(tokens.check("alice", &filter, "garbage"), None);
        assert_eq!(
            PageTokens::new(vec![8; 32]).check("alice", &filter, &token),
            None
        );
    }
}
