//! What the condition's messages record for later passes and the forecast: a start's
//! instant and boot ID (a new one means the node rebooted), how long a maintenance was in
//! progress, and how long the node took to be available again after it. Written into the
//! message and read back from it, so that any instance derives them from the node alone.
//!
//! **To the millisecond.** A `lastTransitionTime` reads back to the second (the API keeps
//! no more), so a duration between two of them is off by up to a second either way: for
//! maintenances a few seconds long, more than the forecast can afford. So the start's
//! message records its instant to the millisecond ([`STARTED_AT`]), the end's message
//! carries it on with the duration from it to the end, and the recovery is measured from
//! that end. The millisecond, not the nanosecond: finer than kumaco's own reaction to a
//! change, and short to read. An end whose start recorded no instant (started by a kumaco
//! before this record) is measured between the `lastTransitionTime`s as before, to the
//! second, and records no start.

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

/// How a start's message records its instant, and an end's message the instant its
/// maintenance started: `started at 2026-12-07T14:25:03.512Z` (RFC 3339, UTC, to the
/// millisecond). In a start's message it comes first, before the boot ID and the windows
/// (whose list a cut may shorten); in an end's, right before the duration measured from
/// it: `started at 2026-12-07T14:25:03.512Z, completed after 4.5s`.
pub const STARTED_AT: &str = "started at";

/// `now` to the millisecond: how precisely a start is recorded, and an end and a recovery
/// measured.
pub(super) fn millis(now: Timestamp) -> Timestamp {
    Timestamp::from_millisecond(now.as_millisecond()).unwrap_or(now)
}

/// How a message records the start `at` (to the millisecond already): [`STARTED_AT`] and
/// the instant.
pub(super) fn start_record(at: Timestamp) -> String {
    format!("{STARTED_AT} {at:.3}")
}

/// When the maintenance started, as `message` records it: a start's message, or an end's
/// that records a duration ([`STARTED_AT`]). Both give the same instant for the same
/// maintenance, the end carrying the start's record on as it was written. `None` for a
/// message that records none (written by a kumaco before this record, or a reason to
/// wait). No allocation, as for [`recorded_boot_id`].
pub fn recorded_start(message: &str) -> Option<Timestamp> {
    // `STARTED_AT` and its space, spelled out: no allocation per node and pass.
    const OPEN: &str = "started at ";
    debug_assert_eq!(OPEN, format!("{STARTED_AT} "));
    let (_, rest) = message.split_once(OPEN)?;
    rest[..token_len(rest)].parse().ok()
}

/// When the maintenance whose end `message` reports ended, to the millisecond: its
/// recorded start plus its recorded duration. `None` for an end that records no start.
pub fn recorded_end(message: &str) -> Option<Timestamp> {
    let start = recorded_start(message)?;
    start.checked_add(recorded_duration(message)?).ok()
}

/// What an end's message records of the maintenance `current` (the node's True condition)
/// ended at `now`, after what it says of the end: `; started at <start>, completed after
/// <duration>` (`verb` [`COMPLETED_AFTER`] or [`STOPPED_AFTER`]), measured from the start
/// the True message recorded to `now`, to the millisecond. Where it recorded none, from
/// its `lastTransitionTime` to `now` to the second, with no start: `; completed after
/// 6m12s`, as kumaco wrote it before. Nothing without either.
pub(super) fn end_record(current: &Condition, now: Timestamp, verb: &str) -> String {
    let measured = match recorded_start(&current.message) {
        Some(start) => Some((Some(start), millis(now).duration_since(start))),
        None => (current.last_transition_time)
            .map(|since| (None, whole_seconds(now).duration_since(since))),
    };
    match measured {
        Some((start, lasted)) => {
            let from = start.map(|s| format!("{}, ", start_record(s)));
            let lasted = fmt_duration(lasted.max(SignedDuration::ZERO));
            format!("; {}{verb} {lasted}", from.unwrap_or_default())
        }
        None => String::new(),
    }
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
    let len = token_len(rest);
    let token = &rest[..len];
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let d = crate::duration::parse(token).ok()?.to_signed();
    (!d.is_negative()).then_some((d, at + len))
}

/// How long the record at the start of `rest` is: up to what ends one in a message.
fn token_len(rest: &str) -> usize {
    rest.find([',', ';', ' ', ')']).unwrap_or(rest.len())
}

/// Feeds `piece` the parts of `message` that stay the same when a pass derives it again
/// a moment later: all but the instants and durations it records ([`STARTED_AT`],
/// [`COMPLETED_AFTER`], [`STOPPED_AFTER`], [`RECOVERED_AFTER`]), each measured anew at
/// each pass. What a write refused for good is known by (`pass::Write::fingerprint`): a
/// start or an end derived again for the same node is the same write, not sent again
/// for its later instant alone.
pub fn unmeasured(message: &str, mut piece: impl FnMut(&str)) {
    const MARKERS: [&str; 4] = [STARTED_AT, COMPLETED_AFTER, STOPPED_AFTER, RECOVERED_AFTER];
    let mut rest = message;
    loop {
        let next = (MARKERS.iter())
            .filter_map(|m| Some(rest.find(m)? + m.len()))
            .min();
        let Some(end) = next else {
            piece(rest);
            return;
        };
        piece(&rest[..end]);
        let after = &rest[end..];
        let value = after.strip_prefix(' ').unwrap_or(after);
        rest = &value[token_len(value)..];
    }
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
/// after it, its message adds how long that took: from the end its message records to
/// now, to the millisecond ([`recorded_end`]); for an end that records no start, from its
/// `lastTransitionTime` to now, to the second. From then on the message says so, and the
/// end is kept: one write, whoever runs the pass, derived from the node alone. Only an end
/// that recorded its duration gets it: on an end written before kumaco recorded
/// durations, now minus the end would be an age, not a recovery. A record the message
/// bound would cut is not written at all.
pub(super) fn keep_end(c: &Condition, node: &NodeState, now: Timestamp) -> Desired {
    let recovering = !c.is_true()
        && is_end(c)
        && node.availability.unavailable().is_none()
        && recorded_recovery(&c.message).is_none();
    if !recovering {
        return Desired::keep(c);
    }
    // Read only now: once per maintenance, not for every node at every pass.
    let ended = match recorded_end(&c.message) {
        Some(end) => Some((end, millis(now))),
        None => c.last_transition_time.map(|end| (end, whole_seconds(now))),
    };
    let Some((ended, now)) = ended else {
        return Desired::keep(c);
    };
    let recovery = now.duration_since(ended).max(SignedDuration::ZERO);
    let d = desired(false, &c.reason, with_recovery(&c.message, recovery));
    if recorded_recovery(&d.message).is_some() {
        d
    } else {
        Desired::keep(c)
    }
}

/// `now` as a `lastTransitionTime` written now reads back (`conditions::to_apply`).
fn whole_seconds(now: Timestamp) -> Timestamp {
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
