//! Fuzz `kumaco::duration::parse`: it must never panic, and whatever it accepts must print
//! (as Go's `Duration.String()`) to a string that parses back to the same value.
#![no_main]

use kumaco_core::duration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &str| {
    if let Ok(parsed) = duration::parse(input) {
        let printed = parsed.to_string();
        assert_eq!(
            duration::parse(&printed),
            Ok(parsed),
            "{input:?} parsed, printed as {printed:?}, which parses differently"
        );
    }
});
