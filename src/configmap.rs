//! A window ConfigMap as kumaco keeps it in its watch cache.
//!
//! A ConfigMap may hold 1 MiB, and anyone who may write ConfigMaps in a watched
//! namespace decides how much. kumaco needs a few hundred bytes of a window, so each
//! ConfigMap is trimmed as it enters the cache (the full object is decoded, then
//! dropped): its known values cut just past [`MAX_VALUE_BYTES`] (enough for the window
//! parser to report them as too long), other keys' values emptied (their names are kept
//! for the unknown-key lint), annotations and managedFields dropped. The hash of the full
//! data, taken before the cut, travels with it so that any edit still counts.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use crate::fingerprint;
use crate::limits::MAX_VALUE_BYTES;
use crate::window::{KNOWN_KEYS, WindowId};

/// Where [`trim`] leaves the hash of the full data (never written to the API server).
const DATA_HASH: &str = "kumaco.internal/data-hash";

/// The window's id.
pub fn id(cm: &ConfigMap) -> WindowId {
    WindowId {
        namespace: cm.namespace().unwrap_or_default(),
        name: cm.name_any(),
    }
}

/// Trims `cm` to what kumaco reads; see the module documentation.
pub fn trim(cm: &mut ConfigMap) {
    let mut data = cm.data.take().unwrap_or_default();
    let hash = fingerprint::window_data(&id(cm), &data);
    for (key, value) in data.iter_mut() {
        if KNOWN_KEYS.contains(&key.as_str()) {
            cut(value, MAX_VALUE_BYTES + 1);
            value.shrink_to_fit();
        } else {
            *value = String::new();
        }
    }
    cm.data = Some(data);
    cm.binary_data = None;
    cm.metadata.managed_fields = None;
    cm.metadata.annotations = Some(BTreeMap::from([(
        DATA_HASH.to_string(),
        format!("{hash:016x}"),
    )]));
}

/// The hash of `cm`'s full data: from [`trim`] if it was trimmed, else computed.
pub fn data_hash(cm: &ConfigMap) -> u64 {
    cm.annotations()
        .get(DATA_HASH)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| {
            fingerprint::window_data(&id(cm), cm.data.as_ref().unwrap_or(&BTreeMap::new()))
        })
}

/// Cuts `s` to the first character boundary at or past `at` bytes.
fn cut(s: &mut String, at: usize) {
    if s.len() > at {
        let mut end = at;
        while !s.is_char_boundary(end) {
            end += 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Window;
    use jiff::tz::TimeZone;

    fn configmap(description: &str, junk: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "w", "namespace": "ops", "uid": "u",
                "annotations": { "big": junk },
                "managedFields": [{ "manager": "m", "operation": "Apply" }],
            },
            "data": {
                "startTime": "@daily",
                "duration": "1h",
                "nodeSelector": "",
                "description": description,
                "junk": junk,
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_huge_window_configmap_keeps_a_few_kilobytes_and_its_hash() {
        let huge = "ü".repeat(400_000);
        let mut cm = configmap(&huge, &huge);
        let full = data_hash(&cm);
        trim(&mut cm);
        let data = cm.data.as_ref().unwrap();
        let kept: usize = data.values().map(String::len).sum::<usize>()
            + cm.annotations().values().map(String::len).sum::<usize>();
        assert!(kept < 2 * MAX_VALUE_BYTES, "{kept} bytes kept");
        assert_eq!(data["junk"], "", "unknown keys keep their names only");
        assert!(cm.metadata.managed_fields.is_none());
        assert_eq!(data_hash(&cm), full);
        // Still a window, its description cut, the size still known to the lint.
        let w = Window::from_data(id(&cm), data, &TimeZone::UTC).unwrap();
        assert!(w.description.unwrap().len() <= MAX_VALUE_BYTES);
        assert_eq!(w.unknown_keys, ["junk"]);
    }

    #[test]
    fn an_edit_past_the_cut_changes_the_hash() {
        let long = "a".repeat(10_000);
        let mut one = configmap(&long, "");
        let mut two = configmap(&format!("{long}b"), "");
        trim(&mut one);
        trim(&mut two);
        assert_eq!(one.data, two.data);
        assert_ne!(data_hash(&one), data_hash(&two));
    }

    #[test]
    fn oversized_values_still_read_as_oversized() {
        let mut cm = configmap("", "");
        let long = "0 ".repeat(MAX_VALUE_BYTES);
        cm.data.as_mut().unwrap().insert("startTime".into(), long);
        trim(&mut cm);
        let err =
            Window::from_data(id(&cm), cm.data.as_ref().unwrap(), &TimeZone::UTC).unwrap_err();
        assert!(
            err.to_string()
                .contains("startTime: longer than 4096 bytes"),
            "{err}"
        );
    }
}
