//! The public Agent Card at `/.well-known/agent-card.json`, built once per listener, served
//! with `Cache-Control`, an `ETag` (a content hash) and `Last-Modified`, and `304` on a
//! matching `If-None-Match`.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LAST_MODIFIED};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::{empty, full, Body};

use crate::config::ListenerConfig;
use crate::wire::extensions::{ELICITATION_V1, OUTFITTER_TASK_V1};
use crate::wire::{AgentCard, GRPC_BINDING, JSONRPC_BINDING, PROTOCOL_BINDING, PROTOCOL_VERSION};

/// The card, encoded once.
pub struct CardDocument {
    pub body: Bytes,
    pub etag: String,
    pub last_modified: String,
}

/// How long clients may cache the card.
pub const MAX_AGE_SECONDS: u32 = 300;

/// The gRPC interface's URL: `host:port`, the target both official clients' gRPC
/// transports dial as given (Python's `grpc.aio.insecure_channel`, JS's `@grpc/grpc-js`
/// client), with the interface URL's host and the gRPC port.
pub fn grpc_target(interface_url: &str, port: u16) -> String {
    let rest = interface_url
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(interface_url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.rfind(']') {
        // `[::1]:8788`: the port follows the bracket.
        Some(end) => &authority[..=end],
        None => authority.split(':').next().unwrap_or(authority),
    };
    format!("{host}:{port}")
}

/// The card; `grpc_url`: gRPC's interface, when it is served.
pub fn build(
    config: &ListenerConfig,
    interface_url: &str,
    grpc_url: Option<String>,
    started_ms: i64,
) -> CardDocument {
    // HTTP+JSON first: the preferred binding. JSON-RPC is served at the interface URL
    // itself (a POST there; HTTP+JSON has no route at it).
    let mut interfaces = vec![json!({
        "url": interface_url,
        "protocolBinding": PROTOCOL_BINDING,
        "protocolVersion": PROTOCOL_VERSION,
    })];
    if config.jsonrpc {
        interfaces.push(json!({
            "url": interface_url,
            "protocolBinding": JSONRPC_BINDING,
            "protocolVersion": PROTOCOL_VERSION,
        }));
    }
    if let Some(url) = grpc_url {
        interfaces.push(json!({
            "url": url,
            "protocolBinding": GRPC_BINDING,
            "protocolVersion": PROTOCOL_VERSION,
        }));
    }
    let card = json!({
        "name": config.agent_name,
        "description": config.agent_description,
        "supportedInterfaces": interfaces,
        "version": config.agent_version,
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extendedAgentCard": false,
            "extensions": [
                {
                    "uri": OUTFITTER_TASK_V1,
                    "description": "Typed Outfitter task metadata: the Task locator (interface URL + binding + version + tenant + taskId) and typed workflow outputs.",
                    "required": false,
                },
                {
                    "uri": ELICITATION_V1,
                    "description": "MCP-compatible structured questions: an input request carries a data part {message, requestedSchema}; answer with {action, content}.",
                    "required": false,
                },
            ],
        },
        "securitySchemes": {
            "bearer": { "httpAuthSecurityScheme": { "scheme": "Bearer", "description": "A token from the operator's credentials file; it maps to one principal." } },
        },
        "securityRequirements": [{ "schemes": { "bearer": { "list": [] } } }],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": "resident-agent",
            "name": "Resident coding agent",
            "description": "Hand a task to the resident Pi agent: it works it in its own session and answers with artifacts, a question, or a rejection.",
            "tags": ["coding", "agent", "pi"],
            "examples": ["Summarise the open pull requests", "Fix the failing test in src/parser.rs"],
        }],
    });
    // Through the wire type, so the card is exactly what the proto allows.
    let card: AgentCard =
        serde_json::from_value(card).expect("the agent card matches the wire model");
    let body = Bytes::from(crate::wire::json::encode(&card));
    let etag = format!("\"{}\"", &crate::digest::content_address(&body)[7..23]);
    let last_modified = chrono::DateTime::from_timestamp_millis(started_ms)
        .unwrap_or_default()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    CardDocument {
        body,
        etag,
        last_modified,
    }
}

/// The card for `req` (GET or HEAD): `304` when its `If-None-Match` names the card's tag.
pub fn serve(card: &CardDocument, req: &Request<Incoming>) -> Response<Body> {
    let matches = req
        .headers()
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == card.etag || tag.trim() == "*")
        });
    let mut builder = Response::builder()
        .header(CACHE_CONTROL, format!("public, max-age={MAX_AGE_SECONDS}"))
        .header(ETAG, card.etag.as_str())
        .header(LAST_MODIFIED, card.last_modified.as_str());
    if matches {
        builder = builder.status(StatusCode::NOT_MODIFIED);
        return builder
            .body(empty())
            .unwrap_or_else(|_| Response::new(empty()));
    }
    let body = if req.method() == Method::HEAD {
        empty()
    } else {
        full(card.body.clone())
    };
    builder
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap_or_else(|_| Response::new(empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grpc_interface_is_the_host_of_the_interface_url_at_the_grpc_port() {
        assert_eq!(grpc_target("http://127.0.0.1:8788", 8789), "127.0.0.1:8789");
        assert_eq!(
            grpc_target("https://h.example/a2a/", 9000),
            "h.example:9000"
        );
        assert_eq!(grpc_target("http://[::1]:8788", 8789), "[::1]:8789");
    }
}
