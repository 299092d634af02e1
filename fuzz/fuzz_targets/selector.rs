//! Fuzz `kumaco::selector::parse`: it must never panic, and whatever it accepts must print
//! (as Go's `Selector.String()`) to a string that parses back to an equal selector.
#![no_main]

use kumaco_core::selector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &str| {
    if let Ok(parsed) = selector::parse(input) {
        let printed = parsed.to_string();
        assert_eq!(
            selector::parse(&printed),
            Ok(parsed),
            "{input:?} parsed, printed as {printed:?}, which parses differently"
        );
    }
});
