//! Fuzz `kumaco::schedule::parse`: no input may panic it, and whatever it accepts must
//! answer `next_after` (and the DST lint) without panicking, strictly after the instant
//! asked about, on ordinary instants and at the edges of jiff's range.
#![no_main]

use kumaco_core::schedule::{self, TimeZone, Timestamp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &str| {
    let Ok(parsed) = schedule::parse(input, &TimeZone::UTC) else {
        return;
    };
    let _ = parsed.to_string();
    for second in [0, 1_700_000_000, 2_000_000_000, -1_000_000_000] {
        let t = Timestamp::from_second(second).expect("in range");
        if let Some(next) = parsed.next_after(t) {
            assert!(next > t, "{input:?}: next_after({t}) = {next}");
        }
    }
    for t in [Timestamp::MIN, Timestamp::MAX] {
        let _ = parsed.next_after(t);
    }
    let from = Timestamp::from_second(1_700_000_000).expect("in range");
    let until = Timestamp::from_second(1_800_000_000).expect("in range");
    let _ = parsed.dst_anomalies(from, until);
});
