//! The fence: a leader writes only from caches listed during its term.
//!
//! A replica that becomes leader may hold caches that stopped following the cluster
//! (watches on connections the network swallowed, a standby's cache behind), and an
//! apply derived from them undoes what the previous leader wrote. So the controller
//! writes and posts nothing until every cache comes from a list asked for after the term
//! began; once per term, a new leader asks each stale cache to list again, on a new
//! client (the connections that kept it behind must not hold up the list meant to catch
//! up). A list is a consistent read: it shows every write of the earlier leaders, which
//! all were sent before the term began (docs/design.md, "Level-triggered").

use std::time::Instant;

use kube::Client;
use tracing::{info, warn};

use super::Connect;
use super::sources::Source;
use super::watch::ListState;
use crate::leader::Leadership;

pub struct Fence {
    /// The lists behind the node cache, each window cache and each watched source of the
    /// health gates (with its source).
    lists: Vec<(ListState, Option<Source>)>,
    /// The term in which the leader was last found waiting for its lists (logged once,
    /// asked once).
    waiting_for: Option<Instant>,
}

/// What the fence says.
pub enum Access {
    /// Write, in this term.
    Open(Instant),
    /// Do not write (a standby, or a leader waiting for its lists).
    Closed,
    /// Do not write yet: a new client was made for the lists that catch up; the
    /// writers use it from now on.
    Relisting(Client),
}

impl Fence {
    pub fn new(lists: Vec<(ListState, Option<Source>)>) -> Self {
        Fence {
            lists,
            waiting_for: None,
        }
    }

    /// Whether this replica may write now. A health gate's source whose cache predates
    /// the term and whose watch fails now does not hold the writes up (the ends of
    /// maintenance must go on): it counts as never read, and its gate holds every start.
    pub fn check(&mut self, leadership: &Leadership, connect: &Connect) -> Access {
        let Some(term) = leadership.term() else {
            return Access::Closed;
        };
        for (list, source) in &self.lists {
            if let Some(source) = source
                && !list.listed_since(term)
                && list.failing()
            {
                source.unread();
            }
        }
        // A failing source's list does not hold the writes up.
        let waits = |(list, source): &&(ListState, Option<Source>)| {
            let excused = source.is_some() && list.failing();
            !list.listed_since(term) && !excused
        };
        let stale = self.lists.iter().filter(waits).count();
        if stale == 0 {
            if self.waiting_for == Some(term) {
                info!("lists complete: writing");
                self.waiting_for = None;
            }
            return Access::Open(term);
        }
        if self.waiting_for == Some(term) {
            return Access::Closed;
        }
        info!(
            stale,
            "leading, but the caches predate this term: listing nodes and windows again, on \
             new connections, before writing"
        );
        self.waiting_for = Some(term);
        match connect() {
            Ok(client) => {
                // Every stale cache at once: the lists run side by side; their completion
                // wakes the loop.
                for (l, _) in self.lists.iter().filter(|(l, _)| !l.listed_since(term)) {
                    l.relist(term, &client);
                }
                Access::Relisting(client)
            }
            // Only a configuration the first client was made from can fail here.
            Err(e) => {
                warn!(error = %e, "cannot make a new client; not writing");
                Access::Closed
            }
        }
    }
}
