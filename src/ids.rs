//! Identifiers: the one strict pattern for caller-supplied identifiers, the bounds on
//! locator values, and the server-minted ids.

use std::collections::BTreeMap;

use crate::field_error::FieldError;

/// Longest identifier: 128 characters.
pub const MAX_IDENTIFIER_LEN: usize = 128;
/// Longest locator value: 4096 characters.
pub const MAX_LOCATOR_VALUE_LEN: usize = 4096;

/// Checks a caller-supplied identifier (principal, source, event id, message id used as a
/// dedupe key, conversation key, provider response id, delivery or operation id) against
/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
///
/// Raw provider values that do not fit (`@`, `/`, spaces, ...) are hashed into a
/// source-prefixed identifier by the adapter; the raw value belongs in the locator.
pub fn check_identifier(field: &str, value: &str) -> Result<(), FieldError> {
    let bad = |message: String| Err(FieldError::new(field, message));
    let mut chars = value.chars();
    match chars.next() {
        None => return bad("must not be empty".into()),
        Some(c) if !c.is_ascii_alphanumeric() => {
            return bad(format!(
                "`{}` must start with a letter or digit (pattern ^[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$)",
                shorten(value)
            ))
        }
        Some(_) => {}
    }
    if value.len() > MAX_IDENTIFIER_LEN {
        return bad(format!(
            "is {} characters long; at most {MAX_IDENTIFIER_LEN} are allowed",
            value.chars().count()
        ));
    }
    if let Some(c) =
        chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return bad(format!(
            "`{}` contains {c:?}; only letters, digits and . _ : - are allowed (hash raw provider values into an identifier and keep the raw value in the locator)",
            shorten(value)
        ));
    }
    Ok(())
}

/// Checks a native object locator: keys are identifiers, values opaque strings of
/// 1..=4096 characters.
pub fn check_locator(field: &str, locator: &BTreeMap<String, String>) -> Result<(), FieldError> {
    for (key, value) in locator {
        check_identifier(&format!("{field} key"), key)?;
        let len = value.chars().count();
        if len == 0 || len > MAX_LOCATOR_VALUE_LEN {
            return Err(FieldError::new(
                format!("{field}.{key}"),
                format!("must be 1..={MAX_LOCATOR_VALUE_LEN} characters, got {len}"),
            ));
        }
    }
    Ok(())
}

fn shorten(value: &str) -> String {
    if value.chars().count() <= 40 {
        value.to_string()
    } else {
        format!("{}…", value.chars().take(40).collect::<String>())
    }
}

/// A fresh server-minted id: a UUID v7 (hyphenated), with no `:` or `/`, so it is safe in
/// `/tasks/{id}:cancel`-style paths. Version 7 starts with the time, so ids minted together
/// sit together in the store's indexes (one commit touches few pages); its 74 random bits
/// keep ids unguessable, though access never depends on that (every read is scoped to
/// the principal).
pub fn mint() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut random = [0u8; 10];
    random_bytes(&mut random);
    uuid::Builder::from_unix_timestamp_millis(millis, &random)
        .into_uuid()
        .to_string()
}

/// Bytes from the operating system's generator, drawn 640 at a time per thread: a Task
/// mints four or five ids, and a `getrandom` call for each was ~1% of a one-core
/// `message:send`. The bytes are the OS generator's own, each handed out once.
fn random_bytes(out: &mut [u8]) {
    use std::cell::RefCell;
    const POOL: usize = 640;
    thread_local! {
        static DRAWN: RefCell<([u8; POOL], usize)> = const { RefCell::new(([0; POOL], POOL)) };
    }
    DRAWN.with(|drawn| {
        let (pool, used) = &mut *drawn.borrow_mut();
        if *used + out.len() > POOL {
            // Like uuid's own minting: without the OS generator nothing unguessable can
            // be made.
            getrandom::fill(pool).unwrap_or_else(|err| {
                panic!("the operating system's random generator failed: {err}")
            });
            *used = 0;
        }
        out.copy_from_slice(&pool[*used..*used + out.len()]);
        // Handed-out bytes are not kept. (A forked child would share the rest; this
        // process forks only to exec.)
        pool[*used..*used + out.len()].fill(0);
        *used += out.len();
    });
}

/// A fresh delivery lease token: 128 bits from the operating system's generator, as 32
/// lowercase hex digits. Unguessable, because holding one is what lets a caller finish a
/// delivery.
pub fn lease_token() -> String {
    let mut bytes = [0u8; 16];
    // Like uuid's own minting: without the OS generator nothing unguessable can be made.
    getrandom::fill(&mut bytes)
        .unwrap_or_else(|err| panic!("the operating system's random generator failed: {err}"));
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::mint;

    #[test]
    fn minted_ids_are_distinct_uuid_v7_that_start_with_their_time() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        // More than one pool of random bytes, from two threads.
        let other = std::thread::spawn(|| (0..500).map(|_| mint()).collect::<Vec<_>>());
        let mut ids: Vec<String> = (0..500).map(|_| mint()).collect();
        ids.extend(other.join().unwrap());
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        for id in &ids {
            let uuid = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(uuid.get_version_num(), 7, "{id}");
            let (secs, nanos) = uuid.get_timestamp().unwrap().to_unix();
            let millis = secs * 1000 + u64::from(nanos) / 1_000_000;
            assert!(millis >= before && millis < before + 60_000, "{id}");
        }
    }
}
