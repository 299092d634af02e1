//! ConfigMap data to window: any data must give a window or a list of errors, never a
//! panic, and a window must answer the controller's questions without panicking.
#![no_main]

use std::collections::BTreeMap;

use kumaco_core::schedule::{TimeZone, Timestamp};
use kumaco_core::window::{Window, WindowId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, String, String, Option<String>, i64)| {
    let (start, duration, selector, blackout, at) = input;
    let mut data = BTreeMap::new();
    data.insert("startTime".to_string(), start);
    data.insert("duration".to_string(), duration);
    data.insert("nodeSelector".to_string(), selector);
    if let Some(b) = blackout {
        data.insert("blackout".to_string(), b);
    }
    let id = WindowId {
        namespace: "fuzz".into(),
        name: "w".into(),
    };
    if let Ok(w) = Window::from_data(id, &data, &TimeZone::UTC) {
        let t =
            Timestamp::from_second(at.rem_euclid(4_102_444_800)).unwrap_or(Timestamp::UNIX_EPOCH);
        let _ = w.is_active(t);
        let _ = w.latest_active(t);
        let _ = w.next_edge_after(t);
        let _ = w.lint(t);
        let _ = w.selector.matches(&BTreeMap::new());
    }
});
