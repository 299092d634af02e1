//! The window cache: the window ConfigMaps the watches show, parsed once per data
//! version, the configuration hash, the label keys the selectors name, and the windows
//! the watches saw deleted (kept while their `WindowEnded` is due).

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::Store;
use tracing::{info, warn};

use super::watch::{LabelKeys, Tombstones};
use crate::announce::{self, Deleted, WindowSource};
use crate::configmap;
use crate::fingerprint::Fnv;
use crate::metrics::Metrics;
use crate::selector::Selector;
use crate::window::{Window, WindowId};

pub struct WindowCache {
    stores: Vec<Store<ConfigMap>>,
    tombstones: Tombstones,
    /// What label changes matter to a pass (read by the node watch).
    label_keys: LabelKeys,
    /// The keys the policy reads (`--block-node-selector`, `--max-in-progress-per`).
    policy_keys: Vec<String>,
    node_selector: Selector,
    default_zone: TimeZone,
    /// The window ConfigMaps as last parsed, by id (parsed again when their data
    /// changes).
    pub sources: BTreeMap<WindowId, WindowSource>,
    /// Windows the watches saw deleted, for the horizon in which their `WindowEnded` is
    /// due.
    pub deleted: Vec<Deleted>,
    config_hash: Option<u64>,
}

impl WindowCache {
    pub fn new(
        stores: Vec<Store<ConfigMap>>,
        tombstones: Tombstones,
        label_keys: LabelKeys,
        policy_keys: Vec<String>,
        node_selector: Selector,
        default_zone: TimeZone,
    ) -> Self {
        WindowCache {
            stores,
            tombstones,
            label_keys,
            policy_keys,
            node_selector,
            default_zone,
            sources: BTreeMap::new(),
            deleted: Vec::new(),
            config_hash: None,
        }
    }

    /// Waits for every namespace's first list; false if a watch ended first.
    pub async fn ready(&self) -> bool {
        for s in &self.stores {
            if s.wait_until_ready().await.is_err() {
                return false;
            }
        }
        true
    }

    /// Re-reads the window ConfigMaps from the caches, parsing those whose data changed,
    /// and collects the watches' deletions. Returns whether the configuration hash
    /// changed (not counting the first load).
    pub fn load(&mut self, metrics: &Metrics, now: Timestamp) -> bool {
        let changed = self.load_windows(metrics);
        self.collect_tombstones(now);
        changed
    }

    fn load_windows(&mut self, metrics: &Metrics) -> bool {
        // The cached objects themselves: their data is read only when its hash changed.
        let mut seen = BTreeMap::new();
        for store in &self.stores {
            for cm in store.state() {
                let uid = cm.metadata.uid.clone().unwrap_or_default();
                let hash = configmap::data_hash(&cm);
                seen.insert(configmap::id(&cm), (cm, uid, hash));
            }
        }
        self.sources.retain(|id, _| {
            let keep = seen.contains_key(id);
            if !keep {
                info!(window = %id, "window ConfigMap removed: its window ends now");
            }
            keep
        });
        let mut config = Fnv::default();
        let (mut valid, mut invalid) = (0, 0);
        let empty = BTreeMap::new();
        for (id, (cm, uid, data_hash)) in seen {
            config.write_u64(data_hash);
            let fresh = self
                .sources
                .get(&id)
                .is_none_or(|s| s.data_hash != data_hash || s.uid != uid);
            if fresh {
                let data = cm.data.as_ref().unwrap_or(&empty);
                let window = Window::from_data(id.clone(), data, &self.default_zone);
                match &window {
                    Ok(w) => info!(window = %id, schedule = %w.schedule.spec(),
                                   zone = %w.schedule.zone_name(), "window loaded"),
                    Err(e) => warn!(window = %id, error = %e, "window ignored: invalid"),
                }
                self.sources.insert(
                    id.clone(),
                    WindowSource {
                        id: id.clone(),
                        uid,
                        data_hash,
                        created: cm.metadata.creation_timestamp.as_ref().map(|t| t.0),
                        window,
                    },
                );
            }
            match self.sources.get(&id).map(|s| s.window.is_ok()) {
                Some(true) => valid += 1,
                _ => invalid += 1,
            }
        }
        metrics.set_windows(valid, invalid);
        let hash = config.finish();
        metrics.config_hash.set(hash as i64);
        let changed = self.config_hash.is_some_and(|old| old != hash);
        if changed {
            info!(
                config_hash = format!("{hash:016x}"),
                "window configuration changed; state regenerated"
            );
        } else if self.config_hash.is_none() {
            info!(
                config_hash = format!("{hash:016x}"),
                windows = valid,
                invalid,
                "window configuration loaded"
            );
        }
        if self.config_hash != Some(hash) {
            *self.label_keys.write().unwrap_or_else(|e| e.into_inner()) = self.selector_keys();
        }
        self.config_hash = Some(hash);
        changed
    }

    /// The label keys `--node-selector` and every valid window's selector name.
    fn selector_keys(&self) -> HashSet<String> {
        let windows = self.sources.values().filter_map(|s| s.window.as_ref().ok());
        std::iter::once(&self.node_selector)
            .chain(windows.map(|w| &w.selector))
            .flat_map(|s| s.requirements().iter().map(|r| r.key().to_string()))
            .chain(self.policy_keys.iter().cloned())
            .collect()
    }

    /// Turns the watches' deletions into [`Deleted`] windows, kept for the horizon in
    /// which their `WindowEnded` is due.
    fn collect_tombstones(&mut self, now: Timestamp) {
        let raw = std::mem::take(&mut *self.tombstones.lock().unwrap_or_else(|e| e.into_inner()));
        for (cm, at) in raw {
            let data = cm.data.clone().unwrap_or_default();
            let uid = cm.metadata.uid.clone().unwrap_or_default();
            self.deleted.push(Deleted::of(
                configmap::id(&cm),
                uid,
                &data,
                at,
                &self.default_zone,
            ));
        }
        announce::forget_old(&mut self.deleted, now);
    }
}
