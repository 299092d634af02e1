//! Stable hashes: the same value in every process, replica and version, so that they can
//! name things in the cluster (the configuration hash, event names).

use std::collections::BTreeMap;

use crate::window::WindowId;

/// FNV-1a, 64 bits.
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// A string and a separator, so that ("ab", "c") and ("a", "bc") differ.
    pub fn write_str(&mut self, s: &str) {
        self.write(s.as_bytes());
        self.write(&[0]);
    }

    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// `<base>.<hash>`: an object name fixed by what it names (an event about `base`, a window
/// ConfigMap or a Node), valid as a DNS subdomain: at most 253 characters, `base` cut to
/// leave room for the hash, and a cut never ending in a separator.
pub fn object_name(base: &str, hash: u64) -> String {
    let mut prefix: String = base.chars().take(253 - 17).collect();
    while prefix.ends_with(['.', '-']) {
        prefix.pop();
    }
    format!("{prefix}.{hash:016x}")
}

/// The hash of one window ConfigMap's identity and data.
pub fn window_data(id: &WindowId, data: &BTreeMap<String, String>) -> u64 {
    let mut h = Fnv::default();
    h.write_str(&id.namespace);
    h.write_str(&id.name);
    for (k, v) in data {
        h.write_str(k);
        h.write_str(v);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_data_is_stable_and_sensitive() {
        let id = WindowId {
            namespace: "a".into(),
            name: "b".into(),
        };
        let mut data = BTreeMap::new();
        data.insert("duration".to_string(), "1h".to_string());
        let h1 = window_data(&id, &data);
        assert_eq!(h1, window_data(&id, &data));
        // Pinned: the hash is exported and names events; it must not change by accident.
        assert_eq!(h1, 0xb42b_1356_0b35_a6cd, "{h1:#x}");
        data.insert("duration".to_string(), "2h".to_string());
        assert_ne!(h1, window_data(&id, &data));
    }
}
