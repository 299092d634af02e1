//! The forecast's tests: its rules one by one (`rules`), then the proof that it is the
//! brain's (`against_the_pass`: a property test holds it, node by node, to a simulation of
//! the same model that runs the real pass, [`pass::run`], every ten seconds), and the
//! expected completion's drawn runs (`drawn`). The shared nodes, windows and durations
//! here.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::announce::WindowSource;
use crate::conditions::Status;
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, UNDER_MAINTENANCE, find, is_true};
use crate::gates::{Gates, Hold};
use crate::in_progress::{self, Availability};
use crate::in_progress::{BlockingPod, Ceiling, GroupCeiling};
use crate::pass::{self, Rules};
use crate::peers::Peers;
use crate::reasons;
use crate::selector;
use crate::testing::ts;
use crate::window::test_window;
use proptest::prelude::*;

mod against_the_pass;
mod drawn;
mod precision;
mod rules;

const REBOOT: &str = "kured.dev/RebootRequired";
const BLOCK: &str = "kured.dev/RebootBlocked";
const ZONE: &str = "zone";

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

/// Monday 2026-01-05, 00:00 UTC.
fn monday() -> Timestamp {
    ts("2026-01-05T00:00:00Z")
}

fn condition(type_: &str, status: bool, since: Timestamp) -> Condition {
    Condition {
        type_: type_.into(),
        status: Status::from(status),
        reason: "Reported".into(),
        message: String::new(),
        last_transition_time: Some(since),
        last_heartbeat_time: None,
    }
}

/// A node of the tests, owning what a [`NodeView`] borrows.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    availability: Availability,
    pods: Vec<BlockingPod>,
    boot_id: Option<String>,
    /// The condition types kumaco wrote on it (the oracle's managedFields).
    owned: Vec<String>,
}

impl Node {
    /// A node needing a reboot since `since` minutes before Monday.
    fn needing(name: &str, zone: Option<&str>, since: i64) -> Node {
        Node {
            name: name.into(),
            labels: zone
                .map(|z| (ZONE.to_string(), z.to_string()))
                .into_iter()
                .collect(),
            conditions: vec![condition(REBOOT, true, monday() - mins(since))],
            availability: Availability::default(),
            pods: Vec::new(),
            boot_id: Some(format!("{name}-boot")),
            owned: Vec::new(),
        }
    }

    fn view(&self) -> NodeView<'_> {
        NodeView {
            name: &self.name,
            uid: &self.name,
            labels: &self.labels,
            resource_version: None,
            conditions: &self.conditions,
            owned: &self.owned,
            owned_since: None,
            owners: &[],
            availability: self.availability,
            pods: &self.pods,
            boot_id: self.boot_id.as_deref(),
            holds: &[],
            drain: None,
        }
    }
}

fn policy(ceiling: u32) -> Policy {
    Policy {
        required: vec![REBOOT.into()],
        blocking: vec![BLOCK.into()],
        ..Policy::with_ceiling(Ceiling::Count(ceiling))
    }
}

fn durations(maintenance: SignedDuration, recovery: SignedDuration) -> Durations {
    Durations::given(Quantiles::fixed(maintenance), Quantiles::fixed(recovery))
}

fn run(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Node],
    durations: &Durations,
    now: Timestamp,
) -> Forecast {
    let windows: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    forecast(
        &windows,
        policy,
        &views,
        durations,
        now,
        SignedDuration::from_hours(24 * 30),
    )
}

fn plan<'f>(f: &'f Forecast, name: &str) -> &'f Plan {
    &f.nodes.iter().find(|n| n.name == name).expect(name).plan
}

fn median<'f>(f: &'f Forecast, name: &str) -> &'f Placement {
    match plan(f, name) {
        Plan::Forecast { median, .. } => median,
        held => panic!("{name} is not forecast: {held:?}"),
    }
}

fn p90<'f>(f: &'f Forecast, name: &str) -> &'f Placement {
    match plan(f, name) {
        Plan::Forecast { p90, .. } => p90,
        held => panic!("{name} is not forecast: {held:?}"),
    }
}

/// (start, end) of a node's maintenance at the median, as `HH:MM:SS` on Monday (or
/// `+Nd HH:MM:SS` later).
fn at_median(f: &Forecast, name: &str) -> (String, String) {
    let p = median(f, name);
    (clock(p.start()), clock(p.end()))
}

fn clock(t: Option<Timestamp>) -> String {
    let Some(t) = t else {
        return "-".into();
    };
    let since = t.duration_since(monday()).as_secs();
    let (days, rest) = (since.div_euclid(86400), since.rem_euclid(86400));
    let hms = format!("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    if days == 0 {
        hms
    } else {
        format!("+{days}d {hms}")
    }
}

fn pair(start: &str, end: &str) -> (String, String) {
    (start.into(), end.into())
}

/// The nightly window of most tests: 02:00 for 2 hours.
fn nightly(selector: &str) -> Window {
    test_window("nightly", "0 2 * * *", "2h", selector, false)
}

/// Durations learned from these records (minutes), as [`learn`] gives them.
fn learned_from(maintenance: &[i64], recovery: &[i64]) -> Durations {
    let sampled = |m: &[i64]| {
        let mut recorded: Vec<SignedDuration> = m.iter().map(|&m| mins(m)).collect();
        let quantiles = Quantiles::of(&mut recorded).expect("records");
        (quantiles, recorded)
    };
    let (m, maintenance) = sampled(maintenance);
    let (r, recovery) = sampled(recovery);
    Durations {
        maintenance: m,
        recovery: r,
        recorded: Recorded {
            maintenance,
            recovery,
        },
    }
}
