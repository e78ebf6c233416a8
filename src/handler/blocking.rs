//! Plane calls from request handlers. Intake awaits its write (`WriteJob::done`); the
//! other writes block until their commit, so handlers run them on the runtime's blocking
//! pool, never on one of the listener's async workers. A short read (one Task by id, or a
//! page of at most 100 found by an index seek: a pooled read connection, well under a
//! millisecond) runs in place: moving it to the blocking pool costs two thread switches,
//! more than the read itself, and a thread and a read connection per concurrent request.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Poll;

use super::error::ApiError;
use crate::plane::PlaneError;

/// Runs a blocking plane call off the async workers.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PlaneError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(_) => Err(ApiError::internal(
            "the task plane call failed unexpectedly; nothing was acknowledged",
        )),
    }
}

/// Awaits a plane call that holds no thread while it waits (intake: its write is awaited)
/// on the calling worker. A panic in it answers 500, as a blocking call's does, without a
/// task of its own per request (a spawn, its allocation and a cross-task wake-up).
pub async fn awaited<T>(call: impl Future<Output = Result<T, PlaneError>>) -> Result<T, ApiError> {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        // A call that panicked is answered at once and never polled again.
        match catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(Poll::Ready(result)) => Poll::Ready(result.map_err(ApiError::from)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(ApiError::internal(
                "the task plane call failed unexpectedly; nothing was acknowledged",
            ))),
        }
    })
    .await
}

/// Runs a short read (see the module doc) on the calling worker; a panic in it answers
/// 500.
pub fn short_read<T>(read: impl FnOnce() -> Result<T, PlaneError>) -> Result<T, ApiError> {
    match catch_unwind(AssertUnwindSafe(read)) {
        Ok(result) => result.map_err(ApiError::from),
        Err(_) => Err(ApiError::internal(
            "the task plane read failed unexpectedly; try again",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    #[test]
    fn a_plane_call_that_panics_answers_500_and_the_worker_goes_on() {
        let rt = crate::handler::test_runtime();
        let panicked = rt.block_on(awaited(async {
            tokio::task::yield_now().await;
            if true {
                panic!("a bug in a plane call");
            }
            Ok::<(), PlaneError>(())
        }));
        let err = panicked.unwrap_err();
        assert_eq!(err.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            err.message.contains("nothing was acknowledged"),
            "{}",
            err.message
        );
        // The same worker answers the next call.
        assert_eq!(
            rt.block_on(awaited(async { Ok::<_, PlaneError>(7) }))
                .unwrap(),
            7
        );
        let read = short_read(|| -> Result<(), PlaneError> { panic!("a bug in a read") });
        assert_eq!(read.unwrap_err().status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
