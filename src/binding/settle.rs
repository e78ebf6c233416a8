//! Settling the Promises of many writes with one wake of Node's JS thread.
//!
//! A napi deferred per call settles through its own threadsafe function: every commit of
//! many jobs then wakes the JS thread once per job, and on a busy core each wake can
//! preempt the writer thread that is still answering the rest of the batch (a profile of
//! one-core `message:send` showed the writer preempted ~9,000 times a second). A
//! [`Settler`] owns one threadsafe function; the writer queues each outcome and, once per
//! batch ([`crate::store::at_batch_end`]), calls that function once: the JS thread wakes
//! once and settles every queued Promise in order.
//!
//! Lifetimes: the threadsafe function holds the queue (its context, dropped by its
//! finalizer); every Promise not yet settled holds the [`Settler`], and the last holder
//! releases the function. While any Promise is unsettled the function is referenced, so
//! Node's event loop waits for it, as it would for a libuv work item; otherwise it does
//! not keep Node alive. When Node tears the env down it finalizes the function itself,
//! possibly before the last holder lets go: from then on the Settler touches nothing.
//!
//! What to do when (queueing, one call per batch, counting unsettled Promises, nothing
//! after the finalizer) is [`batch::Batch`]'s, plain Rust tested without Node; this file
//! only makes the N-API calls it decides on.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};

use super::{internal, Result, Settled};

mod batch;

use batch::Batch;

/// Settles one Promise on the JS thread.
type Settle = Box<dyn FnOnce(sys::napi_env) + Send>;

/// The threadsafe function's context: the batching ([`Batch`]) around the function.
type Queue = Batch<Settle, Tsfn>;

/// A threadsafe function pointer.
struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function may be called and released from any thread; that is its
// purpose. Its ref and unref happen on the JS thread only (`promise`, `call_js`), and
// [`Batch`] hands it out only under its lock and never after the finalizer ran.
unsafe impl Send for Tsfn {}

/// One threadsafe function that settles queued Promises (see the module doc). The N-API
/// calls are here; what to call when is [`Batch`]'s.
pub(super) struct Settler {
    queue: Arc<Queue>,
}

impl Settler {
    /// Creates the threadsafe function (unreferenced until a Promise waits). On the JS
    /// thread.
    pub(super) fn new(env: &Env) -> Result<Arc<Settler>> {
        let queue = Arc::new(Queue::new());
        let context = Arc::into_raw(queue.clone()) as *mut c_void;
        let name = "task-plane-settle";
        let mut resource_name = ptr::null_mut();
        let mut tsfn = ptr::null_mut();
        // SAFETY: plain napi calls on the JS thread with the env napi gave us; `context` is
        // an owned Arc the finalizer takes back (or we do, below, if creation fails).
        let status = unsafe {
            let status = sys::napi_create_string_utf8(
                env.raw(),
                name.as_ptr().cast(),
                name.len() as isize,
                &mut resource_name,
            );
            if status != sys::Status::napi_ok {
                status
            } else {
                sys::napi_create_threadsafe_function(
                    env.raw(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    resource_name,
                    0,
                    1,
                    context,
                    Some(finalize),
                    context,
                    Some(call_js),
                    &mut tsfn,
                )
            }
        };
        if status != sys::Status::napi_ok {
            // SAFETY: the function was not created, so its finalizer will never run.
            drop(unsafe { Arc::from_raw(context as *const Queue) });
            return Err(internal(format!(
                "cannot create the settling function (napi status {status})"
            )));
        }
        // SAFETY: on the JS thread, with a function we just created.
        unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) };
        queue.attach(Tsfn(tsfn));
        Ok(Arc::new(Settler { queue }))
    }

    /// A new Promise and the handle that settles it (from any thread). On the JS thread.
    pub(super) fn promise<'env, T: ToNapiValue + Send + 'static>(
        self: &Arc<Self>,
        env: &'env Env,
    ) -> Result<(Pending<T>, Object<'env>)> {
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: a plain napi call on the JS thread with the env napi gave us.
        let status = unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) };
        if status != sys::Status::napi_ok {
            return Err(internal(format!(
                "cannot create a Promise (napi status {status})"
            )));
        }
        // SAFETY: on the JS thread, with our function while it lives.
        self.queue.promised(|tsfn| unsafe {
            sys::napi_ref_threadsafe_function(env.raw(), tsfn.0);
        });
        // The object napi just created, in the scope of this call.
        let promise = Object::from_raw(env.raw(), promise);
        Ok((
            Pending {
                settler: Some(self.clone()),
                deferred: Deferred(deferred),
                _value: std::marker::PhantomData,
            },
            promise,
        ))
    }

    /// Queues `settle`; the first of a batch asks for one call of the function once the
    /// batch's replies are done.
    fn queue(self: &Arc<Self>, settle: Settle) {
        if self.queue.queue(settle) {
            let settler = self.clone();
            crate::store::at_batch_end(move || {
                // SAFETY: our function while it lives. Non-blocking with an unbounded
                // queue, it fails only while Node tears the env down, and then the
                // Promises are gone with it.
                settler.queue.with_function(|tsfn| unsafe {
                    sys::napi_call_threadsafe_function(
                        tsfn.0,
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    );
                });
            });
        }
    }
}

impl Drop for Settler {
    fn drop(&mut self) {
        // SAFETY: the last holder releases the function, from any thread, unless Node
        // finalized it already (env teardown); queued calls are still delivered before
        // its finalizer runs.
        self.queue.with_function(|tsfn| unsafe {
            sys::napi_release_threadsafe_function(
                tsfn.0,
                sys::ThreadsafeFunctionReleaseMode::release,
            );
        });
    }
}

/// A napi deferred, settled only on the JS thread.
struct Deferred(sys::napi_deferred);
// SAFETY: the pointer is only carried across threads; it is used on the JS thread only.
unsafe impl Send for Deferred {}

/// A Promise waiting for its outcome. Dropped unsettled, it rejects (it never hangs).
pub(super) struct Pending<T: ToNapiValue + Send + 'static> {
    settler: Option<Arc<Settler>>,
    deferred: Deferred,
    _value: std::marker::PhantomData<fn(T)>,
}

impl<T: ToNapiValue + Send + 'static> Pending<T> {
    /// Settles the Promise with `outcome` (on the JS thread, with the batch).
    pub(super) fn settle(mut self, outcome: Result<T>) {
        self.send(outcome);
    }

    fn send(&mut self, outcome: Result<T>) {
        let Some(settler) = self.settler.take() else {
            return;
        };
        let deferred = Deferred(self.deferred.0);
        settler.queue(Box::new(move |env| {
            let deferred = deferred;
            // SAFETY: on the JS thread, inside the threadsafe function's call, with its env;
            // the deferred is settled exactly once.
            unsafe {
                match Settled::to_napi_value(env, Settled(outcome)) {
                    Ok(value) => sys::napi_resolve_deferred(env, deferred.0, value),
                    Err(error) => match ToNapiValue::to_napi_value(env, error) {
                        Ok(error) => sys::napi_reject_deferred(env, deferred.0, error),
                        Err(_) => sys::napi_reject_deferred(env, deferred.0, ptr::null_mut()),
                    },
                };
            }
        }));
    }
}

impl<T: ToNapiValue + Send + 'static> Drop for Pending<T> {
    fn drop(&mut self) {
        // Nothing after a settle (`send` took the settler), and no error made for nothing:
        // every settled Promise is dropped here (a profile of one-core `message:send` counted
        // three such errors, each a formatted message, per Task).
        if self.settler.is_some() {
            self.send(Err(internal("a write was dropped before it was answered")));
        }
    }
}

/// Our finalizer: takes back the queue the function held.
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Arc given to the function at creation; this runs once.
    let queue = unsafe { Arc::from_raw(data as *const Queue) };
    // A Settler may outlive the function when Node tears the env down first.
    queue.finalized();
}

/// On the JS thread: settles everything queued, in order.
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    // SAFETY: `context` is the queue the function holds until its finalizer runs, which
    // is after the last call.
    let queue = unsafe { &*(context as *const Queue) };
    if env.is_null() {
        // Node is tearing the env down: the Promises are gone with it.
        queue.discard_queued();
        return;
    }
    queue.settle_queued(
        |settle| settle(env),
        // SAFETY: on the JS thread, with the function whose call this is.
        |tsfn| unsafe {
            sys::napi_unref_threadsafe_function(env, tsfn.0);
        },
    );
}
