//! [`Waves`]: one tokio timer for the short waits that start close together.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One tokio timer for the short waits that start close together (the held first frames
/// of `streams::hold_first_frame`), where a timer each would register with tokio's
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
    fn waits_that_start_within_half_a_window_end_with_one_timer_and_each_waits_half_of_it() {
        crate::handler::test_runtime().block_on(async {
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
}
