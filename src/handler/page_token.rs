//! `GET /tasks` page tokens: where the previous page ended, signed with the store's key and
//! bound to the caller and the query (contextId, status, statusTimestampAfter). A token
//! that was altered, or issued to another caller or for another query, is refused with
//! 400 naming `pageToken`. Tokens stay valid across restarts (the key is in the store).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

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
        if tag.len() != TAG_BYTES {
            return None;
        }
        // Constant-time: the time taken says nothing about the right tag.
        self.mac(principal, filter, &position)
            .verify_truncated_left(&tag)
            .ok()?;
        let (status_ms, seq) = position.split_once('.')?;
        Some(PageCursor {
            status_ms: status_ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    /// The first [`TAG_BYTES`] of the HMAC of the query and `position`.
    fn tag(&self, principal: &str, filter: &ListFilter, position: &str) -> [u8; TAG_BYTES] {
        let mac = self
            .mac(principal, filter, position)
            .finalize()
            .into_bytes();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&mac[..TAG_BYTES]);
        tag
    }

    /// HMAC-SHA256 with the store's key over the query and `position`.
    fn mac(&self, principal: &str, filter: &ListFilter, position: &str) -> Hmac<Sha256> {
        let state = filter.state.map(|s| s.as_str()).unwrap_or("");
        let since = filter
            .status_since_ms
            .map(|ms| ms.to_string())
            .unwrap_or_default();
        let context = filter.context_id.as_deref().unwrap_or("");
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        // Length-prefixed fields: no two different queries share a message.
        for field in ["page-token-v2", principal, context, state, &since, position] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TaskState;

    fn working() -> ListFilter {
        ListFilter {
            state: Some(TaskState::Working),
            ..ListFilter::default()
        }
    }

    #[test]
    fn a_token_issued_before_keeps_its_bytes_and_still_verifies() {
        // Issued with the key, message layout and 16-byte tag of the first release (the
        // tag is HMAC-SHA256 per RFC 2104, computed independently of this code).
        let issued = "MTcwMDAwMDAwMDAwMC40Mg.62cu91sUc66tohNdkqehsw";
        let tokens = PageTokens::new(vec![7; 32]);
        let cursor = PageCursor {
            status_ms: 1_700_000_000_000,
            seq: 42,
        };
        assert_eq!(tokens.issue("alice", &working(), cursor), issued);
        assert_eq!(tokens.check("alice", &working(), issued), Some(cursor));
    }

    #[test]
    fn a_tampered_or_truncated_tag_is_refused() {
        let tokens = PageTokens::new(vec![7; 32]);
        let cursor = PageCursor {
            status_ms: 1_700_000_000_000,
            seq: 42,
        };
        let token = tokens.issue("alice", &working(), cursor);
        let (position, tag) = token.split_once('.').unwrap();
        let tag = URL_SAFE_NO_PAD.decode(tag).unwrap();
        for byte in 0..tag.len() {
            let mut flipped = tag.clone();
            flipped[byte] ^= 1;
            let token = format!("{position}.{}", URL_SAFE_NO_PAD.encode(&flipped));
            assert_eq!(tokens.check("alice", &working(), &token), None, "{byte}");
        }
        for len in [0, 1, tag.len() - 1] {
            let token = format!("{position}.{}", URL_SAFE_NO_PAD.encode(&tag[..len]));
            assert_eq!(tokens.check("alice", &working(), &token), None, "{len}");
        }
        let mut longer = tag.clone();
        longer.push(0);
        let token = format!("{position}.{}", URL_SAFE_NO_PAD.encode(&longer));
        assert_eq!(tokens.check("alice", &working(), &token), None);
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
