//! Golden tests of the ProtoJSON wire model: every JSON example of the HTTP+JSON binding
//! reference parses and re-serialises to the same JSON value, and malformed documents give
//! errors that name the field. Every document written is also checked byte for byte
//! against serde_json's compact text with the ProtoJSON number rule ([`serde_json_text`],
//! stated here on its own so that a change of the server's writer cannot move both).

use a2a_task_plane::wire::json::{decode, encode, ListTasksResponseJson, WireError};
use a2a_task_plane::wire::validate::Validate;
use a2a_task_plane::wire::{
    AgentCard, Artifact, Message, Part, SendMessageRequest, SendMessageResponse, StreamResponse,
    Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskStatusUpdateEvent, Timestamp,
};
use a2a_task_plane::wire::{ListTaskPushNotificationConfigsResponse, ListTasksResponse};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Parses `input` as `T`, writes it back, and checks the output is `expected` as a JSON
/// value (and, for integral numbers, as text: `3` stays `3`).
fn round_trip_to<T>(what: &'static str, input: &str, expected: &str)
where
    T: DeserializeOwned + Serialize + Validate,
{
    let parsed: T = decode(what, input.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{input}"));
    let written = encode(&parsed);
    assert_eq!(
        written,
        serde_json_text(&parsed),
        "{what}: not serde_json's text"
    );
    let got: Value = serde_json::from_str(&written).unwrap();
    let want: Value = serde_json::from_str(expected).unwrap();
    assert_eq!(
        got, want,
        "{what} did not round-trip\n got: {written}\nwant: {expected}"
    );
    assert!(
        !written.contains(".0,") && !written.contains(".0}"),
        "integral number written as a double: {written}"
    );
}

/// `value` as serde_json writes it, with ProtoJSON's rule for doubles (integral ones within
/// ±(2^53 − 1) as integers): the text `encode` must produce.
fn serde_json_text<T: Serialize + ?Sized>(value: &T) -> String {
    struct ProtoJson;
    impl serde_json::ser::Formatter for ProtoJson {
        fn write_f64<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            value: f64,
        ) -> std::io::Result<()> {
            if value.fract() == 0.0 && value.abs() <= 9_007_199_254_740_991.0 {
                serde_json::ser::CompactFormatter.write_i64(writer, value as i64)
            } else {
                serde_json::ser::CompactFormatter.write_f64(writer, value)
            }
        }
    }
    let mut out = Vec::new();
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, ProtoJson,
        ))
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn round_trip<T>(what: &'static str, json: &str)
where
    T: DeserializeOwned + Serialize + Validate,
{
    round_trip_to::<T>(what, json, json);
}

fn refused<T: DeserializeOwned + Validate + std::fmt::Debug>(
    what: &'static str,
    json: &str,
) -> WireError {
    match decode::<T>(what, json.as_bytes()) {
        Ok(v) => panic!("{what} should be refused: {json} parsed as {v:?}"),
        Err(e) => e,
    }
}

// ---- §2.1 SendMessageRequest --------------------------------------------------------

#[test]
fn send_message_request_minimal() {
    round_trip::<SendMessageRequest>(
        "SendMessageRequest",
        r#"{"message":{"messageId":"9f1c2e7a-0001","role":"ROLE_USER","parts":[{"text":"What is the weather in Paris?"}]}}"#,
    );
}

#[test]
fn send_message_request_full_with_every_part_kind() {
    round_trip::<SendMessageRequest>(
        "SendMessageRequest",
        r#"{
  "tenant": "acme",
  "message": {
    "messageId": "9f1c2e7a-0002", "contextId": "ctx-42", "taskId": "task-7", "role": "ROLE_USER",
    "parts": [
      {"text": "Summarise the attached file", "mediaType": "text/plain"},
      {"raw": "iVBORw0KGgo=", "filename": "chart.png", "mediaType": "image/png"},
      {"url": "https://files.example.com/report.pdf", "filename": "report.pdf", "mediaType": "application/pdf"},
      {"data": {"city": "Paris", "days": 3}, "mediaType": "application/json", "metadata": {"schema": "forecast-request/v1"}}
    ],
    "metadata": {"traceId": "abc"},
    "extensions": ["https://example.com/ext/geo/v1"],
    "referenceTaskIds": ["task-3"]
  },
  "configuration": {
    "acceptedOutputModes": ["text/plain", "application/json"],
    "taskPushNotificationConfig": {"url": "https://client.example.com/a2a/webhook", "token": "opaque-session-token",
                                   "authentication": {"scheme": "Bearer", "credentials": "s3cr3t"}},
    "historyLength": 5,
    "returnImmediately": true
  },
  "metadata": {"priority": "low"}
}"#,
    );
}

#[test]
fn integral_data_numbers_are_written_as_integers() {
    let parsed: Part = decode(
        "Part",
        br#"{"data":{"days":3,"ratio":0.5,"big":9007199254740991,"neg":-2}}"#,
    )
    .unwrap();
    let written = encode(&parsed);
    // Struct members come back in no particular order: check each member's text.
    for member in [
        r#""days":3"#,
        r#""ratio":0.5"#,
        r#""big":9007199254740991"#,
        r#""neg":-2"#,
    ] {
        assert!(written.contains(member), "{member} missing from {written}");
    }
    // A JSON number is a double in google.protobuf.Value: an integer it cannot hold
    // exactly is refused rather than silently rounded.
    let err = refused::<Part>("Part", r#"{"data":{"big":9007199254740993}}"#);
    assert_eq!(err.field, "data.big");
}

// ---- §2.2 SendMessageResponse ------------------------------------------------------------

#[test]
fn send_message_response_task() {
    round_trip::<SendMessageResponse>(
        "SendMessageResponse",
        r#"{"task":{"id":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-01-15T10:30:00.000Z"},"artifacts":[{"artifactId":"art-1","parts":[{"text":"Sunny, 24°C"}]}]}}"#,
    );
}

#[test]
fn send_message_response_message() {
    round_trip::<SendMessageResponse>(
        "SendMessageResponse",
        r#"{"message":{"messageId":"srv-msg-1","contextId":"ctx-42","role":"ROLE_AGENT","parts":[{"text":"Hello! How can I help?"}]}}"#,
    );
}

// ---- §2.3 StreamResponse and the SSE example's frames ---------------------------------------

#[test]
fn stream_response_every_payload_kind() {
    for line in [
        r#"{"task":{"id":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_SUBMITTED"}}}"#,
        r#"{"message":{"messageId":"srv-msg-9","contextId":"ctx-42","role":"ROLE_AGENT","parts":[{"text":"done"}]}}"#,
        r#"{"statusUpdate":{"taskId":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_COMPLETED"}}}"#,
        r#"{"artifactUpdate":{"taskId":"task-7","contextId":"ctx-42","artifact":{"artifactId":"art-1","parts":[{"text":"chunk 1"}]}}}"#,
        r#"{"statusUpdate":{"taskId":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_WORKING"}}}"#,
        r#"{"artifactUpdate":{"taskId":"task-7","contextId":"ctx-42","artifact":{"artifactId":"art-1","parts":[{"text":"Hel"}]}}}"#,
        r#"{"artifactUpdate":{"taskId":"task-7","contextId":"ctx-42","artifact":{"artifactId":"art-1","parts":[{"text":"lo"}]},"append":true,"lastChunk":true}}"#,
        r#"{"statusUpdate":{"taskId":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-01-15T10:30:05.000Z"}}}"#,
    ] {
        round_trip::<StreamResponse>("StreamResponse", line);
    }
}

// ---- §2.4 Task -------------------------------------------------------------------------------

#[test]
fn task_minimal() {
    round_trip::<Task>(
        "Task",
        r#"{"id":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_SUBMITTED"}}"#,
    );
}

#[test]
fn task_full() {
    round_trip::<Task>(
        "Task",
        r#"{
  "id": "task-7", "contextId": "ctx-42",
  "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-15T10:30:00.123Z",
             "message": {"messageId": "srv-msg-2", "contextId": "ctx-42", "taskId": "task-7", "role": "ROLE_AGENT", "parts": [{"text": "Which city?"}]}},
  "artifacts": [{"artifactId": "art-1", "name": "draft", "description": "partial result", "parts": [{"text": "..."}]}],
  "history": [{"messageId": "9f1c2e7a-0001", "contextId": "ctx-42", "taskId": "task-7", "role": "ROLE_USER", "parts": [{"text": "Weather please"}]}],
  "metadata": {"createdBy": "agent-x"}
}"#,
    );
}

#[test]
fn every_task_state_round_trips() {
    for state in [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    ] {
        round_trip::<Task>(
            "Task",
            &format!(r#"{{"id":"t","status":{{"state":"{state}"}}}}"#),
        );
    }
}

// ---- §2.5 Message, §2.6 Part, §2.7 Artifact ---------------------------------------------------

#[test]
fn message_minimal() {
    round_trip::<Message>(
        "Message",
        r#"{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}"#,
    );
}

#[test]
fn part_kinds() {
    for part in [
        r#"{"text":"hello"}"#,
        r#"{"raw":"SGVsbG8=","filename":"hello.txt","mediaType":"text/plain"}"#,
        r#"{"url":"https://files.example.com/a.png","mediaType":"image/png"}"#,
        r#"{"data":{"k":[1,2,3]},"mediaType":"application/json"}"#,
        r#"{"data":"a string is a JSON value too"}"#,
        r#"{"data":[true,null,1.5]}"#,
    ] {
        round_trip::<Part>("Part", part);
    }
}

#[test]
fn artifact_minimal() {
    round_trip::<Artifact>(
        "Artifact",
        r#"{"artifactId":"art-1","parts":[{"text":"result"}]}"#,
    );
}

// ---- §2.8 update events ------------------------------------------------------------------------

#[test]
fn status_and_artifact_update_events() {
    round_trip::<TaskStatusUpdateEvent>(
        "TaskStatusUpdateEvent",
        r#"{"taskId":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-01-15T10:30:01.000Z"}}"#,
    );
    round_trip::<TaskArtifactUpdateEvent>(
        "TaskArtifactUpdateEvent",
        r#"{"taskId":"task-7","contextId":"ctx-42","artifact":{"artifactId":"art-1","parts":[{"text":" more text"}]},"append":true,"lastChunk":true}"#,
    );
}

// ---- §2.9 ListTasksResponse, §1.3 ListTasksRequest ----------------------------------------------

#[test]
fn list_tasks_response_always_writes_every_member() {
    let example = r#"{"tasks":[{"id":"task-7","contextId":"ctx-42","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-01-15T10:30:01.000Z"}}],"nextPageToken":"","pageSize":50,"totalSize":1}"#;
    let parsed: ListTasksResponse = decode("ListTasksResponse", example.as_bytes()).unwrap();
    let got: Value = serde_json::from_str(&encode(&ListTasksResponseJson(&parsed))).unwrap();
    assert_eq!(got, serde_json::from_str::<Value>(example).unwrap());

    let empty = ListTasksResponse::default();
    assert_eq!(
        encode(&ListTasksResponseJson(&empty)),
        r#"{"tasks":[],"nextPageToken":"","pageSize":0,"totalSize":0}"#
    );
}

#[test]
fn list_tasks_request_query_members_parse() {
    let req: a2a_task_plane::wire::ListTasksRequest = a2a_task_plane::wire::json::decode_unchecked(
        "ListTasksRequest",
        br#"{"contextId":"ctx-42","status":"TASK_STATE_WORKING","pageSize":10,"pageToken":"abc","historyLength":0,"statusTimestampAfter":"2026-01-15T11:30:00+01:00","includeArtifacts":false}"#,
    )
    .unwrap();
    assert_eq!(req.page_size, Some(10));
    assert_eq!(req.history_length, Some(0));
    assert_eq!(req.include_artifacts, Some(false));
    // Any offset is accepted on input and written back as Z.
    assert_eq!(
        req.status_timestamp_after.unwrap().to_string(),
        "2026-01-15T10:30:00.000Z"
    );
}

// ---- §2.10 push notification config ------------------------------------------------------------

#[test]
fn push_notification_config_shapes() {
    round_trip_unvalidated::<TaskPushNotificationConfig>(
        r#"{"url":"https://client.example.com/a2a/webhook","token":"opaque-token","authentication":{"scheme":"Bearer","credentials":"s3cr3t"}}"#,
    );
    round_trip_unvalidated::<TaskPushNotificationConfig>(
        r#"{"id":"cfg-1","taskId":"task-7","url":"https://client.example.com/a2a/webhook","token":"opaque-token","authentication":{"scheme":"Bearer","credentials":"s3cr3t"}}"#,
    );
    // `nextPageToken: ""` is a default and is omitted by ProtoJSON (only ListTasksResponse
    // is exempt), so the written form lacks it.
    round_trip_unvalidated_to::<ListTaskPushNotificationConfigsResponse>(
        r#"{"configs":[{"id":"cfg-1","taskId":"task-7","url":"https://client.example.com/a2a/webhook"}],"nextPageToken":""}"#,
        r#"{"configs":[{"id":"cfg-1","taskId":"task-7","url":"https://client.example.com/a2a/webhook"}]}"#,
    );
}

fn round_trip_unvalidated<T: DeserializeOwned + Serialize>(json: &str) {
    round_trip_unvalidated_to::<T>(json, json);
}

fn round_trip_unvalidated_to<T: DeserializeOwned + Serialize>(json: &str, expected: &str) {
    let parsed: T =
        a2a_task_plane::wire::json::decode_unchecked("document", json.as_bytes()).unwrap();
    let written = encode(&parsed);
    assert_eq!(written, serde_json_text(&parsed), "not serde_json's text");
    let got: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(got, serde_json::from_str::<Value>(expected).unwrap());
}

// ---- §2.11 AgentCard ------------------------------------------------------------------------------

#[test]
fn agent_card_minimal() {
    // `capabilities: {}` is a message set to its default: ProtoJSON writes it as `{}`.
    round_trip::<AgentCard>(
        "AgentCard",
        r#"{
  "name": "Echo Agent", "description": "Echoes text back.",
  "supportedInterfaces": [{"url": "https://agent.example.com/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
  "version": "0.1.0", "capabilities": {},
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "echo", "name": "Echo", "description": "Repeats the input.", "tags": ["echo"]}]
}"#,
    );
}

#[test]
fn agent_card_every_field() {
    let input = r#"{
  "name": "Travel Agent", "description": "Plans trips.",
  "supportedInterfaces": [
    {"url": "https://agent.example.com/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "acme"},
    {"url": "https://agent.example.com/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
  ],
  "provider": {"url": "https://example.com", "organization": "Example Inc."},
  "version": "2.3.0",
  "documentationUrl": "https://example.com/docs/travel-agent",
  "capabilities": {
    "streaming": true, "pushNotifications": true, "extendedAgentCard": true,
    "extensions": [{"uri": "https://example.com/ext/geo/v1", "description": "Location hints in message metadata", "required": false, "params": {"precision": "city"}}]
  },
  "securitySchemes": {
    "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT", "description": "OIDC access token"}},
    "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
    "oauth":  {"oauth2SecurityScheme": {"flows": {"authorizationCode": {"authorizationUrl": "https://auth.example.com/authorize",
               "tokenUrl": "https://auth.example.com/token", "scopes": {"trips:read": "Read trips"}, "pkceRequired": true}},
               "oauth2MetadataUrl": "https://auth.example.com/.well-known/oauth-authorization-server"}},
    "oidc":   {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://accounts.example.com/.well-known/openid-configuration"}},
    "mtls":   {"mtlsSecurityScheme": {"description": "Client certificate"}}
  },
  "securityRequirements": [
    {"schemes": {"oauth": {"list": ["trips:read"]}}},
    {"schemes": {"bearer": {"list": []}, "apiKey": {"list": []}}}
  ],
  "defaultInputModes": ["text/plain", "application/json"],
  "defaultOutputModes": ["text/plain", "application/json"],
  "skills": [{"id": "plan-trip", "name": "Trip planner", "description": "Builds an itinerary.", "tags": ["travel", "planning"],
              "examples": ["Plan 3 days in Rome"], "inputModes": ["text/plain"], "outputModes": ["application/json"],
              "securityRequirements": [{"schemes": {"oauth": {"list": ["trips:read"]}}}]}],
  "signatures": [{"protected": "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSJ9", "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3", "header": {"kid": "key-1"}}],
  "iconUrl": "https://agent.example.com/icon.png"
}"#;
    // ProtoJSON omits implicit-presence members at their default: `"required": false` and
    // the empty scope lists `{"list": []}` (written as `{}`). Everything else is identical.
    let expected = input
        .replace(r#", "required": false"#, "")
        .replace(r#"{"list": []}"#, "{}");
    round_trip_to::<AgentCard>("AgentCard", input, &expected);
}

// ---- Timestamps ----------------------------------------------------------------------------------

#[test]
fn timestamps_are_written_in_utc_with_z() {
    let cases = [
        ("2026-01-15T10:30:00Z", "2026-01-15T10:30:00.000Z"),
        ("2026-01-15T10:30:00.5Z", "2026-01-15T10:30:00.500Z"),
        (
            "2026-01-15T12:30:00.123456+02:00",
            "2026-01-15T10:30:00.123456Z",
        ),
        (
            "2026-01-15T10:30:00.000000001Z",
            "2026-01-15T10:30:00.000000001Z",
        ),
    ];
    for (input, written) in cases {
        let ts = Timestamp::parse_rfc3339(input).unwrap();
        assert_eq!(ts.to_string(), written, "{input}");
    }
    assert_eq!(
        Timestamp::from_unix_millis(1_768_473_000_123).to_string(),
        "2026-01-15T10:30:00.123Z"
    );
    assert_eq!(
        Timestamp::from_unix_millis(1_768_473_000_123).to_unix_millis(),
        1_768_473_000_123
    );
}

// ---- Malformed input -----------------------------------------------------------------------------

#[test]
fn wrong_enum_string_is_refused_naming_the_field() {
    let err = refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"user","parts":[{"text":"hi"}]}"#,
    );
    assert_eq!(err.field, "role");
    assert!(err.message.contains("user"), "{err}");
    let err = refused::<Task>("Task", r#"{"id":"t","status":{"state":"completed"}}"#);
    assert_eq!(err.field, "status.state");
}

#[test]
fn two_members_of_one_oneof_are_refused() {
    let err = refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","url":"https://x"}]}"#,
    );
    assert!(err.field.starts_with("parts[0]"), "{err}");
    assert!(
        err.message.contains("url") || err.message.contains("duplicate"),
        "{err}"
    );
    let err = refused::<StreamResponse>(
        "StreamResponse",
        r#"{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}"#,
    );
    assert!(
        err.message.contains("message") || err.message.contains("duplicate"),
        "{err}"
    );
}

#[test]
fn a_number_where_a_string_belongs_is_refused_naming_the_field() {
    let err = refused::<SendMessageRequest>(
        "SendMessageRequest",
        r#"{"message":{"messageId":5,"role":"ROLE_USER","parts":[{"text":"hi"}]}}"#,
    );
    assert_eq!(err.field, "message.messageId");
    assert!(err.message.contains("invalid type"), "{err}");
    let err = refused::<SendMessageRequest>(
        "SendMessageRequest",
        r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"ok"},{"text":7}]}}"#,
    );
    assert_eq!(err.field, "message.parts[1].text");
    assert!(err.to_string().contains("`message.parts[1].text`"), "{err}");
}

#[test]
fn unknown_members_are_ignored_at_every_level_and_known_ones_stay_strict() {
    // A 0.3-style client's `kind` on the message and its parts, and a made-up member a
    // newer minor version might add, on every object of a SendMessageRequest.
    let json = r#"{
        "futureMember": {"x": 1},
        "message": {"kind": "message", "messageId": "m", "role": "ROLE_USER", "futureMember": 2,
            "parts": [{"kind": "text", "text": "hi", "futureMember": true},
                      {"kind": "data", "data": {"a": 1}, "futureMember": null}]},
        "configuration": {"returnImmediately": true, "futureMember": "x"},
        "metadata": {"kept": "as data"}
    }"#;
    let request: SendMessageRequest = decode("SendMessageRequest", json.as_bytes()).unwrap();
    let message = request.message.unwrap();
    assert_eq!(message.message_id, "m");
    assert_eq!(message.parts.len(), 2);
    assert!(request.configuration.unwrap().return_immediately);
    // Known members keep their types and enum names.
    let err = refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"ROLE_SPEAKER","kind":"message","parts":[{"text":"hi"}]}"#,
    );
    assert_eq!(err.field, "role", "{err}");
    let err = refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text","text":7}]}"#,
    );
    assert_eq!(err.field, "parts[0].text", "{err}");
    // A part whose only member is unknown still has no content.
    refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text"}]}"#,
    );
}

#[test]
fn missing_required_members_are_refused() {
    let cases: [(&str, &str); 5] = [
        (r#"{}"#, "message"),
        (
            r#"{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}]}}"#,
            "message.messageId",
        ),
        (
            r#"{"message":{"messageId":"m","parts":[{"text":"hi"}]}}"#,
            "message.role",
        ),
        (
            r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}"#,
            "message.parts",
        ),
        (
            r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"mediaType":"text/plain"}]}}"#,
            "message.parts[0]",
        ),
    ];
    for (json, field) in cases {
        let err = refused::<SendMessageRequest>("SendMessageRequest", json);
        assert_eq!(err.field, field, "{json}: {err}");
    }
    let err = refused::<SendMessageResponse>("SendMessageResponse", "{}");
    assert!(err.message.contains("exactly one of"), "{err}");
}

#[test]
fn negative_history_length_is_refused() {
    let err = refused::<SendMessageRequest>(
        "SendMessageRequest",
        r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"historyLength":-1}}"#,
    );
    assert_eq!(err.field, "configuration.historyLength");
}

#[test]
fn bad_timestamps_and_trailing_data_are_refused() {
    let err = refused::<Task>(
        "Task",
        r#"{"id":"t","status":{"state":"TASK_STATE_WORKING","timestamp":"yesterday"}}"#,
    );
    assert_eq!(err.field, "status.timestamp");
    assert!(err.message.contains("RFC 3339"), "{err}");
    let err = refused::<Message>(
        "Message",
        r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]} extra"#,
    );
    assert!(err.message.contains("trailing"), "{err}");
    let err = refused::<Message>("Message", r#"{"messageId":"m","#);
    assert!(err.message.contains("EOF"), "{err}");
}

#[test]
fn a_body_that_is_not_json_is_named_as_the_body() {
    for body in ["{", "", "not json"] {
        let err = refused::<SendMessageRequest>("SendMessageRequest", body);
        assert_eq!(err.field, "", "{body:?}: {err}");
        assert!(
            err.message.starts_with("the body is not valid JSON"),
            "{body:?}: {err}"
        );
    }
    // Valid JSON of the wrong shape is the body's error too (not a field's).
    let err = refused::<SendMessageRequest>("SendMessageRequest", "[1, 2]");
    assert_eq!(err.field, "", "{err}");
}
