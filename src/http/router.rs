//! The router and the checks every request passes, in order: head size (414, 431) →
//! route (404) → method (405) → `A2A-Version` (400 `VERSION_NOT_SUPPORTED`) → bearer
//! principal (401) → push-notification configs (501) → the route's handler (which checks
//! its content type, body size and ProtoJSON). Paths are our own
//! (`/tasks/{id}:cancel`-style): the verb is split off before the id is decoded.
//!
//! Beside the A2A routes, at the root like the card: `GET /healthz` (no credential, no
//! caller data) and `GET /metrics` (Prometheus text, any valid bearer token). Every
//! answered request is counted (`Metrics::request`) by binding, route and status.

use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};

use super::{card, conn, error_response, full, jsonrpc, negotiate, rest, Body, Caller, Shared};
use crate::handler::{ApiError, Ctx};
use crate::metrics::Sampled;

/// Longest request target we answer (414 with the documented body beyond).
const MAX_URI_BYTES: usize = 8 * 1024;
/// Largest request header section we answer (431 with the documented body beyond; hyper
/// itself refuses heads beyond its read buffer, `WRITE_BUFFER_BYTES` in `accept.rs`, and
/// more than 100 header fields).
const MAX_HEADER_BYTES: usize = 32 * 1024;

/// The routes of the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Card,
    Health,
    Metrics,
    Send,
    Stream,
    ListTasks,
    GetTask(String),
    CancelTask(String),
    Subscribe(String),
    PushConfigs,
    /// The JSON-RPC binding: POST to the interface URL itself.
    JsonRpc,
}

impl Route {
    fn allows(&self, method: &Method) -> bool {
        match self {
            Route::Card | Route::Health | Route::Metrics | Route::ListTasks | Route::GetTask(_) => {
                method == Method::GET || method == Method::HEAD
            }
            Route::Send | Route::Stream | Route::CancelTask(_) | Route::JsonRpc => {
                method == Method::POST
            }
            Route::Subscribe(_) => method == Method::GET || method == Method::POST,
            Route::PushConfigs => true,
        }
    }

    fn allow_header(&self) -> &'static str {
        match self {
            Route::Card | Route::Health | Route::Metrics | Route::ListTasks | Route::GetTask(_) => {
                "GET, HEAD"
            }
            Route::Send | Route::Stream | Route::CancelTask(_) | Route::JsonRpc => "POST",
            Route::Subscribe(_) => "GET, POST",
            Route::PushConfigs => "GET, POST, DELETE",
        }
    }

    /// The route's label in the request metrics.
    fn name(&self) -> &'static str {
        match self {
            Route::Card => "card",
            Route::Health => "healthz",
            Route::Metrics => "metrics",
            Route::Send => "send",
            Route::Stream => "stream",
            Route::ListTasks => "list",
            Route::GetTask(_) => "get",
            Route::CancelTask(_) => "cancel",
            Route::Subscribe(_) => "subscribe",
            Route::PushConfigs => "push_configs",
            Route::JsonRpc => "jsonrpc",
        }
    }

    /// The binding a route belongs to, in the request metrics.
    fn binding(&self) -> &'static str {
        match self {
            Route::JsonRpc => "jsonrpc",
            Route::Card | Route::Health | Route::Metrics => "http",
            _ => "http_json",
        }
    }
}

/// The routes served at the root whatever the interface's base path.
fn root_route(path: &str) -> Option<Route> {
    match path {
        "/.well-known/agent-card.json" => Some(Route::Card),
        "/healthz" => Some(Route::Health),
        "/metrics" => Some(Route::Metrics),
        _ => None,
    }
}

/// Matches a request path (already stripped of the interface's base path).
fn route(path: &str) -> Option<Route> {
    match path {
        "/message:send" => return Some(Route::Send),
        "/message:stream" => return Some(Route::Stream),
        "/tasks" | "/tasks/" => return Some(Route::ListTasks),
        _ => {}
    }
    let rest = path.strip_prefix("/tasks/")?;
    let (segment, tail) = match rest.split_once('/') {
        Some((segment, tail)) => (segment, Some(tail)),
        None => (rest, None),
    };
    if segment.is_empty() {
        return None;
    }
    if let Some(tail) = tail {
        let is_push =
            tail == "pushNotificationConfigs" || tail.starts_with("pushNotificationConfigs/");
        return is_push.then_some(Route::PushConfigs);
    }
    // The verb sits inside the last segment: split on its last `:` before decoding, so
    // an encoded `%3A` in an id is never taken for a verb.
    let (raw_id, verb) = match segment.rsplit_once(':') {
        Some((id, verb)) if verb == "cancel" || verb == "subscribe" => (id, Some(verb)),
        _ => (segment, None),
    };
    let id = percent_encoding::percent_decode_str(raw_id)
        .decode_utf8()
        .ok()?
        .into_owned();
    if id.is_empty() {
        return None;
    }
    Some(match verb {
        Some("cancel") => Route::CancelTask(id),
        Some(_) => Route::Subscribe(id),
        None => Route::GetTask(id),
    })
}

/// 414 or 431 with the documented body, for heads hyper accepted but we do not serve.
fn check_head(req: &Request<Incoming>) -> Result<(), ApiError> {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "URI_TOO_LONG",
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are served (shorten the query, e.g. the pageToken or contextId)"),
        ));
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "HEADERS_TOO_LARGE",
            format!(
                "the request headers are {headers} bytes; at most {MAX_HEADER_BYTES} are served"
            ),
        ));
    }
    Ok(())
}

/// Answers one request and counts it (binding, route, status, time to the response head).
pub(super) async fn handle(
    shared: Arc<Shared>,
    slot: Arc<conn::Slot>,
    req: Request<Incoming>,
) -> Response<Body> {
    let started = Instant::now();
    let plane = shared.handler.plane.clone();
    let (route, response) = answer(shared, slot, req).await;
    let (binding, name) = route.map_or(("http", "none"), |r| (r.binding(), r.name()));
    plane
        .metrics()
        .request(binding, name, response.status().as_u16(), started.elapsed());
    response
}

/// The route a request took (none when it matched none) and its response.
async fn answer(
    shared: Arc<Shared>,
    slot: Arc<conn::Slot>,
    req: Request<Incoming>,
) -> (Option<Route>, Response<Body>) {
    if let Err(err) = check_head(&req) {
        return (None, error_response(&err, &[]));
    }
    let path = req.uri().path().to_string();
    let route = match root_route(&path) {
        Some(route) => route,
        None => {
            let Some(local) = path.strip_prefix(shared.base_path.as_str()) else {
                return (None, not_found(&path));
            };
            match route(local) {
                Some(route) => route,
                None if shared.handler.config.jsonrpc && (local.is_empty() || local == "/") => {
                    Route::JsonRpc
                }
                None => return (None, not_found(&path)),
            }
        }
    };
    if !route.allows(req.method()) {
        return (Some(route.clone()), method_not_allowed(&route));
    }
    let response = match route {
        Route::Card => card::serve(&shared.card, &req),
        Route::Health => health(&shared),
        Route::Metrics => metrics(&shared, &req),
        _ => a2a(shared, slot, req, route.clone()).await,
    };
    (Some(route), response)
}

/// What `/healthz` and `/metrics` read now from outside the metrics.
fn sampled(shared: &Shared) -> Sampled {
    let plane = &shared.handler.plane;
    let store_open = !plane.is_closed();
    Sampled {
        live_streams: shared.handler.streams.live(),
        // 0 when it cannot be told (closed, or the database did not answer: the
        // store's state says which).
        store_bytes: if store_open {
            plane.store().bytes().unwrap_or(0)
        } else {
            0
        },
        store_open,
    }
}

/// `GET /healthz`: always 200 while the listener serves; the body says how it is.
fn health(shared: &Shared) -> Response<Body> {
    let body = shared.handler.plane.metrics().health(sampled(shared));
    super::json_response(StatusCode::OK, body.to_string().into(), &[])
}

/// `GET /metrics`: the Prometheus text exposition, for any valid bearer token.
fn metrics(shared: &Shared, req: &Request<Incoming>) -> Response<Body> {
    if let Err(err) = authenticate(shared, req) {
        return unauthenticated(&err, &[]);
    }
    let text = shared.handler.plane.metrics().encode(sampled(shared));
    let mut response = Response::new(full(text.into()));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

fn authenticate(shared: &Shared, req: &Request<Incoming>) -> Result<String, ApiError> {
    let authorizations = req
        .headers()
        .get_all(hyper::header::AUTHORIZATION)
        .iter()
        .map(|v| v.to_str().unwrap_or(""));
    shared.handler.authenticate(authorizations)
}

fn unauthenticated(err: &ApiError, extensions: &[String]) -> Response<Body> {
    let mut response = error_response(err, extensions);
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"a2a\""),
    );
    response
}

/// An A2A route: version, principal, then the operation.
async fn a2a(
    shared: Arc<Shared>,
    slot: Arc<conn::Slot>,
    req: Request<Incoming>,
    route: Route,
) -> Response<Body> {
    let extensions = negotiate::activated_extensions(req.headers());
    let respond = |result: Result<Response<Body>, ApiError>| match result {
        Ok(response) => response,
        Err(err) => error_response(&err, &extensions),
    };
    // JSON-RPC answers a version it does not speak as a JSON-RPC error, with the request's
    // id (`jsonrpc.rs`).
    if route != Route::JsonRpc {
        if let Err(err) = negotiate::check_version(&req) {
            return respond(Err(err));
        }
    }
    let principal = match authenticate(&shared, &req) {
        Ok(principal) => principal,
        Err(err) => return unauthenticated(&err, &extensions),
    };
    if route == Route::PushConfigs {
        return respond(Err(ApiError::push_config_operations_unsupported()));
    }
    let caller = Caller {
        ctx: Ctx {
            handler: shared.handler.clone(),
            principal,
            extensions: extensions.clone(),
        },
        connections: shared.connections.clone(),
        slot,
    };
    let result = match route {
        Route::Send => rest::send(caller, req).await,
        Route::Stream => rest::stream(caller, req).await,
        Route::ListTasks => rest::list(caller, req).await,
        Route::GetTask(id) => rest::get(caller, req, id).await,
        Route::CancelTask(id) => rest::cancel(caller, req, id).await,
        Route::Subscribe(id) => rest::subscribe(caller, req, id).await,
        Route::JsonRpc => Ok(jsonrpc::handle(caller, req).await),
        Route::Card | Route::Health | Route::Metrics | Route::PushConfigs => {
            unreachable!("handled above")
        }
    };
    respond(result)
}

fn not_found(path: &str) -> Response<Body> {
    error_response(
        &ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("no A2A route at {path}; see /.well-known/agent-card.json for this agent's interface"),
        ),
        &[],
    )
}

fn method_not_allowed(route: &Route) -> Response<Body> {
    let mut response = error_response(
        &ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            format!("this route accepts {}", route.allow_header()),
        ),
        &[],
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(route.allow_header()));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_split_the_verb_on_the_last_colon_before_decoding() {
        assert_eq!(
            route("/tasks/abc:cancel"),
            Some(Route::CancelTask("abc".into()))
        );
        assert_eq!(
            route("/tasks/abc:subscribe"),
            Some(Route::Subscribe("abc".into()))
        );
        assert_eq!(route("/tasks/abc"), Some(Route::GetTask("abc".into())));
        assert_eq!(route("/tasks/a%3Ab"), Some(Route::GetTask("a:b".into())));
        assert_eq!(
            route("/tasks/a%2Fb%20c:cancel"),
            Some(Route::CancelTask("a/b c".into()))
        );
        assert_eq!(
            route("/tasks/x:other"),
            Some(Route::GetTask("x:other".into()))
        );
        assert_eq!(
            route("/tasks/t/pushNotificationConfigs/c1"),
            Some(Route::PushConfigs)
        );
        assert_eq!(route("/tasks/t/other"), None);
        assert_eq!(route("/tasks"), Some(Route::ListTasks));
        assert_eq!(route("/message:send"), Some(Route::Send));
        assert_eq!(route("/nope"), None);
    }
}
