//! Timers that spare tokio's driver wake-ups: hyper's timer for one connection (the
//! header-read deadline reuses one tokio timer) and [`Waves`] (one timer for the short
//! waits that start close together).
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

/// One tokio timer for the short waits that start close together (the held first frames
/// of `task_stream::hold_first_frame`), where a timer each would register with tokio's
/// driver each time.
///
/// tokio wakes its driver (an eventfd `write`, then one more `epoll_wait`) for every timer
/// registered before the earliest one the driver saw when it last parked, even from the
/// driver's own thread, until it parks again. Held first frames come in waves under load
/// (a batch of acceptances, then a batch of updates that ends them all), so the driver
/// parked between waves with only 30-s timers ahead, and every hold of the next wave woke
/// it: ~0.4 eventfd writes per stream. Waits that start within the first half of a wave's
/// window end with it; a wave costs one timer.
#[derive(Default)]
pub struct Waves {
    /// The wave waits may still join: when it ends, and what tells its waits. Its timer's
    /// task takes it out, under this lock, before telling them, so a wait that finds it
    /// here is told too.
    open: Arc<Mutex<Option<Wave>>>,
}

type Wave = (Instant, Arc<tokio::sync::Notify>);

impl Waves {
    /// Resolves after at least half of `window` and at most `window` from now: at the end
    /// of the open wave if that is far enough ahead, else of a new one. Must be called
    /// inside the runtime (a new wave spawns its timer's task).
    pub fn wait(&self, window: Duration) -> tokio::sync::futures::OwnedNotified {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some((ends, ended)) = open.as_ref() {
            if *ends >= now + window / 2 {
                return ended.clone().notified_owned();
            }
        }
        let ends = now + window;
        let ended = Arc::new(tokio::sync::Notify::new());
        let wave = (ends, ended.clone());
        let waves = self.open.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(ends.into()).await;
            let mut open = waves.lock().unwrap_or_else(|e| e.into_inner());
            if open
                .as_ref()
                .is_some_and(|(_, it)| Arc::ptr_eq(it, &wave.1))
            {
                *open = None;
            }
            drop(open);
            wave.1.notify_waiters();
        });
        // Made before the timer's task can tell the wave's waits (it needs this lock).
        let wait = ended.clone().notified_owned();
        *open = Some((ends, ended));
        wait
    }

    #[cfg(test)]
    fn open_ends(&self) -> Option<Instant> {
        self.open.lock().unwrap().as_ref().map(|(ends, _)| *ends)
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
    fn waits_that_start_within_half_a_window_end_with_one_timer_and_each_waits_half_of_it() {
        crate::http::test_runtime().block_on(async {
            let waves = Waves::default();
            let window = Duration::from_millis(800);
            let started = Instant::now();
            let first = waves.wait(window);
            let wave = waves.open_ends().expect("a wave");
            tokio::time::sleep(Duration::from_millis(80)).await;
            let joined_at = Instant::now();
            let second = waves.wait(window);
            assert_eq!(waves.open_ends(), Some(wave), "the second joined the wave");
            first.await;
            assert!(started.elapsed() >= window, "the wave ended early");
            second.await;
            assert!(
                joined_at.elapsed() >= window / 2,
                "a joined wait was cut short"
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the wave did not end"
            );
            // An ended wave is closed before its waits are told: none can join it after.
            assert_eq!(waves.open_ends(), None, "an ended wave stayed open");
            let third = waves.wait(window);
            let next = waves.open_ends().expect("a wave");
            assert!(next > wave);
            // Less than half its window left: the next wait starts a wave of its own.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let late_at = Instant::now();
            let fourth = waves.wait(window);
            assert!(
                waves.open_ends().expect("a wave") > next,
                "joined too late a wave"
            );
            third.await;
            fourth.await;
            assert!(late_at.elapsed() >= window, "the new wave ended early");
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
