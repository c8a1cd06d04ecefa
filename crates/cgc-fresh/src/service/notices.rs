//! `NoticesActor`: the one-time notices of every session lifetime and the
//! connections they are pushed to.
//!
//! Owns the core's `Notices` sub-machine (the per-lifetime ledgers) and the
//! subscriber hub (`hub.rs`), so that a delivery is counted synchronously:
//! a notice is pushed to every subscriber (a `cgc-fresh events` reader sees
//! a copy), and spent on its lifetime's ledger only when a connection that
//! carries that lifetime had it queued. Which connections carry which
//! lifetime is the drift observer's knowledge, sent here after every
//! `session_start` (`CarriersOf`), before the offers that follow from it;
//! a closed connection and an ended lifetime are dropped here as they are
//! heard of. State frames go through the same hub.

use std::collections::BTreeMap;

use actix::prelude::*;
use cgc_fresh_core::freshness::{Effect, Notices, SessionKey, ToNotices};
use cgc_fresh_proto::{Audience, Envelope, Notice, NoticesFrame, RequestId, ServerFrame};

use super::hub::NoticeHub;
use super::messages::{ConnId, InFlight, NoticesMail, Outlet};

/// The actor's name in every log line.
const COMPONENT: &str = "notices";

pub struct NoticesActor {
    notices: Notices,
    hub: NoticeHub,
    /// The connections that carry each attached lifetime.
    carriers: BTreeMap<SessionKey, Vec<ConnId>>,
}

impl NoticesActor {
    pub fn new(workspace_root: &str) -> Self {
        NoticesActor {
            notices: Notices::new(workspace_root),
            hub: NoticeHub::default(),
            carriers: BTreeMap::new(),
        }
    }

    /// Pushes a notice the ledger let through, and counts it when a
    /// carrier of its lifetime got it.
    fn push(&mut self, effect: Effect) {
        let Effect::Notice {
            session,
            condition,
            level,
            text,
        } = effect
        else {
            return;
        };
        let frame = Envelope::new(ServerFrame::Notice(Notice {
            session: Some(session.name.clone()),
            condition,
            level,
            text: text.clone(),
            audience: Audience::User,
        }));
        let carriers = self.carriers.get(&session).map_or(&[][..], Vec::as_slice);
        let delivered = self.hub.broadcast_counting(&frame, carriers);
        tracing::info!(component = COMPONENT, event = "notice", session = %session, condition = ?condition, level = ?level, delivered_to_session = delivered, text = %text);
        if delivered > 0 {
            // Spent synchronously: nothing can re-offer it in between.
            let effects = self
                .notices
                .handle(ToNotices::Delivered { session, condition });
            debug_assert!(effects.is_empty());
        }
    }
}

impl Actor for NoticesActor {
    type Context = Context<Self>;
}

impl Handler<NoticesMail> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: NoticesMail, _: &mut Self::Context) {
        for message in msg.0 {
            tracing::trace!(component = COMPONENT, event = "message", message = ?message);
            if let ToNotices::LifetimeClosed {
                lifetime,
                detached: false,
            } = &message
            {
                self.carriers
                    .retain(|session, _| session.lifetime != *lifetime);
            }
            for effect in self.notices.handle(message) {
                self.push(effect);
            }
        }
    }
}

/// The connections carrying `session`, as the drift observer knows them
/// after a `session_start`.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct CarriersOf {
    pub session: SessionKey,
    pub carriers: Vec<ConnId>,
}

impl Handler<CarriersOf> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: CarriersOf, _: &mut Self::Context) {
        self.carriers.insert(msg.session, msg.carriers);
    }
}

/// A connection subscribed to pushed frames.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe(pub Outlet);

impl Handler<Subscribe> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: Subscribe, _: &mut Self::Context) {
        self.hub.subscribe(msg.0);
    }
}

/// A connection closed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe(pub ConnId);

impl Handler<Unsubscribe> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: Unsubscribe, _: &mut Self::Context) {
        self.hub.unsubscribe(msg.0);
        // It carries nothing any more; a lifetime nothing carries keeps
        // an empty entry until it ends or a start carries it again.
        for carriers in self.carriers.values_mut() {
            carriers.retain(|conn| *conn != msg.0);
        }
    }
}

/// A state frame for every subscriber.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PushState(pub Envelope<ServerFrame>);

impl Handler<PushState> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: PushState, _: &mut Self::Context) {
        self.hub.broadcast(&msg.0);
    }
}

/// `take_notices` for the live lifetime `session`: its held notices are
/// answered to `reply_to` and count as delivered.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TakeHeld {
    pub session: SessionKey,
    pub id: Option<RequestId>,
    pub reply_to: Outlet,
    /// The request stays in flight until its reply is counted.
    pub in_flight: InFlight,
}

impl Handler<TakeHeld> for NoticesActor {
    type Result = ();
    fn handle(&mut self, msg: TakeHeld, _: &mut Self::Context) {
        let TakeHeld {
            session,
            id,
            reply_to,
            in_flight: _in_flight,
        } = msg;
        let taken = self.notices.take_held(session.lifetime).unwrap_or_default();
        tracing::info!(component = COMPONENT, event = "notices_taken", conn = reply_to.conn, session = %session, count = taken.len());
        let notices = taken
            .into_iter()
            .map(|(condition, text)| Notice {
                session: Some(session.name.clone()),
                condition,
                level: cgc_fresh_core::freshness::notice_text::level(condition),
                text,
                audience: Audience::User,
            })
            .collect();
        reply_to.reply(&Envelope::with_id(
            id,
            ServerFrame::Notices(NoticesFrame {
                session: session.name,
                notices,
            }),
        ));
    }
}
