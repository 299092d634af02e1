//! The loop: one pass per wake-up (a watch event, the timer at the next window edge or
//! retry, a leadership change, a step of the wall clock, the periodic resync), until a
//! signal or, with `--exit-on-config-change`, a change of the window configuration.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing::{Instrument, debug, info, info_span, warn};

use super::reconcile::Step;
use super::{Connect, ControllerError, Exit, start};
use crate::clock::ClockSteps;
use crate::config::Settings;
use crate::leader::Leadership;
use crate::metrics::Metrics;

/// Longest sleep between passes: a safety net (steps of the wall clock are noticed at
/// once by [`ClockSteps`]).
const MAX_SLEEP: Duration = Duration::from_secs(30);

/// Runs the controller until a signal (or a config change, if so configured).
pub async fn run(
    connect: Connect,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    mut shutdown: Shutdown,
) -> Result<Exit, ControllerError> {
    // Nothing is written before the first pass: a signal while the lists come in ends
    // the start at once.
    let (mut shell, wake) = tokio::select! {
        started = start::start(connect, settings, metrics, leadership) => started?,
        () = shutdown.requested() => {
            info!("signal received while starting, stopping");
            return Ok(Exit::Signal);
        }
    };
    let (mut clock, no_timerfd) = ClockSteps::new();
    if let Some(e) = no_timerfd {
        warn!(error = %e, "no timerfd on the realtime clock: steps of the wall clock are \
                           noticed within a second, by sampling");
    }
    let mut first = true;
    // Counted from 1 in each process: every line a pass logs (its writes, events,
    // contests, pod lists) carries its number, which tells one pass's lines from the next.
    let mut passes: u64 = 0;
    loop {
        let started = Instant::now();
        passes += 1;
        let pass = info_span!("pass", pass = passes);
        let next_edge = match shell.reconcile().instrument(pass).await {
            Step::ConfigChangedExit => return Ok(Exit::ConfigChanged),
            Step::Next(t) => t,
        };
        shell
            .metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        if first {
            shell.metrics.set_ready();
            info!("ready");
            first = false;
        }
        let mut sleep = shell.settings.resync_interval.min(MAX_SLEEP);
        if let Some(t) = next_edge {
            sleep = sleep.min(until(t));
        }
        debug!(?sleep, ?next_edge, "sleeping");
        tokio::select! {
            _ = wake.notified() => {
                // Watch events come in bursts (kumaco's own writes echo back); one pass
                // for the burst is enough.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(sleep) => {}
            _ = shell.leadership.changed() => {}
            step = clock.stepped() => {
                // Every edge moved relative to the monotonic timer the sleep runs on.
                info!(step_seconds = step.as_secs_f64(),
                      "the wall clock was stepped: re-deriving the conditions now");
                shell.metrics.clock_steps.inc();
            }
            () = shutdown.requested() => {
                info!("signal received, stopping");
                shell.stop().await;
                return Ok(Exit::Signal);
            }
        }
    }
}

fn until(t: Timestamp) -> Duration {
    let d = t.duration_since(Timestamp::now());
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

/// SIGTERM (the kubelet stopping the pod) and SIGINT, listened for from the moment it is
/// made: a signal that comes while kumaco starts, or while a burst of wake-ups keeps the
/// loop busy, is kept until the loop asks. Without it the first SIGTERM of a young
/// process met the default action: an exit with the Lease held, the standby waiting out
/// its duration (tests/instances.rs met it about one run in six).
pub struct Shutdown {
    term: Signal,
    interrupt: Signal,
}

impl Shutdown {
    /// Listens from now on; main makes it first, before connecting.
    pub fn listen() -> std::io::Result<Shutdown> {
        Ok(Shutdown {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Until a signal has come (at once if one came already).
    async fn requested(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}
