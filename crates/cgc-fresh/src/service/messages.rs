//! Typed messages between the service's actors. No stringly-typed dispatch:
//! each thing an actor can be asked is one struct here.

use std::sync::Arc;

use actix::prelude::*;
use bytes::Bytes;
use cgc_fresh_proto::{encode_server_frame, ClientFrame, Envelope, RequestId, ServerFrame};

pub use super::outbox::ConnId;
use super::outbox::{admit_notice, Admission, FrameKind, Outbox};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "connection";

/// What a connection is told by the workspace.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub enum Push {
    /// An encoded frame to write (its bytes are already counted in the
    /// connection's [`Outbox`]).
    Frame(FrameKind, Bytes),
    /// A notice could not be queued without passing the hard cap:
    /// disconnect now, saying why.
    Disconnect,
}

/// Where frames for one connection go: its mailbox, and the shared count
/// of what is queued for it (see `outbox.rs`). Every sender goes through
/// this, so nothing reaches a connection uncounted.
#[derive(Clone)]
pub struct Outlet {
    pub conn: ConnId,
    to: Recipient<Push>,
    outbox: Arc<Outbox>,
}

/// Whether a pushed frame was queued to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Queued,
    /// Not queued (the connection is gone or being disconnected).
    NotQueued,
}

impl Outlet {
    pub fn new(conn: ConnId, to: Recipient<Push>, outbox: Arc<Outbox>) -> Outlet {
        Outlet { conn, to, outbox }
    }

    /// Whether the connection is alive and not being disconnected.
    pub fn is_open(&self) -> bool {
        self.to.connected() && !self.outbox.is_closing()
    }

    /// Sends a reply (never dropped, never coalesced).
    pub fn reply(&self, frame: &Envelope<ServerFrame>) {
        self.send(FrameKind::Reply, Bytes::from(encode_server_frame(frame)));
    }

    /// Offers a pushed frame (`State` or `Notice`, already encoded, shared
    /// between subscribers). A state is always queued (the connection keeps
    /// only the latest); a notice only under the hard cap, else the
    /// connection is told to disconnect and the notice is not queued.
    pub fn offer(&self, kind: FrameKind, bytes: &Bytes) -> Offer {
        if !self.is_open() {
            return Offer::NotQueued;
        }
        if kind == FrameKind::Notice {
            let limits = self.outbox.limits();
            match admit_notice(self.outbox.queued(), bytes.len(), false, limits) {
                Admission::Queue => {}
                Admission::Closing => return Offer::NotQueued,
                Admission::OverCap => {
                    if self.outbox.close() {
                        tracing::warn!(
                            component = COMPONENT,
                            event = "notice_not_queued",
                            conn = self.conn,
                            queued_bytes = self.outbox.queued(),
                            hard_cap = limits.hard_cap(),
                        );
                        self.to.do_send(Push::Disconnect);
                    }
                    return Offer::NotQueued;
                }
            }
        }
        self.send(kind, bytes.clone());
        Offer::Queued
    }

    fn send(&self, kind: FrameKind, bytes: Bytes) {
        self.outbox.add(bytes.len());
        self.to.do_send(Push::Frame(kind, bytes));
    }
}

/// A request in the workspace's mailbox, counted against its connection's
/// in-flight limit until this token is dropped (handled, or dropped with an
/// undeliverable message).
pub struct InFlight(Arc<Outbox>);

impl InFlight {
    pub fn new(outbox: Arc<Outbox>) -> InFlight {
        outbox.request_sent();
        InFlight(outbox)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_done();
    }
}

/// Who a connection's peer is, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: Option<i32>,
    pub uid: u32,
}

/// A decoded harness frame for the drift observer actor, with where to answer.
/// Everything that touches freshness goes through one mailbox, so a
/// connection's replies come back in the order its requests went out.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromClient {
    pub conn: ConnId,
    pub peer: Peer,
    pub id: Option<RequestId>,
    pub frame: ClientFrame,
    pub reply_to: Outlet,
    /// Released when the request has been handled.
    pub in_flight: InFlight,
}

/// Answered once the workspace has handled every message sent before it: a
/// closing connection then knows every reply it is owed is on its way.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Drain;

/// A connection was accepted (for the idle-exit count).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ConnectionOpened {
    pub conn: ConnId,
}

/// A connection closed. Sessions it was the last carrier of are detached
/// by the freshness machine (a harness that vanished without
/// `session_shutdown` stops its work; a replay takes the session up again).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ConnectionClosed {
    pub conn: ConnId,
}

/// Re-read the configuration (SIGHUP).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ReloadConfig;

/// Stop the service: kill and reap every child, then stop the system.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Shutdown {
    pub reason: ShutdownReason,
}

/// Why the service is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownReason {
    Signal(crate::process::signal::Signal),
    SecondSignal(crate::process::signal::Signal),
    IdleExit,
    /// Another service holds this workspace's instance lock now.
    InstanceLost,
}

/// The effective configuration changed (start-up or SIGHUP reload).
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct ConfigChanged(pub std::sync::Arc<crate::config_load::LoadedConfig>);

/// A message of the core's `DriftObserver` sub-machine, for the
/// `DriftObserverActor` (from the `SyncSchedulerActor`, or its own wake-up).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ObserverMail(pub cgc_fresh_core::freshness::ToObserver);

/// Messages of the core's `SyncScheduler` sub-machine, in the order they
/// were sent, for the `SyncSchedulerActor` (from the `DriftObserverActor`,
/// which sends what one turn of its event loop produced at once, or
/// sooner in batches of a few messages: a flood of edits costs one mailbox
/// message per few edits, not several per edit).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct SchedulerMail(pub Vec<cgc_fresh_core::freshness::ToScheduler>);

/// Messages of the core's `Notices` sub-machine, in the order they were
/// sent, for the `NoticesActor` (from the drift observer or the scheduler).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct NoticesMail(pub Vec<cgc_fresh_core::freshness::ToNotices>);
