//! `SyncSchedulerActor`: when a sync starts.
//!
//! Owns the core's `SyncScheduler` sub-machine (batching window, single
//! flight and its one follow-up, per-lifetime budgets, the gap between two
//! starts) and the one wake-up timer it asks for (none while idle). It
//! hears from the drift observer what was observed (`SchedulerMail`), and
//! from the runner how each sync went (`SyncReport`); it tells the
//! observer which sync starts from which edit epoch and how it settled,
//! and the notices what to offer. The runner is told to start a sync by
//! the observer, which first records the snapshot the sync's manifest is
//! taken from.

use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::freshness::{
    Effect, Envelope, FreshnessPolicy, Input, Millis, SyncScheduler, ToNotices, ToObserver,
    ToScheduler,
};

use super::clock::now;
use super::messages::{NoticesMail, ObserverMail, SchedulerMail};
use super::notices::NoticesActor;
use super::sync_runner::{SyncEvent, SyncReport};

/// The actor's name in every log line.
const COMPONENT: &str = "sync_scheduler";

/// A runner report, as the scheduler received it: the observer keeps the
/// sync's snapshot (committed as the manifest on success) and the strategy
/// note shown in the state's `detail`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SyncNoted(pub SyncReport);

/// A decision of the scheduler for the shell (`CancelSync`): carried out
/// by the observer, where the sync waiting for its snapshot is known.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CarryOut(pub Effect);

/// Whether the scheduler has a sync queued (the state's `detail`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SchedulerQueued(pub bool);

/// Where the scheduler's words to the drift observer go: recipients, so
/// that the scheduler knows the messages, not the actor (which starts it).
pub struct ObserverLink {
    pub mail: Recipient<ObserverMail>,
    pub carry_out: Recipient<CarryOut>,
    pub queued: Recipient<SchedulerQueued>,
    pub noted: Recipient<SyncNoted>,
}

pub struct SyncSchedulerActor {
    scheduler: SyncScheduler,
    observer: ObserverLink,
    notices: Addr<NoticesActor>,
    /// The one armed wake-up: when, and its handle.
    wake: Option<(Millis, SpawnHandle)>,
    /// Whether a sync is queued, as last told to the observer (its state
    /// frame says so).
    queued: bool,
}

impl SyncSchedulerActor {
    pub fn new(
        scheduler: SyncScheduler,
        observer: ObserverLink,
        notices: Addr<NoticesActor>,
    ) -> Self {
        SyncSchedulerActor {
            scheduler,
            observer,
            notices,
            wake: None,
            queued: false,
        }
    }

    /// Hands `messages` to the sub-machine, in order, and sends on what it
    /// decides.
    fn deliver(&mut self, messages: Vec<ToScheduler>, ctx: &mut Context<Self>) {
        let mut to_notices = Vec::new();
        for message in messages {
            tracing::trace!(component = COMPONENT, event = "message", message = ?message);
            let sent = self.scheduler.handle(now(), message);
            self.send_on(sent, &mut to_notices);
        }
        if !to_notices.is_empty() {
            self.notices.do_send(NoticesMail(to_notices));
        }
        let queued = self.scheduler.has_queued();
        if queued != self.queued {
            self.queued = queued;
            self.observer.queued.do_send(SchedulerQueued(queued));
        }
        self.rearm_wake(ctx);
    }

    fn send_on(&mut self, sent: Vec<Envelope>, to_notices: &mut Vec<ToNotices>) {
        for envelope in sent {
            match envelope {
                Envelope::Observer(message) => {
                    if let ToObserver::SyncStarted {
                        flight,
                        from_epoch,
                        manual,
                        ..
                    } = &message
                    {
                        tracing::info!(
                            component = COMPONENT,
                            event = "decision",
                            decision = "start_sync",
                            flight = flight.get(),
                            from_epoch,
                            manual
                        );
                    }
                    self.observer.mail.do_send(ObserverMail(message));
                }
                Envelope::Notices(message) => to_notices.push(message),
                Envelope::Shell(effect) => {
                    if let Effect::CancelSync { flight } = &effect {
                        tracing::info!(
                            component = COMPONENT,
                            event = "decision",
                            decision = "cancel_sync",
                            flight = flight.get()
                        );
                    }
                    self.observer.carry_out.do_send(CarryOut(effect));
                }
                // The scheduler sends itself nothing.
                Envelope::Scheduler(message) => {
                    tracing::warn!(component = COMPONENT, event = "unrouted", message = ?message)
                }
            }
        }
    }

    /// Keeps exactly one one-shot timer armed for the scheduler's next
    /// deadline, and none when it has none. When it fires, the observer is
    /// woken (edits may have settled by then) and tells the scheduler.
    fn rearm_wake(&mut self, ctx: &mut Context<Self>) {
        let wanted = self.scheduler.next_deadline();
        if self.wake.as_ref().map(|(at, _)| *at) == wanted {
            return;
        }
        if let Some((_, handle)) = self.wake.take() {
            ctx.cancel_future(handle);
        }
        if let Some(at) = wanted {
            let delay = Duration::from_millis(at.0.saturating_sub(now().0));
            let handle = ctx.run_later(delay, |act, _| {
                act.wake = None;
                tracing::debug!(component = COMPONENT, event = "wake");
                act.observer
                    .mail
                    .do_send(ObserverMail(ToObserver::Input(Input::Wake)));
            });
            self.wake = Some((at, handle));
        }
    }
}

impl Actor for SyncSchedulerActor {
    type Context = Context<Self>;
}

impl Handler<SchedulerMail> for SyncSchedulerActor {
    type Result = ();
    fn handle(&mut self, msg: SchedulerMail, ctx: &mut Self::Context) {
        self.deliver(msg.0, ctx);
    }
}

impl Handler<SyncReport> for SyncSchedulerActor {
    type Result = ();
    fn handle(&mut self, msg: SyncReport, ctx: &mut Self::Context) {
        let flight = msg.flight;
        // The observer keeps the manifest and the strategy note; it hears
        // of the report before the settlement that follows from it.
        self.observer.noted.do_send(SyncNoted(SyncReport {
            flight,
            event: msg.event.clone(),
        }));
        let input = match msg.event {
            SyncEvent::Busy { holder } => Input::SyncBusy { flight, holder },
            SyncEvent::Declined { reason } => Input::SyncDeclined { flight, reason },
            SyncEvent::Spawned { pid, cost } => Input::SyncSpawned { flight, pid, cost },
            SyncEvent::OverBudget { cost } => Input::SyncOverBudget { flight, cost },
            SyncEvent::Finished(outcome) => Input::SyncFinished { flight, outcome },
            // Told to the person once per session lifetime, only when the
            // installed CGC cannot run the incremental driver.
            SyncEvent::Strategy {
                note,
                driver_unavailable: true,
                ..
            } => Input::SyncStrategyFellBack {
                flight,
                reason: note,
            },
            SyncEvent::Strategy { .. } | SyncEvent::Progress(_) => return,
        };
        self.deliver(vec![ToScheduler::Input(input)], ctx);
    }
}

/// A reloaded configuration's freshness policy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SchedulerPolicy(pub FreshnessPolicy);

impl Handler<SchedulerPolicy> for SyncSchedulerActor {
    type Result = ();
    fn handle(&mut self, msg: SchedulerPolicy, ctx: &mut Self::Context) {
        self.scheduler.set_policy(msg.0);
        self.rearm_wake(ctx);
    }
}
