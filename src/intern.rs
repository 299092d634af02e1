//! Strings shared across the node cache: label keys and values.
//!
//! Most label keys and values repeat on every node (`topology.kubernetes.io/zone=a`,
//! `kubernetes.io/os=linux`, an instance type, a kubelet version), so storing each as
//! its own `String` per node made labels most of a cached node's memory. Interned, each
//! distinct string is kept once and a node holds 16-byte handles to it.
//!
//! The pool forgets strings no node holds any more, so it stays within twice the distinct
//! strings in use (plus a small floor): each time it has doubled since the last sweep, the
//! next insertion sweeps out every string only the pool still holds. The sweep's cost is
//! proportional to the pool, and a pool must double between sweeps, so it costs O(1) per
//! insertion over time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Below this size the pool is never swept: sweeping a small pool saves nothing.
const SWEEP_FLOOR: usize = 1024;

/// A pool of shared strings.
#[derive(Debug)]
pub struct Pool {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    strings: HashSet<Arc<str>>,
    sweep_at: usize,
}

impl Pool {
    pub fn new() -> Self {
        Pool {
            inner: Mutex::new(Inner {
                strings: HashSet::new(),
                sweep_at: SWEEP_FLOOR,
            }),
        }
    }

    /// The pooled copy of `s`.
    pub fn intern(&self, s: &str) -> Arc<str> {
        // A panic while holding the lock cannot leave the set inconsistent (every
        // operation on it is a single call), so a poisoned lock is still usable.
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = inner.strings.get(s) {
            return shared.clone();
        }
        if inner.strings.len() >= inner.sweep_at {
            inner.strings.retain(|s| Arc::strong_count(s) > 1);
            inner.sweep_at = (inner.strings.len() * 2).max(SWEEP_FLOOR);
        }
        let shared: Arc<str> = Arc::from(s);
        inner.strings.insert(shared.clone());
        shared
    }

    /// How many distinct strings the pool holds now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .strings
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_allocation() {
        let pool = Pool::new();
        let a = pool.intern("topology.kubernetes.io/zone");
        let b = pool.intern("topology.kubernetes.io/zone");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(pool.len(), 1);
        assert!(!Arc::ptr_eq(&a, &pool.intern("kubernetes.io/os")));
    }

    #[test]
    fn strings_no_one_holds_are_forgotten_and_the_pool_stays_bounded() {
        let pool = Pool::new();
        let kept: Vec<Arc<str>> = (0..10).map(|i| pool.intern(&format!("kept-{i}"))).collect();
        // A stream of unique strings nobody keeps (hostnames of nodes long gone).
        for i in 0..100_000 {
            drop(pool.intern(&format!("gone-{i}")));
            assert!(
                pool.len() <= 2 * SWEEP_FLOOR + 1,
                "pool grew to {}",
                pool.len()
            );
        }
        for (i, s) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(s, &pool.intern(&format!("kept-{i}"))));
        }
    }
}
