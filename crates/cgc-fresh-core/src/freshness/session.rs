//! Which harness sessions are live, detached, or ended.
//!
//! Spec, "Freshness observation rebinds on session replacement": when the
//! harness replaces the session and re-runs the extension with a fresh API
//! instance, drift observation re-binds to the new session and its sync
//! budget re-arms; same-API registration stays one idempotent registration.
//!
//! A session *lifetime* starts with `session_start` and ends with
//! `session_shutdown` or a replacement. Each lifetime has its own
//! [`Lifetime`] id, budget, notice ledger and one watcher attempt; outside
//! this module a lifetime travels as a [`SessionKey`] (name + lifetime), so
//! nothing said about one lifetime of a name ever lands on another. Several
//! may be live at once (two harness connections in one workspace). The
//! rules, by what is known about the session name:
//!
//! - live, same instance: a repeated registration — nothing changes (the
//!   connection it came over now carries the lifetime too);
//! - live, registered without an instance (see below): the instance is
//!   adopted — nothing else changes;
//! - detached (every connection that carried it closed), same instance: the
//!   harness reconnected and replayed its `session_start` — the lifetime is
//!   **re-attached**, with its budget, notices and pending work;
//! - live or detached, another instance: the session was replaced by a new
//!   extension instance — the old lifetime ends and a new one starts;
//! - ended, same instance: a late duplicate of the ended registration —
//!   ignored, so an ended session stays ended;
//! - ended with another instance, or never seen: a new lifetime (this is how
//!   `/resume` of an earlier session rebinds).
//!
//! A lifetime may be *owned* by a process (`owner_pid` in its
//! `session_start`, e.g. the Claude Code process whose short-lived hooks
//! report it): it then lives until `session_shutdown` or until that process
//! exits, and no connection closing detaches it.
//!
//! A lifetime is *carried* by the connections its `session_start` came over.
//! When the last of them closes, the lifetime is *detached*: its work stops
//! (the spec's teardown when the harness goes away), but it is kept, so
//! that a harness that lost its connection and replays `session_start`
//! carries on where it was rather than as an ended session.
//!
//! A `tool_call` of a modifying tool from a session never seen before starts
//! a lifetime without an instance: missing a real edit would be a false
//! "fresh", so the conservative reading of an unannounced session is "live".
//!
//! Ended names are remembered up to [`MAX_ENDED_SESSIONS`], oldest forgotten
//! first, so a long-running service does not grow without bound.
//!
//! Live lifetimes (detached ones included) are bounded too, by
//! [`MAX_LIVE_SESSIONS`]: a harness that starts sessions (or reports edits
//! under ever-new names) without ending them would otherwise grow the table
//! for as long as the service runs. At the bound the oldest detached
//! lifetime is ended to make room; with none detached, a `session_start` for
//! a new name is refused (the shell answers with an error and nothing
//! changes), and an edit under a new name starts no lifetime but still
//! counts, like an edit under an ended session's name: the bound can cost a
//! budget or a notice, never the record's truth. Replacing a live session
//! does not grow the table and is always admitted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

/// How many ended session names are remembered.
pub const MAX_ENDED_SESSIONS: usize = 1_024;

/// How many session lifetimes may be live (attached or detached) at once.
/// Far above any real workspace (one per open harness), low enough to bound
/// memory.
pub const MAX_LIVE_SESSIONS: usize = 1_024;

/// One lifetime of a session name (a name can have several over time).
/// Numbered from 1 in the order lifetimes start, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lifetime(u64);

impl Lifetime {
    /// Lifetime number `n`. The machine numbers lifetimes from 1 in the
    /// order they start; a key the machine did not hand out is simply a
    /// lifetime that is not current (reference models and tests use this).
    pub const fn new(n: u64) -> Self {
        Lifetime(n)
    }

    /// The number, for logs and registries.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.0)
    }
}

/// A session lifetime as the rest of the service names it: the harness's
/// session name and which lifetime of that name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionKey {
    /// The session id the harness uses.
    pub name: String,
    /// Which lifetime of that name.
    pub lifetime: Lifetime,
}

impl fmt::Display for SessionKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}#{}", self.name, self.lifetime.0)
    }
}

/// A client connection, as the shell numbers them.
pub type ConnectionId = u64;

/// A process id (the owner of a session lifetime).
pub type OwnerPid = u32;

/// A live session lifetime.
#[derive(Debug, Clone)]
pub(crate) struct LiveSession {
    pub(crate) key: Lifetime,
    instance: Option<String>,
    /// Whether this lifetime made its one watcher attempt (started, busy,
    /// declined or failed to spawn).
    pub(crate) watcher_attempted: bool,
    /// The open connections that carry it (its `session_start` came over
    /// them).
    carriers: BTreeSet<ConnectionId>,
    /// Every connection that carried it closed; waiting for a replay.
    detached: bool,
    /// The process whose exit ends it, when it has one.
    owner: Option<OwnerPid>,
}

/// What a `session_start` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registration {
    /// Already registered (or a late duplicate of an ended registration):
    /// nothing changed that anyone can observe.
    Unchanged,
    /// A new lifetime started; `replaced` is the lifetime it ended.
    Started {
        started: Lifetime,
        replaced: Option<Lifetime>,
    },
    /// A detached lifetime was taken up again by its own instance.
    Reattached(Lifetime),
    /// [`MAX_LIVE_SESSIONS`] lifetimes are live, none detached, and this one
    /// would be another: nothing changed.
    Refused,
}

/// What is known about a session name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    Live(Lifetime),
    Detached(Lifetime),
    Ended,
    Unknown,
}

/// The live session lifetimes and the recently ended names.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sessions {
    live: BTreeMap<String, LiveSession>,
    /// Detached lifetimes, oldest first (the first to end for room).
    detached_order: VecDeque<Lifetime>,
    ended: BTreeMap<String, Option<String>>,
    ended_order: VecDeque<String>,
    next_key: u64,
}

impl Sessions {
    /// Applies `session_start{session: name}` from extension `instance`,
    /// received over `carrier`. The caller makes room first
    /// ([`Sessions::oldest_detached_if_full`]).
    pub(crate) fn register(
        &mut self,
        name: &str,
        instance: &str,
        carrier: Option<ConnectionId>,
        owner: Option<OwnerPid>,
    ) -> Registration {
        if let Some(live) = self.live.get_mut(name) {
            let same = match &live.instance {
                Some(known) => known == instance,
                None => {
                    live.instance = Some(instance.to_string());
                    true
                }
            };
            if same {
                live.carriers.extend(carrier);
                if owner.is_some() {
                    live.owner = owner;
                }
                if live.detached && !live.carriers.is_empty() {
                    live.detached = false;
                    let key = live.key;
                    self.detached_order.retain(|detached| *detached != key);
                    return Registration::Reattached(key);
                }
                return Registration::Unchanged;
            }
            let replaced = live.key;
            self.detached_order.retain(|detached| *detached != replaced);
            let started = self.start(name, Some(instance), carrier, owner);
            return Registration::Started {
                started,
                replaced: Some(replaced),
            };
        }
        if let Some(ended_instance) = self.ended.get(name) {
            if ended_instance.as_deref() == Some(instance) {
                return Registration::Unchanged;
            }
        }
        if self.full() {
            return Registration::Refused;
        }
        let started = self.start(name, Some(instance), carrier, owner);
        Registration::Started {
            started,
            replaced: None,
        }
    }

    /// Whether [`Sessions::register`] would admit this registration (any
    /// outcome but [`Registration::Refused`]) once room was made, without
    /// doing it.
    pub(crate) fn admits(&self, name: &str, instance: &str) -> bool {
        self.live.contains_key(name)
            || self
                .ended
                .get(name)
                .is_some_and(|ended| ended.as_deref() == Some(instance))
            || !self.full()
            || !self.detached_order.is_empty()
    }

    /// When the table is full: the oldest detached lifetime, which the
    /// caller ends to make room for `name` (unless `name` is already live).
    pub(crate) fn oldest_detached_if_full(&self, name: &str, instance: &str) -> Option<SessionKey> {
        let late_duplicate = self
            .ended
            .get(name)
            .is_some_and(|ended| ended.as_deref() == Some(instance));
        if !self.full() || self.live.contains_key(name) || late_duplicate {
            return None;
        }
        let oldest = *self.detached_order.front()?;
        self.key(oldest)
    }

    /// The live lifetime of `name`, starting one without an instance when
    /// the name was never seen; `None` for an ended or detached name, or a
    /// new one while the table is full.
    pub(crate) fn live_or_implicit(&mut self, name: &str) -> Option<Lifetime> {
        match self.known(name) {
            Known::Live(key) => Some(key),
            Known::Ended | Known::Detached(_) => None,
            Known::Unknown if self.full() => None,
            Known::Unknown => Some(self.start(name, None, None, None)),
        }
    }

    /// Whether [`MAX_LIVE_SESSIONS`] lifetimes are live.
    fn full(&self) -> bool {
        self.live.len() >= MAX_LIVE_SESSIONS
    }

    /// What is known about `name`.
    pub(crate) fn known(&self, name: &str) -> Known {
        if let Some(live) = self.live.get(name) {
            if live.detached {
                Known::Detached(live.key)
            } else {
                Known::Live(live.key)
            }
        } else if self.ended.contains_key(name) {
            Known::Ended
        } else {
            Known::Unknown
        }
    }

    /// Ends the lifetime of `name` (live or detached); returns it, or `None`
    /// when `name` had none.
    pub(crate) fn end(&mut self, name: &str) -> Option<Lifetime> {
        let live = self.live.remove(name)?;
        self.detached_order.retain(|detached| *detached != live.key);
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

    /// `connection` closed: it no longer carries any lifetime. Returns the
    /// lifetimes it was the last carrier of, now detached.
    pub(crate) fn connection_closed(&mut self, connection: ConnectionId) -> Vec<Lifetime> {
        let mut detached = Vec::new();
        for live in self.live.values_mut() {
            // A lifetime its owner process keeps is not the connection's.
            if live.carriers.remove(&connection)
                && live.carriers.is_empty()
                && !live.detached
                && live.owner.is_none()
            {
                live.detached = true;
                // A detached lifetime gets its watcher attempt back: its
                // watcher (if any) is stopped with it, through no failure.
                live.watcher_attempted = false;
                detached.push(live.key);
            }
        }
        self.detached_order.extend(detached.iter().copied());
        detached
    }

    /// The names of the lifetimes `pid` owns (they end with it).
    pub(crate) fn owned_by(&self, pid: OwnerPid) -> Vec<String> {
        self.live
            .iter()
            .filter(|(_, live)| live.owner == Some(pid))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The owner process of lifetime `key`, if it has one.
    pub(crate) fn owner(&self, key: Lifetime) -> Option<OwnerPid> {
        self.get(key).and_then(|(_, live)| live.owner)
    }

    /// The open connections that carry lifetime `key`.
    pub(crate) fn carriers(&self, key: Lifetime) -> impl Iterator<Item = ConnectionId> + '_ {
        self.get(key)
            .into_iter()
            .flat_map(|(_, live)| live.carriers.iter().copied())
    }

    /// Lifetime `key` with its name, if it is live or detached.
    pub(crate) fn key(&self, key: Lifetime) -> Option<SessionKey> {
        self.name(key).map(|name| SessionKey {
            name: name.to_string(),
            lifetime: key,
        })
    }

    /// Whether `key` is the current lifetime of its name and attached.
    pub(crate) fn is_current(&self, key: &SessionKey) -> bool {
        self.known(&key.name) == Known::Live(key.lifetime)
    }

    /// The name and state of live lifetime `key`.
    pub(crate) fn get(&self, key: Lifetime) -> Option<(&str, &LiveSession)> {
        self.live
            .iter()
            .find(|(_, live)| live.key == key)
            .map(|(name, live)| (name.as_str(), live))
    }

    /// The name and mutable state of live lifetime `key`.
    pub(crate) fn get_mut(&mut self, key: Lifetime) -> Option<(&str, &mut LiveSession)> {
        self.live
            .iter_mut()
            .find(|(_, live)| live.key == key)
            .map(|(name, live)| (name.as_str(), live))
    }

    /// The name of live lifetime `key`.
    pub(crate) fn name(&self, key: Lifetime) -> Option<&str> {
        self.get(key).map(|(name, _)| name)
    }

    /// The names of the attached live sessions, sorted.
    pub(crate) fn live_names(&self) -> impl Iterator<Item = &str> {
        self.live
            .iter()
            .filter(|(_, live)| !live.detached)
            .map(|(name, _)| name.as_str())
    }

    fn start(
        &mut self,
        name: &str,
        instance: Option<&str>,
        carrier: Option<ConnectionId>,
        owner: Option<OwnerPid>,
    ) -> Lifetime {
        self.forget_ended(name);
        self.next_key += 1;
        let key = Lifetime(self.next_key);
        self.live.insert(
            name.to_string(),
            LiveSession {
                key,
                instance: instance.map(str::to_string),
                watcher_attempted: false,
                carriers: carrier.into_iter().collect(),
                detached: false,
                owner,
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

    fn started_fresh(registration: Registration) -> bool {
        matches!(registration, Registration::Started { replaced: None, .. })
    }

    #[test]
    fn registering_the_same_instance_twice_is_one_registration() {
        let mut sessions = Sessions::default();
        assert!(started_fresh(sessions.register(
            "s1",
            "pi-1",
            Some(1),
            None
        )));
        let Known::Live(key) = sessions.known("s1") else {
            panic!("s1 should be live")
        };
        assert_eq!(
            sessions.register("s1", "pi-1", Some(1), None),
            Registration::Unchanged
        );
        assert_eq!(sessions.known("s1"), Known::Live(key));
        assert_eq!(sessions.live_names().count(), 1);
    }

    #[test]
    fn a_new_instance_replaces_the_lifetime() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1", None, None);
        let Known::Live(old) = sessions.known("s1") else {
            panic!()
        };
        assert!(matches!(
            sessions.register("s1", "pi-2", None, None),
            Registration::Started { replaced: Some(replaced), .. } if replaced == old
        ));
        assert_ne!(sessions.known("s1"), Known::Live(old));
    }

    #[test]
    fn an_ended_session_stays_ended_for_its_own_instance_only() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1", None, None);
        assert!(sessions.end("s1").is_some());
        assert_eq!(sessions.end("s1"), None);
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert_eq!(sessions.live_or_implicit("s1"), None);
        assert_eq!(
            sessions.register("s1", "pi-1", None, None),
            Registration::Unchanged
        );
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert!(started_fresh(sessions.register("s1", "pi-2", None, None)));
        assert!(matches!(sessions.known("s1"), Known::Live(_)));
    }

    #[test]
    fn an_unannounced_session_is_live_and_adopts_its_instance_later() {
        let mut sessions = Sessions::default();
        let key = sessions.live_or_implicit("s9").unwrap();
        assert_eq!(
            sessions.register("s9", "pi-7", None, None),
            Registration::Unchanged
        );
        assert_eq!(sessions.known("s9"), Known::Live(key));
    }

    #[test]
    fn the_last_carrier_closing_detaches_and_a_replay_reattaches_the_same_lifetime() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1", Some(1), None);
        let Known::Live(key) = sessions.known("s1") else {
            panic!()
        };
        // A second connection of the same instance carries it too.
        sessions.register("s1", "pi-1", Some(2), None);
        assert_eq!(sessions.carriers(key).collect::<Vec<_>>(), [1, 2]);
        assert!(sessions.connection_closed(1).is_empty());
        assert_eq!(sessions.known("s1"), Known::Live(key));
        assert_eq!(sessions.connection_closed(2), [key]);
        assert_eq!(sessions.known("s1"), Known::Detached(key));
        assert_eq!(sessions.live_names().count(), 0);
        // Edits under a detached name start nothing.
        assert_eq!(sessions.live_or_implicit("s1"), None);
        assert_eq!(
            sessions.register("s1", "pi-1", Some(3), None),
            Registration::Reattached(key)
        );
        assert_eq!(sessions.known("s1"), Known::Live(key));
        assert_eq!(sessions.carriers(key).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn a_detached_lifetime_replaced_by_another_instance_ends() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1", Some(1), None);
        let Known::Live(old) = sessions.known("s1") else {
            panic!()
        };
        sessions.connection_closed(1);
        assert!(matches!(
            sessions.register("s1", "pi-2", Some(2), None),
            Registration::Started { replaced: Some(replaced), .. } if replaced == old
        ));
        assert!(sessions.detached_order.is_empty());
    }

    #[test]
    fn a_connection_that_carried_a_replaced_lifetime_detaches_nothing() {
        let mut sessions = Sessions::default();
        sessions.register("s1", "pi-1", Some(1), None);
        sessions.register("s1", "pi-2", Some(2), None);
        let Known::Live(new) = sessions.known("s1") else {
            panic!()
        };
        assert!(sessions.connection_closed(1).is_empty());
        assert_eq!(sessions.known("s1"), Known::Live(new));
    }

    #[test]
    fn live_lifetimes_are_bounded_but_replacements_and_known_names_pass() {
        let mut sessions = Sessions::default();
        for n in 0..MAX_LIVE_SESSIONS {
            assert!(sessions.admits(&format!("s{n}"), "pi"));
            sessions.register(&format!("s{n}"), "pi", None, None);
        }
        assert!(!sessions.admits("new", "pi"));
        assert_eq!(sessions.oldest_detached_if_full("new", "pi"), None);
        assert_eq!(
            sessions.register("new", "pi", None, None),
            Registration::Refused
        );
        assert_eq!(sessions.known("new"), Known::Unknown);
        assert_eq!(sessions.live_or_implicit("implicit"), None);
        assert_eq!(sessions.known("implicit"), Known::Unknown);
        // A repeated registration and a replacement do not grow the table.
        assert!(sessions.admits("s0", "pi"));
        assert_eq!(
            sessions.register("s0", "pi", None, None),
            Registration::Unchanged
        );
        assert!(sessions.admits("s1", "pi-2"));
        assert!(matches!(
            sessions.register("s1", "pi-2", None, None),
            Registration::Started {
                replaced: Some(_),
                ..
            }
        ));
        assert!(sessions.live_or_implicit("s2").is_some());
        // A late duplicate of an ended registration stays harmless.
        sessions.end("s3");
        sessions.register("other", "pi", None, None);
        assert!(sessions.admits("s3", "pi"));
        assert_eq!(
            sessions.register("s3", "pi", None, None),
            Registration::Unchanged
        );
        // Ending one frees a place.
        sessions.end("s4");
        assert!(sessions.admits("new", "pi"));
        assert!(started_fresh(sessions.register("new", "pi", None, None)));
        assert_eq!(sessions.live_names().count(), MAX_LIVE_SESSIONS);
    }

    #[test]
    fn at_the_bound_the_oldest_detached_lifetime_makes_room() {
        let mut sessions = Sessions::default();
        for n in 0..MAX_LIVE_SESSIONS {
            sessions.register(&format!("s{n}"), "pi", Some(n as u64), None);
        }
        sessions.connection_closed(7);
        sessions.connection_closed(3);
        assert!(sessions.admits("new", "pi"));
        let oldest = sessions.oldest_detached_if_full("new", "pi").unwrap();
        assert_eq!(oldest.name, "s7");
        sessions.end(&oldest.name);
        assert!(started_fresh(sessions.register("new", "pi", None, None)));
        assert_eq!(
            sessions
                .oldest_detached_if_full("other", "pi")
                .unwrap()
                .name,
            "s3"
        );
    }

    #[test]
    fn ended_names_are_bounded() {
        let mut sessions = Sessions::default();
        for n in 0..=MAX_ENDED_SESSIONS {
            sessions.register(&format!("s{n}"), "pi", None, None);
            sessions.end(&format!("s{n}"));
        }
        assert_eq!(sessions.known("s0"), Known::Unknown);
        assert_eq!(sessions.known("s1"), Known::Ended);
        assert_eq!(sessions.ended.len(), MAX_ENDED_SESSIONS);
    }

    #[test]
    fn an_owned_lifetime_outlives_its_connections_and_ends_with_its_owner() {
        let mut sessions = Sessions::default();
        sessions.register("cc", "claude-1", Some(1), Some(4242));
        let Known::Live(key) = sessions.known("cc") else {
            panic!()
        };
        assert_eq!(sessions.owner(key), Some(4242));
        assert!(sessions.connection_closed(1).is_empty());
        assert_eq!(sessions.known("cc"), Known::Live(key));
        assert_eq!(sessions.owned_by(4242), ["cc"]);
        assert!(sessions.owned_by(7).is_empty());
    }
}
