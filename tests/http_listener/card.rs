//! `GET /.well-known/agent-card.json`: public, cacheable, and declaring the binding.

use a2a_task_plane::wire::extensions::{ELICITATION_V1, OUTFITTER_TASK_V1};

use crate::common::http::request;
use crate::common::server::*;

#[test]
fn agent_card_is_public_cacheable_and_declares_the_binding() {
    let server = Server::start();
    let reply = request(
        server.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert!(reply.header("cache-control").unwrap().contains("max-age="));
    let etag = reply.header("etag").unwrap().to_string();
    assert!(reply.header("last-modified").unwrap().ends_with("GMT"));
    let card = reply.json();
    let interface = &card["supportedInterfaces"][0];
    assert_eq!(interface["url"], server.listener.url());
    assert_eq!(interface["protocolBinding"], "HTTP+JSON");
    assert_eq!(interface["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    let uris: Vec<&str> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, [OUTFITTER_TASK_V1, ELICITATION_V1]);
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert!(card["securityRequirements"][0]["schemes"]["bearer"].is_object());
    assert!(!card["skills"].as_array().unwrap().is_empty());
    assert_eq!(card["defaultInputModes"][0], "text/plain");
    let again = request(
        server.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[("If-None-Match", &etag)],
        b"",
    );
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
}
