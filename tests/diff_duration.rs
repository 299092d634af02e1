//! Differential test: `kumaco::duration` against Go's `time.ParseDuration` and
//! `Duration.String()`, run by the oracle in `testenv/oracle`.
//!
//! Inputs come from proptest strategies, generated in bulk from one seed and sent to one
//! oracle process in batches. Both sides must agree on accept/reject, on the value in
//! nanoseconds, on `String()`, and on the kind of error (unknown unit, missing unit, or
//! anything else Go calls "invalid duration").
//!
//! `KUMACO_DIFF_CASES` sets the number of cases (default 100,000); `KUMACO_DIFF_SEED`
//! replays a run (the seed is printed at the start of every run).

use std::time::Instant;

use kumaco::duration::{self, DurationError, GoDuration};
use proptest::prelude::*;
use testkit::diff::draw;
use testkit::oracle::{Answer, Oracle, Request};

const DEFAULT_CASES: usize = 100_000;
const BATCH: usize = 5_000;

#[test]
fn durations_agree_with_go() {
    let run = testkit::diff::DiffRun::from_env("diff_duration", DEFAULT_CASES);
    let cases = run.cases;

    let started = Instant::now();
    let mut runner = run.runner();
    let strategy = duration_input();
    let mut oracle = Oracle::start().expect("starting the Go oracle");
    let mut mismatches = Vec::new();
    let mut compared = 0;
    let mut accepted = 0;
    while compared < cases {
        let inputs: Vec<String> = draw(&mut runner, &strategy, BATCH.min(cases - compared));
        let requests: Vec<Request> = inputs
            .iter()
            .map(|input| Request::Duration {
                input: input.clone(),
            })
            .collect();
        let answers = oracle.ask(&requests).expect("asking the Go oracle");
        for (input, go) in inputs.iter().zip(&answers) {
            let ours = duration::parse(input);
            accepted += usize::from(go.ok);
            if let Some(why) = disagreement(go, &ours) {
                mismatches.push(format!(
                    "input {input:?}: {why}\n    go:   {go:?}\n    rust: {ours:?}"
                ));
            }
        }
        compared += inputs.len();
    }

    eprintln!(
        "diff_duration: compared {compared} cases with Go in {:.1?} ({accepted} accepted by \
         Go, {} rejected), {} mismatches",
        started.elapsed(),
        compared - accepted,
        mismatches.len()
    );
    run.assert_agree("inputs", compared, &mismatches);
}

/// What differs between Go's answer and ours, if anything.
fn disagreement(go: &Answer, ours: &Result<GoDuration, DurationError>) -> Option<String> {
    match (go.ok, ours) {
        (true, Ok(d)) => {
            if go.nanos != Some(d.as_nanos()) {
                return Some("different value".into());
            }
            if go.string.as_deref() != Some(d.to_string().as_str()) {
                return Some("different String()".into());
            }
            None
        }
        (false, Err(e)) => {
            let go_error = go.error.as_deref().unwrap_or_default();
            let go_kind = if go_error.contains("unknown unit") {
                "unknown unit"
            } else if go_error.contains("missing unit") {
                "missing unit"
            } else {
                "invalid duration"
            };
            let our_kind = match e {
                DurationError::UnknownUnit { .. } => "unknown unit",
                DurationError::MissingUnit { .. } => "missing unit",
                _ => "invalid duration",
            };
            (go_kind != our_kind).then(|| format!("Go says {go_kind}, we say {our_kind}"))
        }
        (true, Err(_)) => Some("Go accepts, we reject".into()),
        (false, Ok(_)) => Some("Go rejects, we accept".into()),
    }
}

/// Everything the generator produces: grammar-shaped durations with awkward parts,
/// values at the i64 edges, Go's own formatting of random values, and junk.
fn duration_input() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => segmented(),
        2 => near_the_limits(),
        2 => any::<i64>().prop_map(|n| GoDuration::from_nanos(n).to_string()),
        1 => prop_oneof![Just(-1i64), Just(1i64)].prop_flat_map(|sign| {
            (0..=i64::MAX).prop_map(move |n| GoDuration::from_nanos(sign * n).to_string())
        }),
        2 => "[-+.0-9nsuµμmhd \t]{0,16}",
        1 => "\\PC{0,12}",
        1 => prop::sample::select(FIXED.to_vec()).prop_map(str::to_owned),
    ]
}

/// Hand-picked corners, so every run covers them whatever the seed.
const FIXED: &[&str] = &[
    "",
    "0",
    "+0",
    "-0",
    "00",
    "0.0",
    "-",
    "+",
    ".",
    "-.",
    ".s",
    "+.s",
    "5.s",
    ".5s",
    "1d",
    "1h ",
    " 1h",
    "1H",
    "1e3s",
    "1µs",
    "1μs",
    "1us",
    "9223372036854775807ns",
    "9223372036854775808ns",
    "-9223372036854775808ns",
    "-9223372036854775809ns",
    "2562047h47m16.854775807s",
    "2562047h47m16.854775808s",
    "-2562047h47m16.854775808s",
    "-2562047h47m16.854775809s",
    "9223372036854775808ns9223372036854775808ns",
    "-9223372036854775808ns9223372036854775808ns",
    "0.3333333333333333333h",
    "0.99999999999999999999999999999999h",
    "3000000h",
    "2562048h",
];

fn unit() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "ns", "us", "µs", "μs", "ms", "s", "m", "h", // valid
        "", "d", "H", "S", "Ms", "sec", "min", "µ", "μ", "u", "e", "ms ", "h\t", " ", "ns\n", "m+",
        "-", "h-",
    ])
}

fn digits(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::string::string_regex(&format!("[0-9]{{0,{max}}}")).expect("regex"),
        1 => proptest::string::string_regex(&format!("0{{1,4}}[0-9]{{0,{max}}}")).expect("regex"),
    ]
}

/// `[sign] (int [. [frac]] unit)+`, mostly valid, with wrong parts mixed in.
fn segmented() -> impl Strategy<Value = String> {
    let segment = (
        digits(20),
        prop::option::weighted(0.4, digits(30)),
        unit(),
        prop::sample::select(vec!["", "", "", "", "", "", " ", "."]),
    )
        .prop_map(|(int, frac, unit, junk)| match frac {
            Some(frac) => format!("{int}.{frac}{unit}{junk}"),
            None => format!("{int}{unit}{junk}"),
        });
    (
        prop::sample::select(vec!["", "", "", "-", "+", "--", " "]),
        prop::collection::vec(segment, 1..5),
    )
        .prop_map(|(sign, segments)| format!("{sign}{}", segments.concat()))
}

/// Integer parts at, just under and just over what fits for each unit, with fractions
/// that push the total over the edge or not.
fn near_the_limits() -> impl Strategy<Value = String> {
    let units = [
        ("ns", 1u64),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    (
        prop::sample::select(units.to_vec()),
        -3i64..=3,
        prop::option::of("[0-9]{0,25}"),
        prop::sample::select(vec!["", "-", "+"]),
        prop::option::of(prop::sample::select(vec![
            "0ns",
            "1ns",
            "5ns",
            "0.5ns",
            "1us",
            "1h",
            "9223372036854775808ns",
        ])),
    )
        .prop_map(|((name, nanos), delta, frac, sign, extra)| {
            let edge = (1u64 << 63) / nanos;
            let int = edge.saturating_add_signed(delta);
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{sign}{int}{frac}{name}{}", extra.unwrap_or_default())
        })
}
