//! What automatic work one session may still cause.
//!
//! Spec, "Lazy, budgeted drift sync": automatic syncs run "again only within
//! `freshness.maxSyncsPerSession`"; a sync skipped as busy consumes no slot.
//! Spec, "Errors are contained": the module does not retry failing work more
//! than once per session.
//!
//! A slot is worth what the sync costs ([`SyncCost`]). The spec's key counts
//! the syncs whose work grows with the repository — CGC's reconcile, a
//! whole-tree index — and keeps its meaning, its default and its notice for
//! them. A sync whose work grows with the files that changed (the
//! incremental worker's) draws on its own, generous allowance,
//! `freshness.maxIncrementalSyncsPerSession`: with syncs of one or two
//! seconds, two slots a session would leave a real session — dozens of
//! edits over an hour — stale most of its life. Both are paced by
//! `freshness.minSyncGapMs`.
//!
//! A slot is consumed when the sync process exists (`SyncSpawned`, which
//! says the cost), not when the machine decides to start it: a start that
//! the lock probe turns away, that is declined or that needs a class with
//! no slot left (`SyncOverBudget`) spawned nothing. A spawned sync that
//! still hit the database lock gives its slots back.

/// What a spawned sync's work grows with, as the shell knows it when the
/// process exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncCost {
    /// The files that changed: the incremental worker applies them.
    ChangedFiles,
    /// The repository: a reconcile, an index, a custom command.
    WholeRepository,
}

impl SyncCost {
    /// The configuration key whose slots this class spends.
    pub fn key(self) -> &'static str {
        match self {
            SyncCost::ChangedFiles => "freshness.maxIncrementalSyncsPerSession",
            SyncCost::WholeRepository => "freshness.maxSyncsPerSession",
        }
    }
}

/// Which classes of work a started sync may spend its payer's slots on
/// (`Effect::StartSync`): a manual sync is not budgeted and may spend both.
/// The shell reports `SyncOverBudget` instead of spawning a sync of a class
/// that is not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SyncAllowance {
    pub changed_files: bool,
    pub whole_repository: bool,
}

impl SyncAllowance {
    /// Not budgeted (a manual sync).
    pub const ANY: SyncAllowance = SyncAllowance {
        changed_files: true,
        whole_repository: true,
    };

    /// Whether a sync of `cost` may spawn.
    pub fn allows(self, cost: SyncCost) -> bool {
        match cost {
            SyncCost::ChangedFiles => self.changed_files,
            SyncCost::WholeRepository => self.whole_repository,
        }
    }

    /// Whether anything may spawn at all.
    pub fn any(self) -> bool {
        self.changed_files || self.whole_repository
    }
}

/// The per-class limits of one session (`FreshnessPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyncLimits {
    pub(crate) changed_files: u32,
    pub(crate) whole_repository: u32,
}

/// The automatic-sync allowance of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncBudget {
    /// Automatic syncs spawned, net of refunds: (changed files, whole
    /// repository).
    changed_files: u32,
    whole_repository: u32,
    retry_used: bool,
    failing: bool,
}

impl SyncBudget {
    /// The classes another automatic sync may spend under `limits`.
    pub(crate) fn allowance(&self, limits: SyncLimits) -> SyncAllowance {
        SyncAllowance {
            changed_files: self.changed_files < limits.changed_files,
            whole_repository: self.whole_repository < limits.whole_repository,
        }
    }

    /// An automatic sync of this session spawned, costing `cost`.
    pub(crate) fn consume_slot(&mut self, cost: SyncCost) {
        let spent = self.spent_mut(cost);
        *spent = spent.saturating_add(1);
    }

    /// The spawned sync of `cost` turned out busy: it did no work.
    pub(crate) fn refund_slot(&mut self, cost: SyncCost) {
        let spent = self.spent_mut(cost);
        *spent = spent.saturating_sub(1);
    }

    /// Automatic syncs of `cost` spawned (net of refunds).
    pub(crate) fn spawned(&self, cost: SyncCost) -> u32 {
        match cost {
            SyncCost::ChangedFiles => self.changed_files,
            SyncCost::WholeRepository => self.whole_repository,
        }
    }

    fn spent_mut(&mut self, cost: SyncCost) -> &mut u32 {
        match cost {
            SyncCost::ChangedFiles => &mut self.changed_files,
            SyncCost::WholeRepository => &mut self.whole_repository,
        }
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

    const LIMITS: SyncLimits = SyncLimits {
        changed_files: 3,
        whole_repository: 2,
    };

    #[test]
    fn slots_are_counted_and_refunded_per_class() {
        let mut budget = SyncBudget::default();
        assert_eq!(budget.allowance(LIMITS), SyncAllowance::ANY);
        budget.consume_slot(SyncCost::WholeRepository);
        budget.consume_slot(SyncCost::WholeRepository);
        let allowance = budget.allowance(LIMITS);
        assert!(!allowance.allows(SyncCost::WholeRepository));
        assert!(
            allowance.allows(SyncCost::ChangedFiles),
            "the other class is untouched"
        );
        budget.refund_slot(SyncCost::WholeRepository);
        assert!(budget.allowance(LIMITS).allows(SyncCost::WholeRepository));
        assert_eq!(budget.spawned(SyncCost::WholeRepository), 1);
        for _ in 0..3 {
            budget.consume_slot(SyncCost::ChangedFiles);
        }
        let allowance = budget.allowance(LIMITS);
        assert!(!allowance.allows(SyncCost::ChangedFiles));
        assert!(allowance.any());
        assert_eq!(budget.spawned(SyncCost::ChangedFiles), 3);
        let none = SyncBudget::default().allowance(SyncLimits {
            changed_files: 0,
            whole_repository: 0,
        });
        assert!(!none.any());
    }

    #[test]
    fn each_class_names_its_key() {
        assert_eq!(
            SyncCost::WholeRepository.key(),
            "freshness.maxSyncsPerSession"
        );
        assert_eq!(
            SyncCost::ChangedFiles.key(),
            "freshness.maxIncrementalSyncsPerSession"
        );
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
