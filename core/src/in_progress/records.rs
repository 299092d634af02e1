//! What the condition's messages record for later passes and the forecast: a start's
//! boot ID (a new one means the node rebooted), how long a maintenance was in progress,
//! and how long the node took to be available again after it. Written into the message
//! and read back from it, so that any instance derives them from the node alone.

use jiff::{SignedDuration, Timestamp};

use super::{NodeState, desired};
use crate::conditions::{Condition, Desired};
use crate::reasons;

/// How a start's message records the node's boot ID: `(boot ID <id>)`.
pub const BOOT_ID: &str = "boot ID";

/// Boot IDs are UUIDs; anything else that reads back unambiguously from a message is
/// recorded too. Others (a `)` inside, overlong) are not: no reboot detection there.
fn recordable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// How a start's message records `boot_id`: ` (boot ID <id>)`, or nothing for an ID
/// that would not read back.
pub(super) fn boot_id_record(boot_id: Option<&str>) -> String {
    boot_id
        .filter(|id| recordable(id))
        .map(|id| format!(" ({BOOT_ID} {id})"))
        .unwrap_or_default()
}

/// The boot ID a start recorded in `message`, if any.
pub fn recorded_boot_id(message: &str) -> Option<&str> {
    // `BOOT_ID` with its opening parenthesis, spelled out: no allocation per node and pass.
    const OPEN: &str = "(boot ID ";
    debug_assert_eq!(OPEN, format!("({BOOT_ID} "));
    let (_, rest) = message.split_once(OPEN)?;
    let (id, _) = rest.split_once(')')?;
    recordable(id).then_some(id)
}

/// How an end's message records how long the maintenance was in progress: `completed
/// after 6m12s` when a required condition cleared or the node rebooted, `stopped after
/// 3h0m0s` when its window ended it. Early in the message, so no cut removes it.
pub const COMPLETED_AFTER: &str = "completed after";
/// See [`COMPLETED_AFTER`].
pub const STOPPED_AFTER: &str = "stopped after";
/// How an end's message records how long after the end the node was available again
/// (Ready and uncordoned, so it no longer held a slot): `recovered after 1m3s`, right
/// after the duration.
pub const RECOVERED_AFTER: &str = "recovered after";

/// How long the maintenance whose end `message` reports was in progress, if it says
/// ([`COMPLETED_AFTER`], [`STOPPED_AFTER`]).
pub fn recorded_duration(message: &str) -> Option<SignedDuration> {
    duration_record(message).map(|(d, _)| d)
}

/// How long after the end `message` reports the node was available again, if it says
/// ([`RECOVERED_AFTER`]).
pub fn recorded_recovery(message: &str) -> Option<SignedDuration> {
    recorded(message, RECOVERED_AFTER).map(|(d, _)| d)
}

fn duration_record(message: &str) -> Option<(SignedDuration, usize)> {
    recorded(message, COMPLETED_AFTER).or_else(|| recorded(message, STOPPED_AFTER))
}

/// The Go duration after `marker` and a space in `message`, and the byte offset where it
/// ends. No allocation for what kumaco writes, as for [`recorded_boot_id`]: it is read
/// from every node's condition.
fn recorded(message: &str, marker: &str) -> Option<(SignedDuration, usize)> {
    let at = message.find(marker)? + marker.len() + 1;
    let rest = message.get(at - 1..)?.strip_prefix(' ')?;
    let len = rest.find([',', ';', ' ', ')']).unwrap_or(rest.len());
    let token = &rest[..len];
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let d = crate::duration::parse(token).ok()?.to_signed();
    (!d.is_negative()).then_some((d, at + len))
}

/// How the answer outside any window records why the node had not started when its
/// window closed: `no active maintenance window selects this node; it had waited:
/// WaitingForSlot: ...`. The window's closing notice names each node it left and why
/// (`crate::transitions`); written once, with the change of reason, and kept after.
pub const HAD_WAITED: &str = "it had waited:";

/// The answer outside any window for a node whose condition is `c`, a "why not" or a
/// blackout's: what it waited for, recorded.
pub(super) fn had_waited(c: &Condition) -> String {
    let message = format!(
        "no active maintenance window selects this node; {HAD_WAITED} {}: {}",
        c.reason, c.message
    );
    crate::conditions::bounded(message, MAX_WAITED_BYTES)
}

/// Longest answer [`had_waited`] writes, in bytes: a gate's message is bounded below it.
const MAX_WAITED_BYTES: usize = 1024;

/// What the node had waited for when its window closed, as [`had_waited`] recorded it:
/// the reason and its message.
pub fn waited(c: &Condition) -> Option<(&str, &str)> {
    if c.is_true() || c.reason != reasons::NO_ACTIVE_MAINTENANCE_WINDOW {
        return None;
    }
    let (_, rest) = c.message.split_once(HAD_WAITED)?;
    rest.trim_start().split_once(": ")
}

/// `message` with `recovery` recorded right after its duration; unchanged without one.
pub(super) fn with_recovery(message: &str, recovery: SignedDuration) -> String {
    match duration_record(message) {
        Some((_, end)) => format!(
            "{}, {RECOVERED_AFTER} {}{}",
            &message[..end],
            fmt_duration(recovery),
            &message[end..]
        ),
        None => message.to_string(),
    }
}

/// A maintenance's end, kept as it is, except once: when the node is first seen available
/// after it, its message adds how long that took (from the end's `lastTransitionTime` to
/// now). From then on the message says so, and the end is kept: one write, whoever runs
/// the pass, derived from the node alone. Only an end that recorded its duration gets it:
/// on an end written before kumaco recorded durations, now minus the end would be an age,
/// not a recovery. A record the message bound would cut is not written at all.
pub(super) fn keep_end(c: &Condition, node: &NodeState, now: Timestamp) -> Desired {
    let recovering = !c.is_true()
        && is_end(c)
        && node.availability.unavailable().is_none()
        && recorded_recovery(&c.message).is_none();
    let Some(ended) = c.last_transition_time.filter(|_| recovering) else {
        return Desired::keep(c);
    };
    let recovery = whole_seconds(now)
        .duration_since(ended)
        .max(SignedDuration::ZERO);
    let d = desired(false, &c.reason, with_recovery(&c.message, recovery));
    if recorded_recovery(&d.message).is_some() {
        d
    } else {
        Desired::keep(c)
    }
}

/// `now` as a `lastTransitionTime` written now reads back (`conditions::to_apply`).
pub(super) fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// `(recorded, current)` when the node in progress (`current` is its True condition)
/// shows another boot ID than the one its start recorded.
pub(super) fn rebooted<'a>(
    current: &'a Condition,
    boot_id: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    let before = recorded_boot_id(&current.message)?;
    let now = boot_id.filter(|id| recordable(id))?;
    (before != now).then_some((before, now))
}

/// The end of a maintenance, by any of the rules that end one.
fn is_end(c: &Condition) -> bool {
    reasons::ends_maintenance(&c.reason)
}

pub(super) fn fmt_duration(d: SignedDuration) -> String {
    crate::duration::GoDuration::from_nanos(
        d.as_nanos().clamp(i64::MIN as i128, i64::MAX as i128) as i64
    )
    .to_string()
}
