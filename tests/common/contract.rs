//! What the contract's gates (`tests/contract_*.rs`) share: a plane with a reply-anchor
//! source (`mail`) and a no-continuation one (`slack`), and a `mail` Task waiting for an
//! answer.

use a2a_task_plane::plane::{InterruptKind, TaskPlane};
use a2a_task_plane::record::Continuation;

use super::{agent, deliver_question, native, open, TempRoot};

/// A source that declares no continuation.
pub const SLACK: &str = "slack";
/// A source that continues through reply anchors.
pub const MAIL: &str = "mail";

/// A plane with a reply-anchor source (`mail`) and a no-continuation source (`slack`).
pub fn plane(root: &TempRoot) -> TaskPlane {
    let plane = open(&root.store());
    plane.register_source(SLACK, Continuation::None).unwrap();
    plane
        .register_source(MAIL, Continuation::ReplyAnchors)
        .unwrap();
    plane
}

/// Puts a fresh Task from `mail` into `kind` with an anchor `response_id` for its question.
pub fn waiting_mail_task(
    plane: &TaskPlane,
    principal: &str,
    event: &str,
    conversation: &str,
    kind: InterruptKind,
    response_id: &str,
) -> String {
    let task = plane
        .accept(native(
            principal,
            MAIL,
            event,
            Some(conversation),
            "please do X",
        ))
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, kind, agent("which X?"), None)
        .unwrap();
    deliver_question(plane, principal, MAIL, &task, response_id);
    plane
        .record_reply_anchor(principal, MAIL, response_id, &task)
        .unwrap();
    task
}
