//! hyper's timer for the gRPC port's HTTP/2 connections, made for what
//! keep-alive pings ask of it on every request (measured: BENCHMARKS.md).
//!
//! With keep-alive on, hyper polls the keep-alive `Sleep` on every
//! connection poll: with hyper-util's `TokioTimer` that is a tokio timer
//! poll each time (coop budget, driver, waker registration), ~460
//! instructions per `ShouldRateLimit` under h2load. Here a `Sleep` polled
//! again by the same task before its deadline (read on tokio's clock, the
//! one its timer fires by) answers `Pending` without polling tokio's timer:
//! that timer already holds this task's waker and wakes it when it fires,
//! which is never before the deadline. A poll from another waker, or at or
//! after the deadline, polls it (~110 instructions per request in all).
//!
//! `now` stays `Instant::now` (hyper reads it per frame received): a TSC
//! reading (`quanta`) plus the arithmetic to make it an `Instant` was not
//! cheaper (callgrind: 272 vs 146 instructions per request).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The timer of the gRPC port's connections.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct H2Timer;

impl hyper::rt::Timer for H2Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(QuietSleep::new(tokio::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(QuietSleep::new(tokio::time::sleep_until(deadline.into())))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<QuietSleep>() {
            Some(quiet) => quiet.get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A tokio `Sleep` that is not polled again while it cannot have fired
/// (module doc).
struct QuietSleep {
    inner: Pin<Box<tokio::time::Sleep>>,
    /// The waker tokio's timer last took, while it has not fired.
    registered: Option<Waker>,
}

impl QuietSleep {
    fn new(inner: tokio::time::Sleep) -> Self {
        Self {
            inner: Box::pin(inner),
            registered: None,
        }
    }

    fn reset(&mut self, deadline: Instant) {
        self.inner.as_mut().reset(deadline.into());
        // Polled again before it is trusted to wake anyone.
        self.registered = None;
    }
}

impl Future for QuietSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let quiet = this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if quiet && tokio::time::Instant::now() < this.inner.deadline() {
            return Poll::Pending;
        }
        match this.inner.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.registered = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if !quiet {
                    this.registered = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl hyper::rt::Sleep for QuietSleep {}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer as _;

    /// Fires at its deadline when polled only by the task it woke, after a
    /// reset to a later deadline, and after one to an earlier one.
    #[tokio::test]
    async fn fires_at_its_deadline_and_after_resets() {
        let timer = H2Timer;
        let start = tokio::time::Instant::now();
        let mut sleep = timer.sleep(Duration::from_millis(30));
        // Polled repeatedly by one task: the quiet path, then the wake.
        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            let polled = sleep.as_mut().poll(cx);
            if polled.is_pending() && polls < 5 {
                cx.waker().wake_by_ref();
            }
            polled
        })
        .await;
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(polls >= 5, "polled {polls} times");

        for later_ms in [60u64, 10] {
            let start = tokio::time::Instant::now();
            let mut sleep = timer.sleep(Duration::from_secs(3600));
            // Registered with this task, then moved.
            assert!(futures::poll!(sleep.as_mut()).is_pending());
            timer.reset(&mut sleep, Instant::now() + Duration::from_millis(later_ms));
            tokio::time::timeout(Duration::from_secs(5), sleep)
                .await
                .expect("fires after the reset");
            assert!(start.elapsed() >= Duration::from_millis(later_ms));
        }
    }
}
