//! `Notices`: the one-time notice ledger of every session lifetime, and
//! what counts as a delivery.
//!
//! Spec, "One-time human-facing staleness notices": at most once per
//! condition per session, counted on delivery. A notice is offered to a
//! lifetime (or to every attached one) by the other sub-machines; it leaves
//! as an [`Effect::Notice`] for that lifetime; it counts as delivered only
//! when a connection carrying *that* lifetime received it
//! ([`ToNotices::Delivered`], which names the lifetime), so a reader of
//! another session or a plain `events` subscriber never spends it. Offers
//! nobody received are held for `take_notices`.

use std::collections::BTreeMap;

use super::events::Effect;
use super::ledger::NoticeLedger;
use super::messages::{Audience, OfferText, ToNotices};
use super::notice_text;
use super::session::{Lifetime, SessionKey};

/// The ledgers of the live (attached or detached) lifetimes.
#[derive(Debug, Clone)]
pub struct Notices {
    workspace_root: String,
    lifetimes: BTreeMap<Lifetime, NoticeEntry>,
}

#[derive(Debug, Clone)]
struct NoticeEntry {
    name: String,
    ledger: NoticeLedger,
    attached: bool,
}

/// A held notice, as [`Notices::take_held`] returns it.
pub type Held = Vec<(cgc_fresh_proto::NoticeCondition, String)>;

impl Notices {
    pub fn new(workspace_root: &str) -> Self {
        Notices {
            workspace_root: workspace_root.to_string(),
            lifetimes: BTreeMap::new(),
        }
    }

    pub fn set_workspace_root(&mut self, workspace_root: &str) {
        self.workspace_root = workspace_root.to_string();
    }

    /// Applies one message; returns the notices to show.
    pub fn handle(&mut self, message: ToNotices) -> Vec<Effect> {
        let mut out = Vec::new();
        match message {
            ToNotices::LifetimeOpened { session } => {
                self.lifetimes.insert(
                    session.lifetime,
                    NoticeEntry {
                        name: session.name,
                        ledger: NoticeLedger::default(),
                        attached: true,
                    },
                );
            }
            ToNotices::LifetimeReattached { lifetime } => {
                if let Some(entry) = self.lifetimes.get_mut(&lifetime) {
                    entry.attached = true;
                }
            }
            ToNotices::LifetimeClosed { lifetime, detached } => {
                if detached {
                    if let Some(entry) = self.lifetimes.get_mut(&lifetime) {
                        entry.attached = false;
                    }
                } else {
                    self.lifetimes.remove(&lifetime);
                }
            }
            ToNotices::Offer {
                audience: Audience::One(lifetime),
                condition,
                text,
            } => {
                if let Some(entry) = self.lifetimes.get_mut(&lifetime) {
                    offer(
                        entry,
                        lifetime,
                        condition,
                        &text,
                        &self.workspace_root,
                        &mut out,
                    );
                }
            }
            ToNotices::Offer {
                audience: Audience::AllAttached,
                condition,
                text,
            } => {
                // In the order of the session names, as the shell lists them.
                let mut attached: Vec<(&Lifetime, &mut NoticeEntry)> = self
                    .lifetimes
                    .iter_mut()
                    .filter(|(_, entry)| entry.attached)
                    .collect();
                attached.sort_by(|(_, a), (_, b)| a.name.cmp(&b.name));
                for (lifetime, entry) in attached {
                    offer(
                        entry,
                        *lifetime,
                        condition,
                        &text,
                        &self.workspace_root,
                        &mut out,
                    );
                }
            }
            ToNotices::EpisodeOver => {
                for entry in self.lifetimes.values_mut().filter(|entry| entry.attached) {
                    entry.ledger.forget_undelivered();
                }
            }
            ToNotices::Delivered { session, condition } => {
                // Counted for the lifetime it was offered to, and only while
                // that lifetime is the name's and attached (a replaced
                // one's delivery does not spend its successor's notice).
                if let Some(entry) = self.lifetimes.get_mut(&session.lifetime) {
                    if entry.attached && entry.name == session.name {
                        entry.ledger.mark_delivered(condition);
                    }
                }
            }
        }
        out
    }

    /// Takes the held notices of `lifetime`; they count as delivered.
    pub fn take_held(&mut self, lifetime: Lifetime) -> Option<Held> {
        self.lifetimes
            .get_mut(&lifetime)
            .map(|entry| entry.ledger.take_held())
    }

    /// Whether `lifetime` has a ledger (for the simulation).
    #[cfg(test)]
    pub(crate) fn has_ledger(&self, lifetime: Lifetime) -> bool {
        self.lifetimes.contains_key(&lifetime)
    }
}

fn offer(
    entry: &mut NoticeEntry,
    lifetime: Lifetime,
    condition: cgc_fresh_proto::NoticeCondition,
    text: &OfferText,
    workspace_root: &str,
    out: &mut Vec<Effect>,
) {
    let made = entry.ledger.offer_text(condition, || match text {
        OfferText::Ready(text) => text.clone(),
        OfferText::PossiblyStale { tool, auto_sync } => {
            notice_text::possibly_stale(workspace_root, tool, *auto_sync)
        }
    });
    if let Some(text) = made {
        out.push(Effect::Notice {
            session: SessionKey {
                name: entry.name.clone(),
                lifetime,
            },
            condition,
            level: notice_text::level(condition),
            text,
        });
    }
}
