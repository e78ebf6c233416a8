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
/// sit together in the store's indexes (one commit touches few pages), and ids minted
/// later sort later (see [`next_in_sequence`]). Its counter starts at a random value each
/// millisecond and 32 more bits are random, so ids are hard to guess, though access never
/// depends on that (every read is scoped to the principal).
pub fn mint() -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (millis, counter) = next_in_sequence(now_ms);
    // The version 7 layout (RFC 9562, method 1): 48 bits of time, then a 42-bit counter
    // (the 12 bits of rand_a and the top 30 of rand_b; the builder overwrites the version
    // nibble and the two variant bits), then 32 random bits.
    let mut bytes = [0u8; 10];
    bytes[0] = ((counter >> 38) & 0x0F) as u8;
    bytes[1] = (counter >> 30) as u8;
    bytes[2] = ((counter >> 24) & 0x3F) as u8;
    bytes[3] = (counter >> 16) as u8;
    bytes[4] = (counter >> 8) as u8;
    bytes[5] = counter as u8;
    random_bytes(&mut bytes[6..]);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes)
        .into_uuid()
        .to_string()
}

/// The largest 42-bit counter.
const MAX_COUNTER: u64 = (1 << 42) - 1;

/// The next (millisecond, counter) of the process's id sequence, strictly greater than
/// the last: ids minted later sort later, even within one millisecond (the newest of a
/// Task's activations is the greatest id). Each new millisecond starts the counter at a
/// random 41-bit value, so the counter leaves room to count on; should it ever run out,
/// the sequence borrows the next millisecond. One sequence per process, like the
/// `uuid` crate's own v7 context.
fn next_in_sequence(now_ms: u64) -> (u64, u64) {
    static LAST: std::sync::Mutex<(u64, u64)> = std::sync::Mutex::new((0, 0));
    let seed = || {
        let mut bytes = [0u8; 8];
        random_bytes(&mut bytes[..6]);
        u64::from_le_bytes(bytes) & (MAX_COUNTER >> 1)
    };
    let mut last = LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (millis, counter) = *last;
    let next = if now_ms > millis {
        (now_ms, seed())
    } else if counter < MAX_COUNTER {
        (millis, counter + 1)
    } else {
        (millis + 1, seed())
    };
    *last = next;
    next
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

/// A node id: `<host name>-<pid>-<8 hex digits from the OS generator>`. Two processes on one
/// host differ by pid; a pid reused after a restart differs by the suffix, so a restarted
/// node never mistakes a dead predecessor's lease for its own.
pub fn mint_node_id() -> String {
    let host = host_name().unwrap_or_else(|| "unknown-host".into());
    let suffix = lease_token();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}

/// The host name from the kernel, if it has one that is printable.
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // when the name fits (it truncates otherwise; the last byte is kept 0 below).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len() - 1);
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_graphic())).then_some(name)
}

/// How many characters of a Task id people are shown ([`short_id`]).
pub const SHORT_ID_LEN: usize = 8;
/// The fewest characters of a Task id that find it ([`id_fragment`]).
pub const MIN_ID_FRAGMENT: usize = 6;

/// The short id people see for a Task (Pi's footer and notifications, `/a2a tasks`, the
/// CLI): its last [`SHORT_ID_LEN`] characters. Those are the 32 random bits at the end of
/// the UUIDv7 ([`mint`]), so two Tasks share one only by chance (about once in 4 billion
/// pairs); the leading characters are the time, the same for every Task of a minute. An id
/// shorter than that (not minted here) is shown whole.
pub fn short_id(task_id: &str) -> &str {
    let start = task_id.len().saturating_sub(SHORT_ID_LEN);
    task_id.get(start..).unwrap_or(task_id)
}

/// What a person typed to name a Task (`/a2a show`, the CLI), as the store looks it up:
/// any prefix or suffix of the id of at least [`MIN_ID_FRAGMENT`] characters (the short id
/// is one), in lowercase. Only the characters of a minted id are taken: hex digits and `-`.
pub fn id_fragment(typed: &str) -> Result<String, FieldError> {
    let fragment = typed.trim().to_ascii_lowercase();
    if fragment.chars().count() < MIN_ID_FRAGMENT {
        return Err(FieldError::new(
            "taskId",
            format!(
                "`{}` is too short: give at least {MIN_ID_FRAGMENT} characters of the task id (its start or its end, e.g. the short id shown)",
                shorten(typed.trim())
            ),
        ));
    }
    if let Some(c) = fragment
        .chars()
        .find(|c| !(c.is_ascii_hexdigit() || *c == '-'))
    {
        return Err(FieldError::new(
            "taskId",
            format!(
                "`{}` contains {c:?}; task ids have only hex digits and -",
                shorten(typed.trim())
            ),
        ));
    }
    Ok(fragment)
}

#[cfg(test)]
mod tests {
    use super::{id_fragment, mint, mint_node_id, short_id, MIN_ID_FRAGMENT};

    #[test]
    fn ids_minted_later_sort_later_even_within_a_millisecond() {
        let ids: Vec<String> = (0..20_000).map(|_| mint()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "not strictly increasing"
        );
    }

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

    #[test]
    fn the_short_id_is_the_random_tail_so_tasks_of_one_minute_differ() {
        let ids: Vec<String> = (0..500).map(|_| mint()).collect();
        let shorts: std::collections::HashSet<&str> = ids.iter().map(|id| short_id(id)).collect();
        assert_eq!(
            shorts.len(),
            ids.len(),
            "two short ids of one minute collide"
        );
        assert_eq!(short_id("01a251a8-ede7-728b-a730-e616a8af5059"), "a8af5059");
        assert_eq!(short_id("abc"), "abc");
    }

    #[test]
    fn a_task_is_named_by_six_or_more_hex_characters_of_its_start_or_end() {
        assert_eq!(id_fragment(" A8AF5059 ").unwrap(), "a8af5059");
        assert_eq!(id_fragment("01a251").unwrap(), "01a251");
        let short = id_fragment("a8af5").unwrap_err().to_string();
        assert!(
            short.contains(&format!("at least {MIN_ID_FRAGMENT}")),
            "{short}"
        );
        let odd = id_fragment("a8af50%9").unwrap_err().to_string();
        assert!(odd.contains("hex digits"), "{odd}");
    }

    #[test]
    fn a_node_id_names_the_host_and_pid_and_differs_per_open() {
        let (a, b) = (mint_node_id(), mint_node_id());
        assert_ne!(a, b, "the random suffix makes each open a new node");
        let pid = format!("-{}-", std::process::id());
        assert!(a.contains(&pid), "{a}");
        assert!(!a.starts_with("unknown-host"), "{a}");
        let suffix = a.rsplit('-').next().unwrap();
        assert_eq!(suffix.len(), 8, "{a}");
    }
}
