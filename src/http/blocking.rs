//! Plane calls from request handlers. Intake awaits its write (`WriteJob::done`); the
//! other writes block until their commit, so handlers run them on the runtime's blocking
//! pool, never on one of the listener's async workers. A short read (one Task by id, or a
//! page of at most 100 found by an index seek: a pooled read connection, well under a
//! millisecond) runs in place: moving it to the blocking pool costs two thread switches,
//! more than the read itself, and a thread and a read connection per concurrent request.

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

/// Runs a short read (see the module doc) on the calling worker.
pub fn short_read<T>(read: impl FnOnce() -> Result<T, PlaneError>) -> Result<T, ApiError> {
    read().map_err(ApiError::from)
}
