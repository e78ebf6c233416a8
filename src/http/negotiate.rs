//! What HTTP requests negotiate, read from their headers (the rules are the handler's,
//! `handler::negotiate`): protocol version, activated extensions (echoed in the response),
//! content type, and the body read with its size limit.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, StatusCode};

use crate::handler::negotiate::{self, EXTENSIONS_HEADER, VERSION_HEADER};
use crate::handler::ApiError;

/// The version a request asks for: its `A2A-Version` header, else its `A2A-Version`
/// query parameter (checked by `handler::negotiate::check_version`).
pub fn requested_version<B>(req: &Request<B>) -> Option<String> {
    let from_header = req
        .headers()
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or("<not text>").trim().to_string());
    from_header.or_else(|| {
        req.uri().query().and_then(|q| {
            q.split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
                .map(|(_, v)| v.to_string())
        })
    })
}

/// `A2A-Version` of an HTTP request, checked.
pub fn check_version<B>(req: &Request<B>) -> Result<(), ApiError> {
    negotiate::check_version(requested_version(req).as_deref())
}

/// The supported extensions an HTTP request activates (its `A2A-Extensions` lines).
pub fn activated_extensions(headers: &HeaderMap) -> Vec<String> {
    negotiate::activated_extensions(
        headers
            .get_all(EXTENSIONS_HEADER)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// Echoes the activated extensions in the response.
pub fn echo_extensions(headers: &mut HeaderMap, extensions: &[String]) {
    if extensions.is_empty() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&extensions.join(", ")) {
        headers.insert(EXTENSIONS_HEADER, value);
    }
}

/// Reads a JSON request body: `application/json` or `application/a2a+json` (or no type),
/// at most `limit` bytes (413 before reading more), within `timeout`. An empty body is
/// returned as empty bytes; the caller decides what that means.
pub async fn read_json_body(
    req: Request<Incoming>,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    if let Some(content_type) = req.headers().get(CONTENT_TYPE) {
        let essence = content_type
            .to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" && essence != "application/a2a+json" {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "CONTENT_TYPE_NOT_SUPPORTED",
                format!("request bodies must be application/json or application/a2a+json, not `{essence}`"),
            ));
        }
    }
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("the request body is larger than {limit} bytes (A2A_MAX_BODY_BYTES)"),
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut collect = std::pin::pin!(collect_body(req.into_body(), limit));
    // A small body has usually arrived with its head: read without a timer (registering
    // one with tokio's driver is most of the cost of reading such a body); only a body
    // still on its way is read against the timeout.
    let read = match std::future::poll_fn(|cx| Poll::Ready(collect.as_mut().poll(cx))).await {
        Poll::Ready(read) => Ok(read),
        Poll::Pending => tokio::time::timeout(timeout, collect).await,
    };
    match read {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "DEADLINE_EXCEEDED",
            "the request body did not arrive in time",
        )),
        Ok(Err(BodyError::TooLarge)) => Err(too_large()),
        Ok(Err(BodyError::Read(err))) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            format!("could not read the request body: {err}"),
        )),
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

enum BodyError {
    TooLarge,
    Read(hyper::Error),
}

/// The body's data, at most `limit` bytes. A body that came in one frame (a small request
/// usually does) is that frame's bytes as they are: no buffer list, no copy.
async fn collect_body(mut body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    let mut first = Bytes::new();
    let mut more: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else {
            continue; // trailers: nothing of the JSON body
        };
        if first.len() + more.len() + data.len() > limit {
            return Err(BodyError::TooLarge);
        }
        if first.is_empty() && more.is_empty() {
            first = data;
        } else {
            if more.is_empty() {
                more.extend_from_slice(&first);
            }
            more.extend_from_slice(&data);
        }
    }
    Ok(if more.is_empty() {
        first
    } else {
        Bytes::from(more)
    })
}

/// Query parameters, percent-decoded; `camelCase` and `snake_case` names both work.
pub fn query_params(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (camel(&decode(k)), decode(v)),
            None => (camel(&decode(pair)), String::new()),
        })
        .collect()
}

fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
