//! Helpers for the tests of the core and of the shell: compiled for the core's own tests
//! and with the `testing` feature (the shell's dev-dependency turns it on), never in the
//! binary.

use jiff::Timestamp;

/// The instant `s` writes in RFC 3339 (`2026-01-01T02:00:00Z`); a test's typo panics
/// naming it.
pub fn ts(s: &str) -> Timestamp {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} is not an RFC 3339 instant: {e}"))
}
