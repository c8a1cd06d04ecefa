//! The notice hub: the set of subscribed connections, and delivery of
//! pushed `state` and `notice` frames to them.
//!
//! It is a part of the notices actor (`notices.rs`), which owns the
//! ledgers, so that delivery is counted synchronously: the one-time notice ledger only
//! burns a notice that reached at least one person's connection. "Reached"
//! means queued to a live connection within its bound (`outbox.rs`): a
//! connection being disconnected for not reading, or one a notice would
//! push past its hard cap, does not count. Each frame is encoded once and
//! the bytes are shared by every subscriber.

use std::collections::BTreeMap;

use bytes::Bytes;
use cgc_fresh_proto::{encode_server_frame, Envelope, ServerFrame};

use super::messages::{ConnId, Offer, Outlet};
use super::outbox::FrameKind;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "notices";

#[derive(Default)]
pub struct NoticeHub {
    subscribers: BTreeMap<ConnId, Outlet>,
}

impl NoticeHub {
    pub fn subscribe(&mut self, to: Outlet) {
        let conn = to.conn;
        self.subscribers.insert(conn, to);
        tracing::info!(
            component = COMPONENT,
            event = "subscribed",
            conn,
            subscribers = self.subscribers.len()
        );
    }

    pub fn unsubscribe(&mut self, conn: ConnId) {
        if self.subscribers.remove(&conn).is_some() {
            tracing::info!(
                component = COMPONENT,
                event = "unsubscribed",
                conn,
                subscribers = self.subscribers.len()
            );
        }
    }

    /// Pushes `frame` (a `state` or a `notice`) to every live subscriber and
    /// returns how many had it queued. A subscriber whose connection is gone
    /// or being disconnected is dropped here.
    pub fn broadcast(&mut self, frame: &Envelope<ServerFrame>) -> usize {
        self.deliver(frame, |_| true)
    }

    /// [`NoticeHub::broadcast`], counting only the connections in
    /// `counted` (a notice's own session's carriers): every subscriber gets
    /// a copy, but a notice is spent only when it reached its session.
    pub fn broadcast_counting(
        &mut self,
        frame: &Envelope<ServerFrame>,
        counted: &[ConnId],
    ) -> usize {
        self.deliver(frame, |conn| counted.contains(&conn))
    }

    fn deliver(&mut self, frame: &Envelope<ServerFrame>, counts: impl Fn(ConnId) -> bool) -> usize {
        let kind = match frame.frame {
            ServerFrame::Notice(_) => FrameKind::Notice,
            ServerFrame::State(_) if frame.id.is_none() => FrameKind::State,
            _ => FrameKind::Reply,
        };
        if self.subscribers.is_empty() {
            return 0;
        }
        let bytes = Bytes::from(encode_server_frame(frame));
        let mut delivered = 0;
        self.subscribers
            .retain(|conn, to| match to.offer(kind, &bytes) {
                Offer::Queued => {
                    if counts(*conn) {
                        delivered += 1;
                    }
                    true
                }
                Offer::NotQueued => false,
            });
        delivered
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actix::prelude::*;
    use cgc_fresh_proto::{Audience, Notice, NoticeCondition, NoticeLevel};

    use super::*;
    use crate::service::messages::Push;
    use crate::service::outbox::{Limits, Outbox};

    /// Records what a connection would have been told.
    struct Sink(Arc<Mutex<Vec<Push>>>);

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<Push> for Sink {
        type Result = ();
        fn handle(&mut self, msg: Push, _: &mut Self::Context) {
            self.0.lock().unwrap().push(msg);
        }
    }

    fn notice() -> Envelope<ServerFrame> {
        Envelope::new(ServerFrame::Notice(Notice {
            session: Some("s".into()),
            condition: NoticeCondition::PossiblyStale,
            level: NoticeLevel::Info,
            text: "the graph may be stale".into(),
            audience: Audience::User,
        }))
    }

    fn limits() -> Limits {
        Limits {
            bound: 1000,
            low_water: 250,
            max_in_flight: 8,
            in_flight_low: 2,
        }
    }

    #[test]
    fn a_notice_counts_only_for_connections_it_was_queued_to() {
        actix_rt::System::new().block_on(async {
            let mut hub = NoticeHub::default();
            let mut seen = Vec::new();
            let mut outboxes = Vec::new();
            for conn in 1..=3 {
                let got = Arc::new(Mutex::new(Vec::new()));
                let addr = Sink(got.clone()).start();
                let outbox = Arc::new(Outbox::new(conn, limits()));
                hub.subscribe(Outlet::new(conn, addr.recipient(), outbox.clone()));
                seen.push(got);
                outboxes.push(outbox);
            }
            // 1 reads; 2 is being disconnected; 3 is at its hard cap.
            outboxes[1].close();
            outboxes[2].add(limits().hard_cap() - 10);

            assert_eq!(hub.broadcast(&notice()), 1);
            // Let the sinks run.
            actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
            let kinds = |n: usize| -> Vec<String> {
                seen[n]
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|p| match p {
                        Push::Frame(kind, _) => format!("{kind:?}"),
                        Push::Disconnect => "Disconnect".into(),
                    })
                    .collect()
            };
            assert_eq!(kinds(0), vec!["Notice"]);
            assert!(kinds(1).is_empty());
            assert_eq!(kinds(2), vec!["Disconnect"]);
            assert!(outboxes[2].is_closing());
            // Only the reader's bytes were counted; the others left the hub.
            assert!(outboxes[0].queued() > 0);
            assert_eq!(outboxes[1].queued(), 0);
            assert_eq!(outboxes[2].queued(), limits().hard_cap() - 10);
            assert_eq!(hub.subscribers.len(), 1);
            assert_eq!(hub.broadcast(&notice()), 1);
        });
    }

    #[test]
    fn states_are_queued_to_a_subscriber_over_its_bound() {
        actix_rt::System::new().block_on(async {
            let mut hub = NoticeHub::default();
            let got = Arc::new(Mutex::new(Vec::new()));
            let addr = Sink(got.clone()).start();
            let outbox = Arc::new(Outbox::new(1, limits()));
            outbox.add(limits().hard_cap() * 2);
            hub.subscribe(Outlet::new(1, addr.recipient(), outbox));
            let state = Envelope::new(ServerFrame::State(cgc_fresh_proto::StateFrame {
                workspace: "/ws".into(),
                status: cgc_fresh_proto::FreshnessStatus::Unknown,
                last_synced_at: None,
                stale_since: None,
                last_error: None,
                edit_epoch: 1,
                syncing: false,
                watcher: None,
                backend: None,
                detail: None,
                warnings: Vec::new(),
                progress: None,
            }));
            // The connection keeps only the latest state, so a state is
            // never refused: it replaces the unsent one.
            assert_eq!(hub.broadcast(&state), 1);
            actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
            assert!(matches!(
                got.lock().unwrap()[..],
                [Push::Frame(FrameKind::State, _)]
            ));
        });
    }
}
