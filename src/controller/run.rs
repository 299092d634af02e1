//! The loop: one pass per wake-up (a watch event, the timer at the next window edge or
//! retry, a leadership change, a step of the wall clock, the periodic resync), until a
//! signal or, with `--exit-on-config-change`, a change of the window configuration.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
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
) -> Result<Exit, ControllerError> {
    let (mut shell, wake) = start::start(connect, settings, metrics, leadership).await?;
    let (mut clock, no_timerfd) = ClockSteps::new();
    if let Some(e) = no_timerfd {
        warn!(error = %e, "no timerfd on the realtime clock: steps of the wall clock are \
                           noticed within a second, by sampling");
    }
    let mut shutdown = std::pin::pin!(shutdown_signal());
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
            _ = &mut shutdown => {
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

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
