//! A group's waiting nodes in the brain's order, taken as a decision needs them: the
//! lists of the open windows selecting them, merged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::simulation::Run;

/// A cell's waiting nodes in the brain's order: the lists of the open windows selecting
/// them, merged.
pub(super) struct CellQueue {
    pub(super) cell: usize,
    /// Each open window's next node, smallest rank first.
    pub(super) heads: BinaryHeap<Reverse<Head>>,
    pub(super) last: Option<u32>,
    pub(super) taken: Vec<usize>,
    pub(super) done: bool,
}

impl CellQueue {
    /// Takes waiting nodes until it holds `want` of them or none is left.
    pub(super) fn fill(&mut self, run: &mut Run, want: usize) {
        while self.taken.len() < want && !self.done {
            let Some(Reverse(Head {
                rank,
                window: w,
                position: pos,
            })) = self.heads.pop()
            else {
                self.done = true;
                break;
            };
            let list = &run.lists[w][self.cell];
            let i = list[pos];
            if let Some(&next) = list.get(pos + 1) {
                self.heads.push(Reverse(Head {
                    rank: run.fleet.rank[next],
                    window: w,
                    position: pos + 1,
                }));
            }
            if self.last == Some(rank) {
                continue;
            }
            self.last = Some(rank);
            if run.waiting(i) && !run.still_alone(i) {
                self.taken.push(i);
            }
        }
    }
}

/// The next node of one open window's list of a cell: ordered by its rank in the brain's
/// order first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Head {
    /// The node's place in the brain's order.
    pub(super) rank: u32,
    pub(super) window: usize,
    /// Its position in the window's list.
    pub(super) position: usize,
}
