//! What automatic work one session may still cause.
//!
//! Spec, "Lazy, budgeted drift sync": automatic syncs run "again only within
//! `freshness.maxSyncsPerSession`"; a sync skipped as busy consumes no slot.
//! Spec, "Errors are contained": the module does not retry failing work more
//! than once per session.
//!
//! A slot is consumed when the sync process exists (`SyncSpawned`), not when
//! the machine decides to start it: a start that the lock probe turns away,
//! or that is declined, spawned nothing. A spawned sync that still hit the
//! database lock gives its slot back.

/// The automatic-sync allowance of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncBudget {
    spawned: u32,
    retry_used: bool,
    failing: bool,
}

impl SyncBudget {
    /// Whether another automatic sync may spawn under `max` slots.
    pub(crate) fn has_slot(&self, max: u32) -> bool {
        self.spawned < max
    }

    /// An automatic sync of this session spawned.
    pub(crate) fn consume_slot(&mut self) {
        self.spawned = self.spawned.saturating_add(1);
    }

    /// The spawned sync turned out busy: it did no work.
    pub(crate) fn refund_slot(&mut self) {
        self.spawned = self.spawned.saturating_sub(1);
    }

    /// Automatic syncs spawned (net of refunds).
    pub(crate) fn spawned(&self) -> u32 {
        self.spawned
    }

    /// An automatic sync of this session failed. Returns whether one retry
    /// may follow; the second failure marks the session failing, which stops
    /// its automatic syncs.
    pub(crate) fn after_failure(&mut self) -> bool {
        if self.retry_used {
            self.failing = true;
            false
        } else {
            self.retry_used = true;
            true
        }
    }

    /// Whether automatic syncs stopped because failing work was already
    /// retried once.
    pub(crate) fn is_failing(&self) -> bool {
        self.failing
    }

    /// A sync succeeded: whatever failed works again, so automatic syncs may
    /// resume (the one retry stays used).
    pub(crate) fn clear_failing(&mut self) {
        self.failing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_and_refunded() {
        let mut budget = SyncBudget::default();
        assert!(budget.has_slot(2));
        budget.consume_slot();
        budget.consume_slot();
        assert!(!budget.has_slot(2));
        budget.refund_slot();
        assert!(budget.has_slot(2));
        assert_eq!(budget.spawned(), 1);
        assert!(!SyncBudget::default().has_slot(0));
    }

    #[test]
    fn failing_work_is_retried_once_per_session() {
        let mut budget = SyncBudget::default();
        assert!(budget.after_failure(), "first failure: one retry");
        assert!(!budget.is_failing());
        assert!(!budget.after_failure(), "second failure: no more");
        assert!(budget.is_failing());
        budget.clear_failing();
        assert!(!budget.is_failing());
        assert!(!budget.after_failure(), "the retry stays used");
    }
}
