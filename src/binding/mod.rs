//! The Node addon surface. Conversions only: every rule lives in the plain Rust modules.
//! Nothing here is a static: whatever the addon opens is owned by a handle JS holds and
//! closed by its `close()`.
//!
//! Calls that write return Promises computed on the libuv thread pool, so an fsync never
//! blocks the JS thread; a panic there becomes a rejected Promise, never an abort.
//!
//! Every error the addon throws or rejects with carries a `code` JS can switch on: for an
//! error of the plane, the A2A reason the HTTP layer gives the same error (one mapping:
//! [`ApiError`]'s `From<PlaneError>`); for a bad argument, `INVALID_ARGUMENT`. The error
//! type is [`Failure`]; [`js_error`] turns one into a JS error on the JS thread, for
//! synchronous throws, `PlaneCall` rejections and spawned futures alike.
//!
//! One module per class, and the helpers they share here:
//!
//! - [`plane`]: `TaskPlane` (intake, reads, the operator's views, checkpoints, evidence).
//! - [`delivery`]: `TaskPlane`'s outbound delivery calls and their inputs and results.
//! - [`bridge`]: `AgentBridge`, the resident agent's wake queue and its four tools.
//! - [`embedder`]: `EmbedderAgent`, the agent API without turn authority for embedders
//!   that run their own agent without Pi (never the resident's way to act).
//! - [`inspector`]: `StoreInspector`, the operator's read-only view of a root.
//! - [`listener`]: `A2AListener` and its options.
//! - [`logging`]: the process's log sink and startup warnings.
//! - [`convert`]: JS values ↔ the plane's records (messages, artifacts, task views).

use std::panic::{catch_unwind, AssertUnwindSafe};

use std::future::Future;

use napi::bindgen_prelude::Object;
use napi::bindgen_prelude::{AsyncTask, PromiseRaw, ToNapiValue, TypeName, ValueType};
use napi::sys;
use napi::{Env, JsError, Task};
use serde_json::Value;

use crate::handler::ApiError;
use crate::plane::PlaneError;

/// The `code` of a JS error from the addon: an A2A reason (`TASK_NOT_FOUND`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// What an addon call fails with: a message for people and a [`Code`] for programs.
pub type Failure = napi::Error<Code>;

/// The result of an addon call. napi's generated code throws the error of a return type
/// named `Result`, whatever its code type, so a synchronous call throws with our code.
pub type Result<T> = std::result::Result<T, Failure>;

/// An [`ApiError`] as the addon reports it: its reason is the code.
fn failure(err: ApiError) -> Failure {
    Failure::new(Code(err.reason), err.message)
}

/// A plane error: the code is the A2A reason the HTTP layer maps it to; the message is the
/// plane's own (it says what to do, also outside HTTP).
fn plane_error(err: PlaneError) -> Failure {
    let message = err.to_string();
    Failure::new(Code(ApiError::from(err).reason), message)
}

/// A bad argument from JS: `INVALID_ARGUMENT`.
fn invalid_arg(message: impl std::fmt::Display) -> Failure {
    failure(ApiError::invalid("", message.to_string()))
}

/// A call that does not fit the handle's state (e.g. it is closed): `FAILED_PRECONDITION`.
fn failed_precondition(message: impl Into<String>) -> Failure {
    plane_error(PlaneError::FailedPrecondition(message.into()))
}

/// A failure of the addon itself, not of the call: `INTERNAL`.
fn internal(message: impl std::fmt::Display) -> Failure {
    failure(ApiError::internal(format!(
        "task-plane internal error: {message}"
    )))
}

/// `failure` as a JS error object whose `code` is the failure's, held by a napi error that
/// rejects or throws with exactly that object. Call it on the JS thread, with its env.
fn js_error(env: sys::napi_env, failure: Failure) -> napi::Error {
    napi::Error::from(JsError::from(failure).into_unknown(Env::from_raw(env)))
}

/// An outcome settled on the JS thread: a value, or a rejection with the failure's code.
pub struct Settled<T>(Result<T>);

impl<T: ToNapiValue> ToNapiValue for Settled<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val.0 {
            // SAFETY: forwarded unchanged to T's conversion, with the env napi gave us.
            Ok(value) => unsafe { T::to_napi_value(env, value) },
            Err(failure) => Err(js_error(env, failure)),
        }
    }
}

/// Awaits `work` on the addon's runtime (no thread waits); the Promise settles with its
/// outcome, a failure keeping its code.
fn spawn<'env, T: ToNapiValue + Send + 'static>(
    env: &'env Env,
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<PromiseRaw<'env, Settled<T>>> {
    env.spawn_future(async move { Ok(Settled(work.await)) })
        .map_err(|e| internal(format!("cannot start the call: {}", e.reason)))
}

/// A plane write queued from the JS thread; its Promise is settled right after the commit,
/// with the rest of its batch, by one wake of the JS thread ([`settle`]): JS → writer → JS,
/// neither a libuv pool thread nor a runtime worker in between. `convert` runs on the
/// writer thread, so it must be cheap; a panic in it rejects the Promise. Writes queued
/// through one `order` are applied in the order they were made; a full queue is waited for
/// on a thread of its own, never on the JS thread ([`crate::store::InOrder`]).
fn queued_write<'env, R, T>(
    env: &'env Env,
    settler: &std::sync::Arc<settle::Settler>,
    order: &std::sync::Arc<crate::store::InOrder>,
    job: crate::plane::WriteJob<R>,
    convert: impl FnOnce(R) -> Result<T> + Send + 'static,
) -> Result<Object<'env>>
where
    R: Send + 'static,
    T: ToNapiValue + Send + 'static,
{
    let (pending, promise) = settler.promise::<T>(env)?;
    let reply = Box::new(move |result: std::result::Result<R, PlaneError>| {
        pending.settle(guarded(move || {
            result.map_err(plane_error).and_then(convert)
        }));
    });
    order.submit(move || job.then(reply));
    Ok(promise)
}

/// A string enum at the JS boundary. napi-rs generates its TypeScript type (the union of
/// its values) and its conversion to JS; the conversion from JS is ours, so that a value
/// outside the enum is refused with an error that names the parameter and the values it
/// takes. `also` parses another spelling the enum accepts on input, and names it for that
/// error. Doc lines are given as strings in brackets (`///` comments would reach napi's
/// type generator as raw strings through this macro).
macro_rules! js_enum {
    (
        [$($doc:tt)*]
        pub enum $name:ident for $param:tt $(, also $also:path, $also_names:path)? {
            $( $variant:ident = $value:tt $(: $vdoc:tt)? ),+ $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[napi(string_enum, object_from_js = false)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $( $(#[doc = $vdoc])? #[napi(value = $value)] $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value as JS spells it.
            #[allow(dead_code)]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $value,)+
                }
            }

            /// The value JS spelled as `text`, if it is one.
            pub fn from_js(text: &str) -> Option<Self> {
                match text {
                    $($value => Some($name::$variant),)+
                    _ => {
                        $(return $also(text);)?
                        #[allow(unreachable_code)]
                        None
                    }
                }
            }
        }

        impl napi::bindgen_prelude::FromNapiValue for $name {
            unsafe fn from_napi_value(
                env: napi::sys::napi_env,
                value: napi::sys::napi_value,
            ) -> napi::Result<Self> {
                // SAFETY: forwarded unchanged to String's conversion, with the env and
                // value napi gave us.
                let text = unsafe { <String as napi::bindgen_prelude::FromNapiValue>::from_napi_value(env, value) }.ok();
                match text.as_deref().and_then($name::from_js) {
                    Some(parsed) => Ok(parsed),
                    None => Err($crate::binding::js_error(
                        env,
                        $crate::binding::invalid_enum(
                            $param,
                            text.as_deref(),
                            &[$($value),+],
                            None $(.or(Some($also_names())))?,
                        ),
                    )),
                }
            }
        }
    };
}

// After the macro: the modules use it.
pub mod bridge;
pub mod convert;
pub mod delivery;
pub mod embedder;
mod inbox;
pub mod inspector;
pub mod listener;
pub mod logging;
pub mod plane;
mod settle;

/// The error for a value outside a string enum: names the parameter and its values.
fn invalid_enum(
    param: &str,
    given: Option<&str>,
    allowed: &[&str],
    also: Option<String>,
) -> Failure {
    let given = match given {
        Some(text) => format!("`{text}`"),
        None => "not a string".to_string(),
    };
    let also = also
        .map(|names| format!(", or {names}"))
        .unwrap_or_default();
    invalid_arg(format!(
        "invalid `{param}`: {given}; use one of {}{also}",
        allowed.join(", ")
    ))
}

/// A JSON value handed to JS as a plain object (an A2A document).
pub struct Json(pub Value);

impl TypeName for Json {
    fn type_name() -> &'static str {
        "Record<string, unknown>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Json {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: forwarded unchanged to serde_json::Value's conversion, with the env napi
        // gave us.
        unsafe { Value::to_napi_value(env, val.0) }
    }
}

/// A JSON document handed over from JavaScript (an A2A Message or Artifact, a list of
/// them), read as the text the engine's own `JSON.stringify` makes of it and parsed here.
/// Walking the object through N-API instead costs a call for every property and element
/// (5% of a one-core blocking `message:send`'s instructions went to converting one small
/// artifact and message that way). What JSON.stringify does is what the caller gets:
/// `toJSON` is honoured, `undefined` members are left out, and a value it cannot encode
/// (a cycle, a BigInt) throws its own TypeError.
///
/// The text is decoded straight into the type the call needs ([`JsonArg::decode`]), with
/// no `serde_json::Value` tree built on the way when the call needs none.
pub struct JsonArg(String);

impl JsonArg {
    /// The document as a JSON tree.
    pub fn value(&self) -> Result<Value> {
        serde_json::from_str(&self.0).map_err(|e| invalid_arg(format!("not JSON: {e}")))
    }

    /// The document decoded as an A2A `what` (without its REQUIRED checks, which the
    /// caller makes once it has filled in what it mints): a refused one names its field.
    pub fn decode<T: serde::de::DeserializeOwned>(&self, what: &'static str) -> Result<T> {
        crate::wire::json::decode_unchecked(what, self.0.as_bytes()).map_err(invalid_arg)
    }
}

impl napi::bindgen_prelude::FromNapiValue for JsonArg {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY: napi calls this on the JS thread with a live env and value; every handle
        // below is created in the current handle scope and used only within this call.
        match unsafe { json_stringify(env, value) }? {
            Some(text) => Ok(JsonArg(text)),
            None => Err(js_error(
                env,
                invalid_arg("expected a JSON value (an object, array, string, number or boolean)"),
            )),
        }
    }
}

/// `JSON.stringify(value)`; `None` when it returns no string (`undefined`, a function).
///
/// # Safety
/// Call on the JS thread, inside a napi callback, with the env and value it was given.
unsafe fn json_stringify(
    env: sys::napi_env,
    value: sys::napi_value,
) -> napi::Result<Option<String>> {
    use napi::bindgen_prelude::FromNapiValue;
    let check = |status: sys::napi_status, what: &str| {
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            Err(napi::Error::new(
                napi::Status::from(status),
                format!("JSON.stringify of an argument failed ({what})"),
            ))
        }
    };
    let mut global = std::ptr::null_mut();
    let mut json = std::ptr::null_mut();
    let mut stringify = std::ptr::null_mut();
    let mut text = std::ptr::null_mut();
    let mut kind = sys::ValueType::napi_undefined;
    // SAFETY: see the function's contract; out-pointers are valid locals.
    unsafe {
        check(sys::napi_get_global(env, &mut global), "global")?;
        check(
            sys::napi_get_named_property(env, global, c"JSON".as_ptr(), &mut json),
            "JSON",
        )?;
        check(
            sys::napi_get_named_property(env, json, c"stringify".as_ptr(), &mut stringify),
            "JSON.stringify",
        )?;
        // A throw (a cycle, a BigInt) stays pending and reaches the caller as thrown.
        check(
            sys::napi_call_function(env, json, stringify, 1, &value, &mut text),
            "call",
        )?;
        check(sys::napi_typeof(env, text, &mut kind), "typeof")?;
        if kind != sys::ValueType::napi_string {
            return Ok(None);
        }
        String::from_napi_value(env, text).map(Some)
    }
}

/// Runs `work`, turning a panic into an error (no Rust panic may cross into Node).
fn guarded<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(internal(what))
    })
}

/// Runs blocking `work` (a store write) on the addon's runtime's blocking pool, for a
/// future awaited on that runtime ([`spawn`]); a panic becomes an error.
async fn on_blocking_pool<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    napi::bindgen_prelude::spawn_blocking(move || guarded(work))
        .await
        .unwrap_or_else(|e| Err(internal(e)))
}

/// Runs one plane call on the libuv thread pool.
pub struct PlaneCall<T> {
    work: Option<Box<dyn FnOnce() -> Result<T> + Send>>,
}

impl<T: ToNapiValue + TypeName + Send + 'static> PlaneCall<T> {
    fn new(work: impl FnOnce() -> Result<T> + Send + 'static) -> AsyncTask<Self> {
        AsyncTask::new(PlaneCall {
            work: Some(Box::new(work)),
        })
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for PlaneCall<T> {
    /// The call's outcome, failure included: it becomes a JS error in `resolve`, on the JS
    /// thread, where its code can be set.
    type Output = Result<T>;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<Result<T>> {
        Ok(match self.work.take() {
            Some(work) => guarded(work),
            None => Err(internal("a task-plane call ran twice")),
        })
    }

    fn resolve(&mut self, env: Env, output: Result<T>) -> napi::Result<T> {
        output.map_err(|failure| js_error(env.raw(), failure))
    }
}
