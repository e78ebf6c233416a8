//! Push-notification routes and configuration: explicitly not supported.

use serde_json::json;

use crate::common::server::*;

#[test]
fn push_notification_routes_are_explicitly_not_implemented() {
    let server = Server::start();
    for (method, path) in [
        ("POST", "/tasks/t-1/pushNotificationConfigs"),
        ("GET", "/tasks/t-1/pushNotificationConfigs/c-1"),
        ("DELETE", "/tasks/t-1/pushNotificationConfigs/c-1"),
    ] {
        let reply = server.call(method, path, Some(ALICE), Some(json!({"url": "https://x"})));
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (501, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
            "{method} {path}"
        );
    }
    let in_send = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"taskPushNotificationConfig": {"url": "https://x"}}})),
    );
    assert_eq!(
        (in_send.status, in_send.reason().as_str()),
        (400, "PUSH_NOTIFICATION_NOT_SUPPORTED")
    );
}
