//! The checks after every step: a sync's start against the rules for
//! starting, and the invariants between the machine and the shadow.

use cgc_fresh_core::freshness::{Effect, FlightId, Input, Lifetime, Millis, SessionKey};
use cgc_fresh_fuzz::round_trip;
use cgc_fresh_fuzz::workspace_model::{OpenFlight, WORKSPACE_ROOT};
use cgc_fresh_proto::{Envelope, FreshnessStatus, ServerFrame};

use crate::inputs::Expect;
use crate::scenario::NAMES;
use crate::World;

impl World {
    /// A `StartSync`: checked against the rules for starting, then opened.
    pub(crate) fn check_start(&mut self, flight: FlightId, session: Option<&str>, manual: bool) {
        let shadow = &mut self.shadow;
        assert!(
            shadow.flight.is_none(),
            "a second sync started while {:?} occupies the workspace",
            shadow.flight
        );
        assert!(
            !shadow.watcher.verified(),
            "a sync started while a verified watcher owns freshness"
        );
        assert!(
            shadow.last_started.is_none_or(|last| flight > last),
            "flight ids do not increase"
        );
        let payer = if manual {
            if let Some(name) = session {
                assert!(
                    shadow.lifetime(name).is_some(),
                    "a manual sync names {name}, which is not live"
                );
            }
            None
        } else {
            assert!(self.policy.auto_sync, "an automatic sync without autoSync");
            assert!(
                shadow.watcher.running().is_none(),
                "an automatic sync started while a watcher runs"
            );
            assert!(
                !shadow.any_unsettled(),
                "an automatic sync started while an edit is unsettled"
            );
            let name = session.unwrap_or_else(|| panic!("an automatic sync names no payer"));
            let lifetime = shadow
                .lifetime(name)
                .unwrap_or_else(|| panic!("the payer {name} is not live"));
            let spent = shadow.spawns.get(&lifetime).copied().unwrap_or(0);
            assert!(
                spent < self.policy.max_syncs_per_session,
                "{name} has no slot left ({spent} spawned)"
            );
            Some(lifetime)
        };
        shadow.flight = Some(OpenFlight {
            id: flight,
            edits_at_start: shadow.edits.len(),
            unsettled_at_start: shadow.any_unsettled(),
            payer,
            draining: false,
            spawned: false,
        });
        shadow.last_started = Some(flight);
    }

    pub(crate) fn check_invariants(&mut self, expect: &Expect) {
        let shadow = &mut self.shadow;
        let machine = &self.machine;
        let record = machine.record();

        assert_eq!(
            record.edit_epoch,
            shadow.edits.len() as u64,
            "the epoch does not count the observed edits"
        );

        // No false freshness.
        let verified = shadow.watcher.verified();
        if verified {
            shadow.fresh_basis = None;
        }
        if shadow.watcher.owes_fresh() {
            assert_eq!(
                record.status,
                FreshnessStatus::Fresh,
                "a verified watcher that applied every edit but not fresh"
            );
            assert_eq!(
                record.stale_since, None,
                "a verified watcher with a stale episode"
            );
        } else if verified {
            // The watcher is applying what waits (`syncing`, no stale
            // episode) until `watcherApplyMs` has passed since the oldest
            // waiting edit; then the episode is open, dated at that edit.
            match record.status {
                FreshnessStatus::Syncing => assert_eq!(
                    record.stale_since, None,
                    "a stale episode while the watcher is applying an edit"
                ),
                FreshnessStatus::PossiblyStale => assert!(
                    record.stale_since.is_some_and(|since| since.get()
                        + self.policy.watcher_apply_ms
                        <= shadow.now),
                    "a stale episode under a verified watcher within its bound"
                ),
                other => panic!("{other:?} while an edit waits for the watcher"),
            }
        }
        if record.status == FreshnessStatus::Fresh && !verified {
            assert_eq!(
                shadow.fresh_basis,
                Some(shadow.edits.len()),
                "fresh, but no successful sync covers every edit and no verified watcher runs"
            );
        }

        // The watcher as the shadow sees it.
        assert_eq!(
            machine.watcher_owns_freshness(),
            verified,
            "who owns freshness"
        );
        if let Err(problem) = shadow.watcher.check_facts(record.watcher.as_ref()) {
            panic!("{problem}");
        }
        for name in NAMES {
            let lifetime = shadow.lifetime(name);
            let allowed = shadow.watcher.may_attempt(lifetime);
            let key = SessionKey {
                name: name.to_owned(),
                lifetime: Lifetime::new(lifetime.unwrap_or(0)),
            };
            assert_eq!(
                machine.watcher_attempt_allowed(&key),
                allowed,
                "watcher attempt of {name}"
            );
        }

        // Sessions and budgets.
        let live: Vec<&str> = machine.live_sessions().collect();
        let expected_live: Vec<&str> = shadow.live.keys().copied().collect();
        assert_eq!(live, expected_live, "live sessions");
        for name in NAMES {
            let spent = shadow
                .lifetime(name)
                .map(|lifetime| shadow.spawns.get(&lifetime).copied().unwrap_or(0));
            assert_eq!(
                machine.automatic_syncs_spawned(name),
                spent,
                "automatic syncs of {name}"
            );
        }
        for spent in shadow.spawns.values() {
            assert!(
                *spent <= self.policy.max_syncs_per_session,
                "a session spawned {spent} automatic syncs"
            );
        }

        // The sync slot.
        assert_eq!(
            machine.current_flight(),
            shadow.flight.as_ref().map(|flight| flight.id),
            "the occupying sync"
        );
        let frame = machine.state_frame();
        assert_eq!(frame.status, record.status);
        assert_eq!(frame.edit_epoch, record.edit_epoch);
        assert_eq!(frame.workspace, WORKSPACE_ROOT);
        assert_eq!(
            frame.syncing,
            shadow
                .flight
                .as_ref()
                .is_some_and(|flight| !flight.draining),
            "syncing"
        );
        round_trip::assert_server_round_trip(&Envelope::new(ServerFrame::State(frame)));

        // Deadlines.
        let deadline = machine.next_deadline();
        if shadow.flight.is_some() {
            assert_eq!(
                deadline, None,
                "a deadline while a sync occupies the workspace"
            );
        }
        if expect.wake {
            assert!(
                deadline.is_none_or(|deadline| deadline.get() > shadow.now),
                "a deadline at or before the wake that should have handled it: {deadline:?}"
            );
        }
        if deadline.is_none() && shadow.flight.is_none() {
            let mut idle = machine.clone();
            let later = idle.handle(Millis(shadow.now.saturating_add(100_000_000)), Input::Wake);
            assert!(
                !later
                    .iter()
                    .any(|effect| matches!(effect, Effect::StartSync { .. })),
                "no deadline, yet a sync starts when time passes: {later:?}"
            );
        }
    }
}
