//! Plane calls from request handlers: the plane's calls block (a store read, or a write
//! that waits for its commit), so handlers run them on the runtime's blocking pool and
//! never on one of the listener's two async workers.

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
