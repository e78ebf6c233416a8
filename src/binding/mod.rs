//! The Node addon surface. Conversions only: every rule lives in the plain Rust modules.
//! Nothing here is a static: whatever the addon opens is owned by a handle JS holds and
//! closed by its `close()`.
//!
//! Calls that write return Promises computed on the libuv thread pool, so an fsync never
//! blocks the JS thread; a panic there becomes a rejected Promise, never an abort.
//!
//! One module per class, and the helpers they share here:
//!
//! - [`plane`]: `TaskPlane` (intake, reads, the operator's views, checkpoints, evidence).
//! - [`delivery`]: `TaskPlane`'s outbound delivery calls and their inputs and results.
//! - [`bridge`]: `AgentBridge`, the resident agent's wake queue and its four tools.
//! - [`inspector`]: `StoreInspector`, the operator's read-only view of a root.
//! - [`listener`]: `A2AListener` and its options.
//! - [`logging`]: the process's log sink and startup warnings.
//! - [`convert`]: JS values ↔ the plane's records (messages, artifacts, task views).

use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::{AsyncTask, PromiseRaw, ToNapiValue, TypeName, ValueType};
use napi::sys;
use napi::{Env, Error, Result, Status, Task};
use serde_json::Value;

use crate::plane::PlaneError;

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
                    None => Err($crate::binding::invalid_enum(
                        $param,
                        text.as_deref(),
                        &[$($value),+],
                        None $(.or(Some($also_names())))?,
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
pub mod inspector;
pub mod listener;
pub mod logging;
pub mod plane;

/// The error for a value outside a string enum: names the parameter and its values.
fn invalid_enum(param: &str, given: Option<&str>, allowed: &[&str], also: Option<String>) -> Error {
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

fn invalid_arg(err: impl std::fmt::Display) -> Error {
    Error::new(Status::InvalidArg, err.to_string())
}

fn plane_error(err: PlaneError) -> Error {
    let status = match err {
        PlaneError::Store(_) => Status::GenericFailure,
        _ => Status::InvalidArg,
    };
    Error::new(status, err.to_string())
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
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        // SAFETY: forwarded unchanged to serde_json::Value's conversion, with the env napi
        // gave us.
        unsafe { Value::to_napi_value(env, val.0) }
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
        Err(Error::new(
            Status::GenericFailure,
            format!("task-plane internal error: {what}"),
        ))
    })
}

/// Runs blocking `work` that may wait long (a lease) on the addon's runtime's blocking
/// pool, so none of libuv's four pool threads (shared with Node's fs, dns and crypto) waits.
fn off_libuv_pool<'env, T: ToNapiValue + Send + 'static>(
    env: &'env Env,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<PromiseRaw<'env, T>> {
    env.spawn_future(async move {
        napi::bindgen_prelude::spawn_blocking(move || guarded(work))
            .await
            .unwrap_or_else(|e| {
                Err(Error::new(
                    Status::GenericFailure,
                    format!("task-plane internal error: {e}"),
                ))
            })
    })
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
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> Result<T> {
        let work = self
            .work
            .take()
            .ok_or_else(|| Error::new(Status::GenericFailure, "task-plane call ran twice"))?;
        guarded(work)
    }

    fn resolve(&mut self, _env: Env, output: T) -> Result<T> {
        Ok(output)
    }
}
