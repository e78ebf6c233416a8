//! hyper's timer for one connection: the header-read deadline reuses one tokio timer.
//!
//! hyper arms a header-read deadline (our `A2A_IDLE_TIMEOUT_MS`, the slow-client defence)
//! each time a keep-alive connection waits for its next request head, and drops it once
//! the head is read. With hyper-util's `TokioTimer` every request made a new tokio timer,
//! and registering a new timer that is due before every other one (30 s ahead, while the
//! blocking sends in flight wait with 60 s deadlines) makes tokio wake its driver: an
//! eventfd `write` and one more `epoll_wait` per request (0.95–0.99 `write` per blocking send,
//! `perf stat -e syscalls:sys_enter_write`). [`ConnTimer`] keeps the tokio timer a dropped
//! deadline leaves and moves it to the next deadline instead: a later deadline on a timer
//! still pending is a lock-free update in tokio, with no wake-up. Deadlines fire exactly as
//! before (the same tokio timer, the same instants).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

type TokioSleep = Pin<Box<tokio::time::Sleep>>;

/// One connection's timer (hyper's `Timer`); build one per connection.
#[derive(Default)]
pub struct ConnTimer {
    /// The tokio timer of the last deadline hyper dropped, kept for the next one.
    spare: Arc<Mutex<Option<TokioSleep>>>,
}

impl ConnTimer {
    fn deadline(&self, deadline: Instant) -> TokioSleep {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).take();
        match spare {
            Some(mut sleep) => {
                sleep.as_mut().reset(deadline.into());
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(deadline.into())),
        }
    }
}

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(Deadline {
            sleep: Some(self.deadline(deadline)),
            spare: self.spare.clone(),
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Deadline>() {
            Some(mut deadline) => {
                if let Some(sleep) = deadline.sleep.as_mut() {
                    sleep.as_mut().reset(new_deadline.into());
                }
            }
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A deadline hyper holds; when dropped, its tokio timer goes back to the connection.
struct Deadline {
    /// Always `Some` until dropped.
    sleep: Option<TokioSleep>,
    spare: Arc<Mutex<Option<TokioSleep>>>,
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl Sleep for Deadline {}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(sleep) = self.sleep.take() {
            *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(sleep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_deadline_gives_its_timer_to_the_next_one_which_fires_at_its_own_time() {
        crate::http::test_runtime().block_on(async {
            let timer = ConnTimer::default();
            let first = timer.sleep(Duration::from_secs(30));
            drop(first);
            assert!(timer.spare.lock().unwrap().is_some(), "the timer was kept");
            let started = Instant::now();
            let second = timer.sleep(Duration::from_millis(40));
            assert!(
                timer.spare.lock().unwrap().is_none(),
                "the kept timer was reused"
            );
            second.await;
            let waited = started.elapsed();
            assert!(
                waited >= Duration::from_millis(40),
                "fired early: {waited:?}"
            );
        });
    }

    #[test]
    fn a_deadline_reset_by_hyper_fires_at_the_new_time() {
        crate::http::test_runtime().block_on(async {
            let timer = ConnTimer::default();
            let started = Instant::now();
            let mut sleep = timer.sleep(Duration::from_secs(30));
            timer.reset(&mut sleep, Instant::now() + Duration::from_millis(20));
            sleep.await;
            assert!(started.elapsed() < Duration::from_secs(5));
            let mut later = timer.sleep(Duration::from_millis(1));
            timer.reset(&mut later, Instant::now() + Duration::from_millis(30));
            let started = Instant::now();
            later.await;
            assert!(started.elapsed() >= Duration::from_millis(29));
        });
    }
}
