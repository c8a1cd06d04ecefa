//! The one-time notice ledger of one session.
//!
//! Spec, "One-time human-facing staleness notices": the extension SHALL
//! surface staleness conditions as notices at most once per condition per
//! session. A notice only counts once a subscriber actually got it (the shell
//! reports that with `NoticeDelivered`): a notice nobody saw may be offered
//! again the next time its condition occurs. Until then an offered notice is
//! not repeated, so re-observed edits do not produce a stream of duplicates.

use std::collections::BTreeSet;

use cgc_fresh_proto::NoticeCondition;

/// The (session, condition) pairs of one session: delivered, or offered and
/// awaiting delivery.
#[derive(Debug, Clone, Default)]
pub(crate) struct NoticeLedger {
    delivered: BTreeSet<NoticeCondition>,
    offered: BTreeSet<NoticeCondition>,
}

impl NoticeLedger {
    /// Whether a notice for `condition` should be emitted now; records the
    /// offer when it should.
    pub(crate) fn offer(&mut self, condition: NoticeCondition) -> bool {
        if self.delivered.contains(&condition) {
            return false;
        }
        self.offered.insert(condition)
    }

    /// A subscriber got the notice for `condition`: it is never shown again
    /// in this session.
    pub(crate) fn mark_delivered(&mut self, condition: NoticeCondition) {
        self.offered.remove(&condition);
        self.delivered.insert(condition);
    }

    /// Forgets offers nobody confirmed, so the next occurrence of their
    /// condition may offer them again. Called when a sync settles: that ends
    /// the episode the offers belonged to.
    pub(crate) fn forget_undelivered(&mut self) {
        self.offered.clear();
    }

    /// Whether the notice for `condition` was delivered in this session.
    #[cfg(test)]
    pub(crate) fn is_delivered(&self, condition: NoticeCondition) -> bool {
        self.delivered.contains(&condition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_is_made_once_until_forgotten() {
        let mut ledger = NoticeLedger::default();
        assert!(ledger.offer(NoticeCondition::PossiblyStale));
        assert!(!ledger.offer(NoticeCondition::PossiblyStale));
        assert!(ledger.offer(NoticeCondition::SyncCompleted));
        ledger.forget_undelivered();
        assert!(ledger.offer(NoticeCondition::PossiblyStale));
    }

    #[test]
    fn a_delivered_notice_is_never_offered_again() {
        let mut ledger = NoticeLedger::default();
        assert!(ledger.offer(NoticeCondition::SyncSkippedBusy));
        ledger.mark_delivered(NoticeCondition::SyncSkippedBusy);
        ledger.forget_undelivered();
        assert!(!ledger.offer(NoticeCondition::SyncSkippedBusy));
        assert!(ledger.is_delivered(NoticeCondition::SyncSkippedBusy));
        assert!(!ledger.is_delivered(NoticeCondition::SyncFailed));
    }
}
