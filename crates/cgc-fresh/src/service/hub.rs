//! The notice hub: the set of subscribed connections, and delivery of
//! pushed `state` and `notice` frames to them.
//!
//! It is a part of the workspace actor rather than an actor of its own so
//! that delivery is counted synchronously: the one-time notice ledger only
//! burns a notice that reached at least one person's connection.

use std::collections::BTreeMap;

use actix::prelude::*;
use cgc_fresh_proto::{Envelope, ServerFrame};

use super::messages::{ConnId, Push};

#[derive(Default)]
pub struct NoticeHub {
    subscribers: BTreeMap<ConnId, Recipient<Push>>,
}

impl NoticeHub {
    pub fn subscribe(&mut self, conn: ConnId, to: Recipient<Push>) {
        self.subscribers.insert(conn, to);
        tracing::info!(
            event = "subscribed",
            conn,
            subscribers = self.subscribers.len()
        );
    }

    pub fn unsubscribe(&mut self, conn: ConnId) {
        if self.subscribers.remove(&conn).is_some() {
            tracing::info!(
                event = "unsubscribed",
                conn,
                subscribers = self.subscribers.len()
            );
        }
    }

    /// Sends `frame` to every live subscriber and returns how many got it.
    /// A subscriber whose connection is gone is dropped here.
    pub fn broadcast(&mut self, frame: &Envelope<ServerFrame>) -> usize {
        let mut delivered = 0;
        self.subscribers.retain(|_, to| {
            if to.connected() {
                to.do_send(Push(frame.clone()));
                delivered += 1;
                true
            } else {
                false
            }
        });
        delivered
    }

    /// [`NoticeHub::broadcast`], counting only the connections in
    /// `counted` (a notice's own session's carriers): every subscriber gets
    /// a copy, but a notice is spent only when it reached its session.
    pub fn broadcast_counting(
        &mut self,
        frame: &Envelope<ServerFrame>,
        counted: &[ConnId],
    ) -> usize {
        let mut delivered = 0;
        self.subscribers.retain(|conn, to| {
            if to.connected() {
                to.do_send(Push(frame.clone()));
                if counted.contains(conn) {
                    delivered += 1;
                }
                true
            } else {
                false
            }
        });
        delivered
    }
}
