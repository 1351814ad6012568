//! wasmbox: when a pool slot that resets its memory in place (`PAGEMAP_SCAN`) should
//! let go of every page it keeps resident instead.
//!
//! Without userfaultfd write-protection the scan reports every page a slot keeps
//! resident as written, whether or not the last instance wrote it: what a reset copies
//! back is the union of the pages all of the slot's instances dirtied since the slot
//! last let go of its memory (up to `keep_resident`). One heavy instance thus leaves a
//! large resident set behind, and every light instance after it in that slot pays a
//! copy of all of it at every reset (wasmbox's docs/performance.md, "What a heavy run
//! leaves behind", has the figures). So each slot remembers how much its first reset after letting
//! go kept (one instance's dirty set) and lets go again when the union has grown well
//! past it, or, when it keeps a lot, every so many resets, which catches a slot whose
//! first instance was the heavy one. Letting go costs the next instance a page fault
//! per page it writes, once; its reset then measures a fresh baseline.

/// Growth of the kept set over the baseline that never makes a slot let go: small
/// differences between instances of the same guest are not worth the faults.
const GROWTH_SLACK: usize = 1 << 20;

/// A slot keeping at least this much lets go every [`RECHECK_EVERY`] resets. Below it,
/// the faults of letting go would cost more than the copies they might save.
const RECHECK_FLOOR: usize = 4 << 20;

/// How often a slot keeping at least [`RECHECK_FLOOR`] lets go.
const RECHECK_EVERY: u32 = 64;

/// One slot's record of what its in-place resets kept resident.
#[derive(Debug, Default)]
pub(crate) struct SlotResidency {
    /// What the first reset after the slot last let go kept: one instance's dirty set.
    baseline: Option<usize>,
    /// Resets since the slot last let go.
    resets: u32,
}

impl SlotResidency {
    /// Takes note of a reset that kept `kept` bytes resident; true when the slot should
    /// let go of them all now (and starts measuring afresh).
    pub(crate) fn should_let_go(&mut self, kept: usize) -> bool {
        self.resets = self.resets.saturating_add(1);
        let baseline = *self.baseline.get_or_insert(kept);
        let grew = kept > baseline.saturating_mul(2).saturating_add(GROWTH_SLACK);
        let stale = kept >= RECHECK_FLOOR && self.resets >= RECHECK_EVERY;
        if grew || stale {
            *self = SlotResidency::default();
        }
        grew || stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_steady_light_slot_keeps_its_pages() {
        let mut slot = SlotResidency::default();
        for _ in 0..10_000 {
            assert!(!slot.should_let_go(MIB));
        }
        // Drifting by less than the slack is no reason either.
        assert!(!slot.should_let_go(2 * MIB + MIB / 2));
    }

    #[test]
    fn a_heavy_instance_after_light_ones_makes_the_slot_let_go_at_once() {
        let mut slot = SlotResidency::default();
        assert!(!slot.should_let_go(MIB));
        assert!(!slot.should_let_go(MIB));
        assert!(slot.should_let_go(16 * MIB));
        // The next reset measures a new baseline: the light instance's again.
        assert!(!slot.should_let_go(MIB));
        assert!(!slot.should_let_go(MIB));
    }

    #[test]
    fn a_slot_whose_first_instance_was_heavy_lets_go_within_the_recheck_period() {
        let mut slot = SlotResidency::default();
        let resets = (1..=RECHECK_EVERY).find(|_| slot.should_let_go(16 * MIB));
        assert_eq!(resets, Some(RECHECK_EVERY));
        assert!(!slot.should_let_go(MIB), "a fresh baseline");
    }

    #[test]
    fn a_steady_heavy_slot_lets_go_only_once_per_period() {
        let mut slot = SlotResidency::default();
        let let_go = (0..10 * RECHECK_EVERY)
            .filter(|_| slot.should_let_go(8 * MIB))
            .count();
        assert_eq!(let_go, 10);
    }
}
