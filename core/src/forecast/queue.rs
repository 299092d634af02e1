//! A group's waiting nodes in the brain's order, taken as a decision needs them: each
//! cell's simulated nodes in that order, with a bit per node set while it may be a
//! candidate as far as its own standing says ([`Standing::queued`]).
//!
//! Why bits and not the open windows' lists merged: a pass walks a cell from its first
//! node on, and the nodes in progress, the ones recovering and those that wait for a
//! reason of their own sit before the ones it takes, in every open window's list that
//! selects them; merging the lists paid a heap operation per node and per window at every
//! pass. A word of bits skips 64 nodes that cannot be candidates at once.

use super::node::Standing;

/// For each cell, a bit per node (by its place in the cell's order): whether its standing
/// lets it wait for a start ([`Standing::queued`]). Kept up to date wherever that changes.
#[derive(Clone, Debug, Default)]
pub(super) struct Queued {
    bits: Vec<Vec<u64>>,
}

impl Queued {
    /// No node queued, for cells of these sizes.
    pub(super) fn new(sizes: impl IntoIterator<Item = usize>) -> Queued {
        Queued {
            bits: sizes.into_iter().map(|n| vec![0; n.div_ceil(64)]).collect(),
        }
    }

    /// Sets node `place` of `cell` queued or not.
    pub(super) fn set(&mut self, cell: usize, place: usize, on: bool) {
        let word = &mut self.bits[cell][place / 64];
        let bit = 1u64 << (place % 64);
        if on {
            *word |= bit;
        } else {
            *word &= !bit;
        }
    }

    /// The first queued place of `cell` at or after `from`.
    pub(super) fn next(&self, cell: usize, from: usize) -> Option<usize> {
        let words = &self.bits[cell];
        let mut w = from / 64;
        let mut word = words.get(w)? & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
            w += 1;
            word = *words.get(w)?;
        }
    }
}

/// Brings node `i`'s bit up to date with its standing (nodes not simulated have none).
pub(super) fn mark(queued: &mut Queued, cell: &[(u32, u32)], standing: &Standing, i: usize) {
    if let Some(&(c, place)) = cell.get(i).filter(|(c, _)| *c != u32::MAX) {
        queued.set(c as usize, place as usize, standing.queued());
    }
}

/// A cell's waiting nodes in the brain's order, taken in turn by the run (`Run::fill`),
/// which knows whether each still waits.
pub(super) struct CellQueue {
    pub(super) cell: usize,
    /// The place in the cell's order to look from.
    pub(super) next: usize,
    pub(super) taken: Vec<usize>,
    pub(super) done: bool,
}

impl CellQueue {
    pub(super) fn new(cell: usize) -> CellQueue {
        CellQueue {
            cell,
            next: 0,
            taken: Vec::new(),
            done: false,
        }
    }
}
