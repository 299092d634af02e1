//! Noticing at once that the wall clock was stepped (NTP, an operator, a VM resumed).
//!
//! The controller sleeps until the next window edge on tokio's timer, which runs on the
//! monotonic clock: a step of the wall clock moves every edge nearer or farther without
//! waking it, so the edge would land only at the next safety wake-up. [`ClockSteps`]
//! resolves when the wall clock has been stepped, and the controller runs a pass then.
//!
//! Two detectors, because neither sees every step:
//!
//! - Linux: a `timerfd` on `CLOCK_REALTIME` armed far in the future with
//!   `TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET`. The kernel cancels it, and its read
//!   fails with `ECANCELED`, whenever the realtime clock is set (`clock_settime`,
//!   `settimeofday`, an NTP step), whatever the size of the step. It is then re-armed.
//! - Everywhere: every `SAMPLE_EVERY`, the wall clock's offset from the monotonic clock
//!   is compared with the last one. Steps above [`THRESHOLD`] count. NTP's slewing moves
//!   the offset by at most 0.5 ms a second, so it never counts. This is what sees a clock
//!   faked inside the process (libfaketime), which the kernel does not know about;
//!   sampling well under a second keeps such a step's conditions within the second of an
//!   edge (docs/design.md, Timing) or little more, for a clock reading per sample while
//!   idle.
//!
//! The step's size is that change of offset (for a timerfd wake-up too, since the kernel
//! says only that the clock was set).

use std::time::{Duration, Instant, SystemTime};

use jiff::SignedDuration;

/// A change of the wall clock's offset from the monotonic clock within one sample
/// interval that is a step, not drift or slewing.
pub const THRESHOLD: Duration = Duration::from_millis(500);
/// How often the offset is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// Resolves, through [`ClockSteps::stepped`], each time the wall clock is stepped.
pub struct ClockSteps {
    /// The monotonic instant the offsets are measured against.
    base: Instant,
    /// The wall clock minus the monotonic clock at the last look.
    offset: SignedDuration,
    sampler: tokio::time::Interval,
    #[cfg(target_os = "linux")]
    timer: Option<linux::CancelOnSet>,
}

impl ClockSteps {
    /// Starts watching. Must be called within a tokio runtime. Without a timerfd (not
    /// Linux, or the kernel refused one: the error is returned alongside), steps are seen
    /// by sampling alone.
    pub fn new() -> (Self, Option<std::io::Error>) {
        let base = Instant::now();
        let mut sampler = tokio::time::interval(SAMPLE_EVERY);
        sampler.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        #[cfg(target_os = "linux")]
        let (timer, error) = match linux::CancelOnSet::new() {
            Ok(timer) => (Some(timer), None),
            Err(e) => (None, Some(e)),
        };
        #[cfg(not(target_os = "linux"))]
        let error = None;
        let steps = ClockSteps {
            base,
            offset: offset_from(base),
            sampler,
            #[cfg(target_os = "linux")]
            timer,
        };
        (steps, error)
    }

    /// Waits for the next step of the wall clock; its size (positive: forward).
    ///
    /// Cancel-safe: it can be a `tokio::select!` arm re-created on every loop.
    pub async fn stepped(&mut self) -> SignedDuration {
        loop {
            #[cfg(target_os = "linux")]
            let timer = &mut self.timer;
            let set = async move {
                match timer {
                    Some(timer) => timer.set().await,
                    None => std::future::pending().await,
                }
            };
            #[cfg(not(target_os = "linux"))]
            let set = std::future::pending::<()>();
            let told = tokio::select! {
                () = set => true,
                _ = self.sampler.tick() => false,
            };
            let now = offset_from(self.base);
            let step = now - self.offset;
            self.offset = now;
            if told || step.unsigned_abs() > THRESHOLD {
                return step;
            }
        }
    }
}

/// The wall clock minus the time elapsed on the monotonic clock since `base`.
fn offset_from(base: Instant) -> SignedDuration {
    // `SystemTime` is read through libc, as every other reading of the time in kumaco:
    // a clock faked in the process is the one to compare.
    let wall = match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX),
        Err(e) => -SignedDuration::try_from(e.duration()).unwrap_or(SignedDuration::MAX),
    };
    let elapsed = SignedDuration::try_from(base.elapsed()).unwrap_or(SignedDuration::MAX);
    wall - elapsed
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::OwnedFd;

    use rustix::io::Errno;
    use rustix::time::{
        ClockId, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec,
    };
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// Far enough that it never expires in practice; if a step does carry the clock past
    /// it, the expiry is read and the timer re-armed like a cancellation.
    const YEARS_AHEAD: i64 = 10 * 365 * 24 * 3600;

    /// A timerfd the kernel cancels when `CLOCK_REALTIME` is set.
    pub struct CancelOnSet {
        fd: AsyncFd<OwnedFd>,
    }

    impl CancelOnSet {
        pub fn new() -> std::io::Result<Self> {
            let fd = rustix::time::timerfd_create(
                TimerfdClockId::Realtime,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?;
            arm(&fd)?;
            // SAFETY: an `OwnedFd` is an open descriptor that stays open, and is the same,
            // for as long as it is owned, here by the `AsyncFd`.
            let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
            Ok(CancelOnSet { fd })
        }

        /// Resolves when the realtime clock was set (and re-arms the timer).
        pub async fn set(&mut self) {
            loop {
                let Ok(mut guard) = self.fd.readable().await else {
                    // The reactor is gone: the runtime is shutting down.
                    return std::future::pending().await;
                };
                let mut expirations = [0u8; 8];
                match rustix::io::read(guard.get_inner(), &mut expirations) {
                    Err(Errno::AGAIN) => guard.clear_ready(),
                    // ECANCELED: the clock was set. Read expirations: carried past the
                    // far deadline, by a step too. Either way: re-arm, and report.
                    Ok(_) | Err(Errno::CANCELED) => {
                        guard.clear_ready();
                        // Re-arming cannot fail on a timerfd this module created with a
                        // valid time; if it ever did, the sampler still sees steps.
                        let _ = arm(guard.get_inner());
                        return;
                    }
                    Err(_) => guard.clear_ready(),
                }
            }
        }
    }

    /// Arms `fd` at an absolute realtime instant years ahead, cancelled on any set.
    fn arm(fd: &OwnedFd) -> std::io::Result<()> {
        // The kernel's realtime clock (not libc's, which a preloaded library may fake):
        // the deadline is compared with the kernel's.
        let now = rustix::time::clock_gettime(ClockId::Realtime);
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: now.tv_sec.saturating_add(YEARS_AHEAD),
                tv_nsec: 0,
            },
        };
        rustix::time::timerfd_settime(
            fd,
            TimerfdTimerFlags::ABSTIME | TimerfdTimerFlags::CANCEL_ON_SET,
            &spec,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_steady_clock_is_not_a_step() {
        let (mut steps, error) = ClockSteps::new();
        assert!(error.is_none(), "no timerfd: {error:?}");
        let waited = tokio::time::timeout(Duration::from_millis(2500), steps.stepped()).await;
        assert!(
            waited.is_err(),
            "a step reported on a steady clock: {waited:?}"
        );
    }

    #[test]
    fn the_offset_is_steady_across_a_sleep() {
        let base = Instant::now();
        let before = offset_from(base);
        std::thread::sleep(Duration::from_millis(50));
        let drift = (offset_from(base) - before).unsigned_abs();
        assert!(drift < Duration::from_millis(20), "{drift:?}");
    }
}
