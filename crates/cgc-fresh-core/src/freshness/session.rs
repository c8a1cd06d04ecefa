//! Which harness sessions are live, and which ended.
//!
//! Spec, "Freshness observation rebinds on session replacement": when the
//! harness replaces the session and re-runs the extension with a fresh API
//! instance, drift observation re-binds to the new session and its sync
//! budget re-arms; same-API registration stays one idempotent registration.
//!
//! A session *lifetime* starts with `session_start` and ends with
//! `session_shutdown`. Each lifetime has its own [`SessionKey`], budget,
//! notice ledger and one watcher attempt. Several may be live at once (two harness connections in one
//! workspace). The rules, by what is known about the session name:
//!
//! - live, same instance: a repeated registration — nothing changes;
//! - live, registered without an instance (see below): the instance is
//!   adopted — nothing else changes;
//! - live, another instance: the session was replaced by a new extension
//!   instance — the old lifetime ends and a new one starts;
//! - ended, same instance: a late duplicate of the ended registration —
//!   ignored, so an ended session stays ended;
//! - ended with another instance, or never seen: a new lifetime (this is how
//!   `/resume` of an earlier session rebinds).
//!
//! A `tool_call` of a modifying tool from a session never seen before starts
//! a lifetime without an instance: missing a real edit would be a false
//! "fresh", so the conservative reading of an unannounced session is "live".
//!
//! Ended names are remembered up to [`MAX_ENDED_SESSIONS`], oldest forgotten
//! first, so a long-running service does not grow without bound.
//!
//! Live lifetimes are bounded too, by [`MAX_LIVE_SESSIONS`]: a harness that
//! starts sessions (or reports edits under ever-new names) without ending
//! them would otherwise grow the table for as long as the service runs.
//! At the bound a `session_start` for a new name is refused (the shell
//! answers with an error and nothing changes), and an edit under a new name
//! starts no lifetime but still counts, like an edit under an ended
//! session's name: the bound can cost a budget or a notice, never the
//! record's truth. Replacing a live session does not grow the table and is
//! always admitted.

use std::collections::{BTreeMap, VecDeque};

use super::budget::SyncBudget;
use super::ledger::NoticeLedger;

/// How many ended session names are remembered.
pub const MAX_ENDED_SESSIONS: usize = 1_024;

/// How many session lifetimes may be live at once. Far above any real
/// workspace (one per open harness), low enough to bound memory.
pub const MAX_LIVE_SESSIONS: usize = 1_024;

/// One session lifetime (a name can have several lifetimes over time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SessionKey(u64);

/// A live session lifetime.
#[derive(Debug, Clone)]
pub(crate) struct LiveSession {
    pub(crate) key: SessionKey,
    instance: Option<String>,
    pub(crate) budget: SyncBudget,
    pub(crate) ledger: NoticeLedger,
    /// Whether this lifetime made its one watcher attempt (started, busy,
    /// declined or failed to spawn).
    pub(crate) watcher_attempted: bool,
}

/// What a `session_start` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registration {
    /// Already registered (or a late duplicate of an ended registration):
    /// nothing changed that anyone can observe.
    Unchanged,
    /// A new lifetime started; `replaced` is the lifetime it ended.
    Started { replaced: Option<SessionKey> },
    /// [`MAX_LIVE_SESSIONS`] lifetimes are live and this one would be
    /// another: nothing changed.
    Refused,
}

/// What is known about a session name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    Live(SessionKey),
    Ended,
    Unknown,
}

/// The live session lifetimes and the recently ended names.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sessions {
    live: BTreeMap<String, LiveSession>,
    ended: BTreeMap<String, Option<String>>,
    ended_order: VecDeque<String>,
    next_key: u64,
}

impl Sessions {
    /// Applies `session_start{session: name}` from extension `instance`.
    pub(crate) fn register(&mut self, name: &str, instance: &str) -> Registration {
        if let Some(live) = self.live.get_mut(name) {
            match &live.instance {
                Some(known) if known == instance => return Registration::Unchanged,
                None => {
                    live.instance = Some(instance.to_string());
                    return Registration::Unchanged;
                }
                Some(_) => {
                    let replaced = live.key;
                    self.start(name, Some(instance));
                    return Registration::Started {
                        replaced: Some(replaced),
                    };
                }
            }
        }
        if let Some(ended_instance) = self.ended.get(name) {
            if ended_instance.as_deref() == Some(instance) {
                return Registration::Unchanged;
            }
        }
        if self.full() {
            return Registration::Refused;
        }
        self.start(name, Some(instance));
        Registration::Started { replaced: None }
    }

    /// Whether [`Sessions::register`] would admit this registration (any
    /// outcome but [`Registration::Refused`]), without doing it.
    pub(crate) fn admits(&self, name: &str, instance: &str) -> bool {
        self.live.contains_key(name)
            || self
                .ended
                .get(name)
                .is_some_and(|ended| ended.as_deref() == Some(instance))
            || !self.full()
    }

    /// The live lifetime of `name`, starting one without an instance when
    /// the name was never seen; `None` for an ended name, or a new one while
    /// the table is full.
    pub(crate) fn live_or_implicit(&mut self, name: &str) -> Option<SessionKey> {
        match self.known(name) {
            Known::Live(key) => Some(key),
            Known::Ended => None,
            Known::Unknown if self.full() => None,
            Known::Unknown => Some(self.start(name, None)),
        }
    }

    /// Whether [`MAX_LIVE_SESSIONS`] lifetimes are live.
    fn full(&self) -> bool {
        self.live.len() >= MAX_LIVE_SESSIONS
    }

    /// What is known about `name`.
    pub(crate) fn known(&self, name: &str) -> Known {
        if let Some(live) = self.live.get(name) {
            Known::Live(live.key)
        } else if self.ended.contains_key(name) {
            Known::Ended
        } else {
            Known::Unknown
        }
    }

    /// Ends the live lifetime of `name`; returns it, or `None` when `name`
    /// was not live.
    pub(crate) fn end(&mut self, name: &str) -> Option<SessionKey> {
        let live = self.live.remove(name)?;
        self.forget_ended(name);
        if self.ended_order.len() >= MAX_ENDED_SESSIONS {
            if let Some(oldest) = self.ended_order.pop_front() {
                self.ended.remove(&oldest);
            }
        }
        self.ended.insert(name.to_string(), live.instance);
        self.ended_order.push_back(name.to_string());
        Some(live.key)
    }

    /// The name and state of live lifetime `key`.
    pub(crate) fn get(&self, key: SessionKey) -> Option<(&str, &LiveSession)> {
        self.live
            .iter()
            .find(|(_, live)| live.key == key)
            .map(|(name, live)| (name.as_str(), live))
    }

    /// The name and mutable state of live lifetime `key`.
    pub(crate) fn get_mut(&mut self, key: SessionKey) -> Option<(&str, &mut LiveSession)> {
        self.live
            .iter_mut()
            .find(|(_, live)| live.key == key)
            .map(|(name, live)| (name.as_str(), live))
    }

    /// The name of live lifetime `key`.
    pub(crate) fn name(&self, key: SessionKey) -> Option<&str> {
        self.get(key).map(|(name, _)| name)
    }

    /// Every live lifetime, by name.
    pub(crate) fn live_mut(&mut self) -> impl Iterator<Item = (&str, &mut LiveSession)> {
        self.live
            .iter_mut()
            .map(|(name, live)| (name.as_str(), live))
    }

    /// The names of the live sessions, sorted.
    pub(crate) fn live_names(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(String::as_str)
    }

    fn start(&mut self, name: &str, instance: Option<&str>) -> SessionKey {
        self.forget_ended(name);
        self.next_key += 1;
        let key = SessionKey(self.next_key);
        self.live.insert(
            name.to_string(),
            LiveSession {
                key,
                instance: instance.map(str::to_string),
                budget: SyncBudget::default(),
                ledger: NoticeLedger::default(),
                watcher_attempted: false,
            },
        );
        key
    }

    fn forget_ended(&mut self, name: &str) {
        if self.ended.remove(name).is_some() {
            self.ended_order.retain(|ended| ended != name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registering_the_same_instance_twice_is_one_registration() {
        let mut sessions = Sessions::default();
        assert_eq!(
            sessions.register("s1", "pi-1"),
            Registration::Started { replaced: None }
        );
        let Known::Live(key) = sessions.known("s1") else {
            panic!("s1 should be live")
        };
        assert_eq!(sessions.register("s1", "pi-1"), Registration::Unchanged);
        assert_eq!(sessions.known("s1"), Known::Live(key));
        assert_eq!(sessions.live_names().count(), 1);
    }

    #[test]
    fn a_new_instance_replaces_the_lifetime() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1");
        let Known::Live(old) = sessions.known("s1") else {
            panic!()
        };
        assert_eq!(
            sessions.register("s1", "pi-2"),
            Registration::Started {
                replaced: Some(old)
            }
        );
        assert_ne!(sessions.known("s1"), Known::Live(old));
    }

    #[test]
    fn an_ended_session_stays_ended_for_its_own_instance_only() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1");
        assert!(sessions.end("s1").is_some());
        assert_eq!(sessions.end("s1"), None);
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert_eq!(sessions.live_or_implicit("s1"), None);
        assert_eq!(sessions.register("s1", "pi-1"), Registration::Unchanged);
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert_eq!(
            sessions.register("s1", "pi-2"),
            Registration::Started { replaced: None }
        );
        assert!(matches!(sessions.known("s1"), Known::Live(_)));
    }

    #[test]
    fn an_unannounced_session_is_live_and_adopts_its_instance_later() {
        let mut sessions = Sessions::default();
        let key = sessions.live_or_implicit("s9").unwrap();
        assert_eq!(sessions.register("s9", "pi-7"), Registration::Unchanged);
        assert_eq!(sessions.known("s9"), Known::Live(key));
    }

    #[test]
    fn live_lifetimes_are_bounded_but_replacements_and_known_names_pass() {
        let mut sessions = Sessions::default();
        for n in 0..MAX_LIVE_SESSIONS {
            assert!(sessions.admits(&format!("s{n}"), "pi"));
            sessions.register(&format!("s{n}"), "pi");
        }
        assert!(!sessions.admits("new", "pi"));
        assert_eq!(sessions.register("new", "pi"), Registration::Refused);
        assert_eq!(sessions.known("new"), Known::Unknown);
        assert_eq!(sessions.live_or_implicit("implicit"), None);
        assert_eq!(sessions.known("implicit"), Known::Unknown);
        // A repeated registration and a replacement do not grow the table.
        assert!(sessions.admits("s0", "pi"));
        assert_eq!(sessions.register("s0", "pi"), Registration::Unchanged);
        assert!(sessions.admits("s1", "pi-2"));
        assert!(matches!(
            sessions.register("s1", "pi-2"),
            Registration::Started { replaced: Some(_) }
        ));
        assert!(sessions.live_or_implicit("s2").is_some());
        // A late duplicate of an ended registration stays harmless.
        sessions.end("s3");
        sessions.register("other", "pi");
        assert!(sessions.admits("s3", "pi"));
        assert_eq!(sessions.register("s3", "pi"), Registration::Unchanged);
        // Ending one frees a place.
        sessions.end("s4");
        assert!(sessions.admits("new", "pi"));
        assert!(matches!(
            sessions.register("new", "pi"),
            Registration::Started { replaced: None }
        ));
        assert_eq!(sessions.live_names().count(), MAX_LIVE_SESSIONS);
    }

    #[test]
    fn ended_names_are_bounded() {
        let mut sessions = Sessions::default();
        for n in 0..=MAX_ENDED_SESSIONS {
            sessions.register(&format!("s{n}"), "pi");
            sessions.end(&format!("s{n}"));
        }
        assert_eq!(sessions.known("s0"), Known::Unknown);
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert_eq!(sessions.ended.len(), MAX_ENDED_SESSIONS);
    }
}
