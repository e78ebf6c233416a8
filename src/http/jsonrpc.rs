//! A2A's JSON-RPC 2.0 binding, on the listener's own port: `POST` to the interface URL
//! (the card's `JSONRPC` interface). The method names are the proto's RPC names, `params`
//! the ProtoJSON of the request message, `result` the ProtoJSON of the response;
//! `SendStreamingMessage` and `SubscribeToTask` answer with SSE whose every `data:` line is
//! a JSON-RPC response carrying one `StreamResponse`.
//!
//! Every rule is the one HTTP+JSON applies (the same operations of `crate::handler`); only
//! the framing differs. The checks, in order: bearer principal (HTTP
//! 401, as on every route) → the body read (size, content type, time) → JSON (-32700) → the
//! Request object (-32600) → `A2A-Version` (-32009) → the method (-32601) → its params
//! (-32602) → the operation. An error of the method answers HTTP 200 with the JSON-RPC
//! error, except the retryable refusals (`RESOURCE_EXHAUSTED` 429, `UNAVAILABLE` 503),
//! which keep their HTTP status for proxies and retrying clients.
//!
//! A batch (a JSON array) is refused as one Invalid Request: each A2A method is one HTTP
//! exchange (two of them answer with an event stream, which a batch's array of responses
//! cannot carry), and the official SDKs' servers refuse batches the same way. A
//! notification (no `id`) gets no JSON-RPC response (JSON-RPC 2.0 §4.1): `204 No Content`,
//! after the method ran (a streaming method's stream is not opened: a notification has
//! nobody to read it; `SendStreamingMessage` accepts its message as `SendMessage` with
//! `returnImmediately`).

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{empty, json_response, negotiate, sse, task_stream, Body, Caller};
use crate::handler::send::{send_message, stream_message};
use crate::handler::tasks::{
    cancel_task, get_task, history_length, list_tasks, subscribe_task, task_id, ListQuery,
};
use crate::handler::ApiError;
use crate::wire::json::ListTasksResponseJson;
use crate::wire::{
    self, CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest,
    SubscribeToTaskRequest,
};

/// JSON-RPC 2.0's own error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC 2.0's implementation-defined server error, for the reasons that are neither
/// A2A's nor about the params (A2A's own codes are -32001 to -32099).
pub const SERVER_ERROR: i64 = -32000;

/// The JSON-RPC code of an A2A error reason (A2A v1.0 §5.4; the ErrorInfo in `data`
/// keeps the exact reason for every code).
pub fn code_of(reason: &str) -> i64 {
    match reason {
        "TASK_NOT_FOUND" => -32001,
        "TASK_NOT_CANCELABLE" => -32002,
        "PUSH_NOTIFICATION_NOT_SUPPORTED" => -32003,
        "UNSUPPORTED_OPERATION" => -32004,
        "CONTENT_TYPE_NOT_SUPPORTED" => -32005,
        "INVALID_AGENT_RESPONSE" => -32006,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => -32007,
        "EXTENSION_SUPPORT_REQUIRED" => -32008,
        "VERSION_NOT_SUPPORTED" => -32009,
        // What the caller sent cannot be served as sent: a field, a reused messageId
        // with other content, a context that is not the caller's, a Task not waiting.
        "INVALID_ARGUMENT" | "DUPLICATE_MESSAGE_ID" | "NOT_FOUND" | "FAILED_PRECONDITION" => {
            INVALID_PARAMS
        }
        "INTERNAL" => INTERNAL_ERROR,
        _ => SERVER_ERROR,
    }
}

/// The HTTP status of a JSON-RPC error response for `err` (see the module doc).
fn http_status(err: &ApiError) -> StatusCode {
    match err.reason {
        "RESOURCE_EXHAUSTED" | "UNAVAILABLE" => err.status,
        _ => StatusCode::OK,
    }
}

/// A JSON-RPC error object for `err`: its code, its message, and the `google.rpc.Status`
/// details (ErrorInfo with the A2A reason, BadRequest naming the field) as `data`.
fn error_object(err: &ApiError) -> Value {
    json!({ "code": code_of(err.reason), "message": err.message, "data": err.details() })
}

/// A JSON-RPC error object of JSON-RPC's own (no A2A reason).
fn protocol_error(code: i64, message: impl Into<String>) -> Value {
    json!({ "code": code, "message": message.into() })
}

/// The response to request `id` (`Value::Null` when it could not be read).
fn error_response(
    status: StatusCode,
    id: &Value,
    error: Value,
    extensions: &[String],
) -> Response<Body> {
    let body = json!({ "jsonrpc": "2.0", "id": id, "error": error });
    json_response(status, Bytes::from(body.to_string()), extensions)
}

fn a2a_error(id: &Value, err: &ApiError, extensions: &[String]) -> Response<Body> {
    error_response(http_status(err), id, error_object(err), extensions)
}

/// The success response to request `id` (as JSON text) carrying `result`.
fn result_response<T: Serialize + ?Sized>(
    id: &str,
    result: &T,
    extensions: &[String],
) -> Response<Body> {
    // As `wire::json::encode`: a settled Task with its history and the envelope fit in one.
    let mut body = Vec::with_capacity(1024);
    body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    body.extend_from_slice(id.as_bytes());
    body.extend_from_slice(b",\"result\":");
    wire::json::encode_into(&mut body, result);
    body.push(b'}');
    json_response(StatusCode::OK, Bytes::from(body), extensions)
}

/// A well-formed Request object.
struct Call<'a> {
    /// The id's JSON text as sent (a string, an integer or `null`); `None` for a
    /// notification. Echoed as it came: the response's id is the same JSON value.
    id: Option<&'a str>,
    method: Cow<'a, str>,
    /// The params object's text, decoded once, straight into the method's request message.
    params: &'a [u8],
}

/// A Request object's members as sent, each still JSON text: one pass over the body, no
/// tree of `Value`s (building one and decoding the params from it cost a blocking send
/// ~15,000 instructions more than HTTP+JSON's decoding of the same message).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
}

/// A member that is there, `null` included (`Option`'s own reading makes `null` absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A JSON string's value, borrowed unless it has escapes; `None` when `raw` is no string.
fn string_of(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    serde_json::from_str::<&str>(text)
        .map(Cow::Borrowed)
        .or_else(|_| serde_json::from_str::<String>(text).map(Cow::Owned))
        .ok()
}

/// Whether `text` (one JSON value, as sent) is an id JSON-RPC 2.0 allows: a string, an
/// integer (within 64 bits) or `null`. Read from the text itself: no tree of `Value`s on
/// every call (a JSON-RPC `GetTask` costs a little more than REST's `GET` at best).
fn valid_id(text: &str) -> bool {
    match text.as_bytes().first() {
        Some(b'"') => true,
        Some(b'n') => text == "null",
        Some(b'-' | b'0'..=b'9') => text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok(),
        _ => false,
    }
}

/// The id to show in a response: the request's (`null` when it had none).
fn id_value(id: Option<&str>) -> Value {
    id.and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}

/// Reads a Request object; `Err` is the error to answer (with the id when it was usable).
fn read_call(body: &[u8]) -> Result<Call<'_>, (Value, Value)> {
    let invalid = |id: Value, why: &str| {
        (
            id,
            protocol_error(INVALID_REQUEST, format!("Invalid Request: {why}")),
        )
    };
    let parse_error = |e: serde_json::Error| {
        (
            Value::Null,
            protocol_error(
                PARSE_ERROR,
                format!("Parse error: the body is not JSON: {e}"),
            ),
        )
    };
    if body.trim_ascii_start().first() != Some(&b'{') {
        // Not an object: the JSON is checked first (a parse error outranks the rest).
        return Err(match serde_json::from_slice::<Value>(body) {
            Err(e) => parse_error(e),
            Ok(Value::Array(_)) => invalid(
                Value::Null,
                "batches are not served: send one JSON-RPC request per HTTP POST (A2A's streaming methods answer with an event stream, which a batch cannot carry)",
            ),
            Ok(_) => invalid(Value::Null, "the body must be a JSON-RPC 2.0 Request object"),
        });
    }
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) if e.is_syntax() || e.is_eof() => return Err(parse_error(e)),
        Err(e) => return Err(invalid(Value::Null, &e.to_string())),
    };
    let id = match envelope.id.map(RawValue::get) {
        None => None,
        Some(text) if valid_id(text) => Some(text),
        Some(_) => {
            return Err(invalid(
                Value::Null,
                "`id` must be a string, an integer or null",
            ))
        }
    };
    let shown_id = id_value(id);
    if envelope.jsonrpc.and_then(string_of).as_deref() != Some("2.0") {
        return Err(invalid(shown_id, "`jsonrpc` must be \"2.0\""));
    }
    let method = match envelope.method.and_then(string_of) {
        Some(method) => method,
        None => {
            return Err(invalid(
                shown_id,
                "`method` must be a string, e.g. \"SendMessage\"",
            ))
        }
    };
    let params = match envelope.params.map(RawValue::get) {
        None | Some("null") => b"{}".as_slice(),
        Some(params) if params.starts_with('{') => params.as_bytes(),
        Some(_) => {
            return Err((
                shown_id,
                protocol_error(
                    INVALID_PARAMS,
                    "`params` must be an object: the ProtoJSON of the method's request message",
                ),
            ))
        }
    };
    Ok(Call { id, method, params })
}

/// Decodes the params of `method` as its request message `what`.
fn params<T: serde::de::DeserializeOwned>(
    what: &'static str,
    params: &[u8],
) -> Result<T, ApiError> {
    Ok(wire::json::decode_unchecked(what, params)?)
}

/// Serves one JSON-RPC POST from an authenticated caller.
pub(super) async fn handle(caller: Caller, req: Request<Incoming>) -> Response<Body> {
    let extensions = caller.ctx.extensions.clone();
    // Read before the body consumes the request; answered once the id is known.
    let version = negotiate::check_version(&req);
    let body = match caller.read_body(req).await {
        Ok(body) => body,
        Err(err) => {
            let code = match err.reason {
                "CONTENT_TYPE_NOT_SUPPORTED" => code_of(err.reason),
                _ => INVALID_REQUEST,
            };
            let error = json!({ "code": code, "message": err.message, "data": err.details() });
            return error_response(err.status, &Value::Null, error, &extensions);
        }
    };
    let call = match read_call(&body) {
        Ok(call) => call,
        Err((id, error)) => return error_response(StatusCode::OK, &id, error, &extensions),
    };
    if let Err(err) = version {
        return a2a_error(&id_value(call.id), &err, &extensions);
    }
    let notification = call.id.is_none();
    let id_text: Arc<str> = call.id.unwrap_or("null").into();
    match dispatch(caller, &call.method, call.params, id_text, notification).await {
        Ok(_) if notification => no_content(&extensions),
        Ok(response) => response,
        Err(_) if notification => no_content(&extensions),
        Err(Refusal::A2a(err)) => a2a_error(&id_value(call.id), &err, &extensions),
        Err(Refusal::Protocol(error)) => {
            error_response(StatusCode::OK, &id_value(call.id), error, &extensions)
        }
    }
}

fn no_content(extensions: &[String]) -> Response<Body> {
    let mut response = Response::new(empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    negotiate::echo_extensions(response.headers_mut(), extensions);
    response
}

/// Why a call was not answered with a result.
enum Refusal {
    A2a(ApiError),
    /// A JSON-RPC error object of JSON-RPC's own (unknown method).
    Protocol(Value),
}

impl From<ApiError> for Refusal {
    fn from(err: ApiError) -> Self {
        Refusal::A2a(err)
    }
}

/// Runs `method` for the caller; `id` is the request's id as JSON text.
async fn dispatch(
    caller: Caller,
    method: &str,
    raw: &[u8],
    id: Arc<str>,
    notification: bool,
) -> Result<Response<Body>, Refusal> {
    let ctx = &caller.ctx;
    let extensions = ctx.extensions.clone();
    match method {
        "SendMessage" => {
            let request: SendMessageRequest =
                wire::json::decode("SendMessageRequest", raw).map_err(ApiError::from)?;
            let response = send_message(ctx, request).await?;
            Ok(result_response(&id, &response, &extensions))
        }
        "SendStreamingMessage" => {
            let mut request: SendMessageRequest =
                wire::json::decode("SendMessageRequest", raw).map_err(ApiError::from)?;
            if notification {
                request
                    .configuration
                    .get_or_insert_with(Default::default)
                    .return_immediately = true;
                let response = send_message(ctx, request).await?;
                return Ok(result_response(&id, &response, &extensions));
            }
            let stream = stream_message(ctx, request).await?;
            Ok(task_stream::respond(
                &caller,
                stream,
                sse::Framing::JsonRpc(id),
            ))
        }
        "GetTask" => {
            let request: GetTaskRequest = params("GetTaskRequest", raw)?;
            let history = history_length(request.history_length)?;
            let task = get_task(ctx, &task_id(request.id)?, history).await?;
            Ok(result_response(&id, &task, &extensions))
        }
        "ListTasks" => {
            let request: ListTasksRequest = params("ListTasksRequest", raw)?;
            let response = list_tasks(ctx, ListQuery::from_request(request)?)?;
            Ok(result_response(
                &id,
                &ListTasksResponseJson(&response),
                &extensions,
            ))
        }
        "CancelTask" => {
            let request: CancelTaskRequest = params("CancelTaskRequest", raw)?;
            let task = cancel_task(ctx, &task_id(request.id)?).await?;
            Ok(result_response(&id, &task, &extensions))
        }
        "SubscribeToTask" => {
            let request: SubscribeToTaskRequest = params("SubscribeToTaskRequest", raw)?;
            let task = task_id(request.id)?;
            if notification {
                return Ok(no_content(&extensions));
            }
            let stream = subscribe_task(ctx, &task).await?;
            Ok(task_stream::respond(
                &caller,
                stream,
                sse::Framing::JsonRpc(id),
            ))
        }
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => {
            Err(ApiError::push_config_operations_unsupported().into())
        }
        "GetExtendedAgentCard" => Err(ApiError::extended_card_not_configured().into()),
        other => Err(Refusal::Protocol(json!({
            "code": METHOD_NOT_FOUND,
            "message": format!("Method not found: `{other}`; A2A's methods are SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask and GetExtendedAgentCard"),
            "data": { "method": other },
        }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id of the call `value` is, read as a body.
    fn read_call(value: Value) -> Result<Option<Value>, (Value, Value)> {
        super::read_call(&serde_json::to_vec(&value).unwrap())
            .map(|call| call.id.map(|text| serde_json::from_str(text).unwrap()))
    }

    #[test]
    fn a2a_reasons_map_to_the_json_rpc_codes_of_a2a_v1() {
        let codes = [
            ("TASK_NOT_FOUND", -32001),
            ("TASK_NOT_CANCELABLE", -32002),
            ("PUSH_NOTIFICATION_NOT_SUPPORTED", -32003),
            ("UNSUPPORTED_OPERATION", -32004),
            ("CONTENT_TYPE_NOT_SUPPORTED", -32005),
            ("INVALID_AGENT_RESPONSE", -32006),
            ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32007),
            ("EXTENSION_SUPPORT_REQUIRED", -32008),
            ("VERSION_NOT_SUPPORTED", -32009),
            ("INVALID_ARGUMENT", -32602),
            ("DUPLICATE_MESSAGE_ID", -32602),
            ("INTERNAL", -32603),
            ("RESOURCE_EXHAUSTED", -32000),
            ("UNAUTHENTICATED", -32000),
        ];
        for (reason, code) in codes {
            assert_eq!(code_of(reason), code, "{reason}");
        }
    }

    #[test]
    fn a_request_object_is_read_as_json_rpc_2_0_says() {
        let call = read_call(
            json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t"}}),
        )
        .ok()
        .unwrap();
        assert_eq!(call, Some(json!(7)));
        let note = read_call(json!({"jsonrpc": "2.0", "method": "GetTask"}))
            .ok()
            .unwrap();
        assert_eq!(note, None, "no id: a notification");
        let refused = |value: Value| read_call(value).err().unwrap();
        assert_eq!(refused(json!([])).1["code"], INVALID_REQUEST);
        assert_eq!(
            refused(json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"})).0,
            json!(1)
        );
        assert_eq!(
            refused(json!({"jsonrpc": "2.0", "id": 1.5, "method": "GetTask"})).0,
            Value::Null
        );
        for id in [json!("a\"b"), json!(-5), json!(u64::MAX), Value::Null] {
            let call = read_call(json!({"jsonrpc": "2.0", "id": id, "method": "GetTask"}));
            assert_eq!(call.ok().unwrap(), Some(id.clone()), "id {id}");
        }
        let too_big = br#"{"jsonrpc": "2.0", "id": 18446744073709551616, "method": "GetTask"}"#;
        assert!(
            super::read_call(too_big).is_err(),
            "an id past 64 bits is no integer id"
        );
        for id in [json!(true), json!({"a": 1}), json!([1])] {
            let refused = refused(json!({"jsonrpc": "2.0", "id": id, "method": "GetTask"}));
            assert_eq!(refused.1["code"], INVALID_REQUEST, "id {id}");
        }
        assert_eq!(
            refused(json!({"jsonrpc": "2.0", "id": 1, "method": 3})).1["code"],
            INVALID_REQUEST
        );
        assert_eq!(
            refused(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]})).1
                ["code"],
            INVALID_PARAMS
        );
    }
}
