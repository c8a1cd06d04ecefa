//! The one-time notice ledger of one session.
//!
//! Spec, "One-time human-facing staleness notices": the extension SHALL
//! surface staleness conditions as notices at most once per condition per
//! session. A notice only counts once a subscriber actually got it (the shell
//! reports that with `NoticeDelivered`): a notice nobody saw may be offered
//! again the next time its condition occurs. Until then an offered notice is
//! not repeated, so re-observed edits do not produce a stream of duplicates.
//!
//! An offered notice is also *held* (its text, one per condition) until it
//! is delivered or its episode ends, so that a harness without a standing
//! connection (hooks that run as short processes) can take it later.

use std::collections::{BTreeMap, BTreeSet};

use cgc_fresh_proto::NoticeCondition;

/// The (session, condition) pairs of one session: delivered, or offered and
/// awaiting delivery.
#[derive(Debug, Clone, Default)]
pub(crate) struct NoticeLedger {
    delivered: BTreeSet<NoticeCondition>,
    offered: BTreeSet<NoticeCondition>,
    /// The text of each offered, undelivered notice.
    held: BTreeMap<NoticeCondition, String>,
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

    /// Offers `condition` ([`NoticeLedger::offer`]) and, when it is offered,
    /// holds its text (built only then) and returns it.
    pub(crate) fn offer_text(
        &mut self,
        condition: NoticeCondition,
        text: impl FnOnce() -> String,
    ) -> Option<String> {
        if !self.offer(condition) {
            return None;
        }
        let text = text();
        self.held.insert(condition, text.clone());
        Some(text)
    }

    /// A subscriber got the notice for `condition`: it is never shown again
    /// in this session.
    pub(crate) fn mark_delivered(&mut self, condition: NoticeCondition) {
        self.offered.remove(&condition);
        self.held.remove(&condition);
        self.delivered.insert(condition);
    }

    /// Takes every held notice, oldest condition first, and counts each as
    /// delivered: whoever took them shows them to the person.
    pub(crate) fn take_held(&mut self) -> Vec<(NoticeCondition, String)> {
        let held: Vec<(NoticeCondition, String)> =
            std::mem::take(&mut self.held).into_iter().collect();
        for (condition, _) in &held {
            self.offered.remove(condition);
            self.delivered.insert(*condition);
        }
        held
    }

    /// Forgets offers nobody confirmed, so the next occurrence of their
    /// condition may offer them again. Called when a sync settles: that ends
    /// the episode the offers belonged to.
    pub(crate) fn forget_undelivered(&mut self) {
        self.offered.clear();
        self.held.clear();
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
    fn held_notices_are_taken_once_and_then_count_as_delivered() {
        let mut ledger = NoticeLedger::default();
        assert_eq!(
            ledger.offer_text(NoticeCondition::PossiblyStale, || "stale".into()),
            Some("stale".into())
        );
        assert_eq!(
            ledger.offer_text(NoticeCondition::PossiblyStale, || unreachable!()),
            None
        );
        ledger.offer_text(NoticeCondition::SyncCompleted, || "done".into());
        ledger.mark_delivered(NoticeCondition::SyncCompleted);
        assert_eq!(
            ledger.take_held(),
            [(NoticeCondition::PossiblyStale, "stale".to_string())]
        );
        assert_eq!(ledger.take_held(), []);
        assert!(ledger.is_delivered(NoticeCondition::PossiblyStale));
        // An episode's end drops what nobody took.
        ledger.offer_text(NoticeCondition::SyncFailed, || "failed".into());
        ledger.forget_undelivered();
        assert_eq!(ledger.take_held(), []);
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
