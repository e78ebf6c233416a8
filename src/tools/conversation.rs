//! What `a2a_read_task` tells the agent of the earlier Tasks of the same conversation (the
//! caller's context): each one's id, state, request and final answer, so that a follow-up
//! sent as a new Task does not start from nothing. Bounded, because it comes with every
//! read: the newest [`EARLIER_TASKS`] Tasks, each text cut at [`EARLIER_TEXT_CHARS`].

use crate::plane::EarlierTask;
use crate::record::{PartContent, PartRecord};

/// How many earlier Tasks of the conversation the agent is told of (the newest).
pub const EARLIER_TASKS: u32 = 5;
/// The most characters of each earlier request or answer the agent is shown.
pub const EARLIER_TEXT_CHARS: usize = 1_000;

/// The text of one part, as the agent reads it.
pub(super) fn part_text(part: &PartRecord) -> String {
    match &part.content {
        PartContent::Text(t) => t.clone(),
        PartContent::Data(v) => format!("(data) {v}"),
        PartContent::Url(u) => format!("(file) {u}"),
        PartContent::Raw(b) => format!(
            "(file {} {}, {} bytes)",
            part.filename.as_deref().unwrap_or("unnamed"),
            part.media_type
                .as_deref()
                .unwrap_or("application/octet-stream"),
            b.len()
        ),
    }
}

/// Parts as one text of at most [`EARLIER_TEXT_CHARS`] characters (cut ones end in `…`).
fn bounded(parts: &[PartRecord]) -> String {
    let text = parts.iter().map(part_text).collect::<Vec<_>>().join("\n");
    if text.chars().count() <= EARLIER_TEXT_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(EARLIER_TEXT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Appends `text` as caller data: every line break a model or terminal may honour starts
/// a new line prefixed `| `, so caller text can never begin a line of its own (or forge a
/// marker).
pub(super) fn push_untrusted(out: &mut String, text: &str) {
    for line in text.split([
        '\n', '\r', '\u{0b}', '\u{0c}', '\u{85}', '\u{2028}', '\u{2029}',
    ]) {
        out.push_str("| ");
        out.push_str(line);
        out.push('\n');
    }
}

/// The block about the earlier Tasks of the conversation (empty when there are none):
/// a line that says what follows, then each Task's id and state, its request and its
/// answer, as caller data between the untrusted-content markers.
pub(super) fn earlier_tasks(earlier: &[EarlierTask]) -> String {
    if earlier.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "Earlier tasks of this conversation ({}, oldest first; the newest {EARLIER_TASKS} at most, texts cut at {EARLIER_TEXT_CHARS} characters). Use them as context; settle only the task you were woken for.\n",
        earlier.len()
    );
    out.push_str(super::BEGIN_UNTRUSTED);
    out.push('\n');
    for task in earlier {
        out.push_str(&format!(
            "| [earlier task {} — {}]\n| [request]\n",
            task.task_id,
            task.state.as_str()
        ));
        match &task.request {
            Some(m) => push_untrusted(&mut out, &bounded(&m.parts)),
            None => out.push_str("| (none)\n"),
        }
        out.push_str("| [answer]\n");
        match &task.answer {
            Some(parts) => push_untrusted(&mut out, &bounded(parts)),
            None => out.push_str("| (none yet)\n"),
        }
    }
    out.push_str(super::END_UNTRUSTED);
    out.push('\n');
    out
}
