//! Typed messages between the service's actors. No stringly-typed dispatch:
//! each thing an actor can be asked is one struct here.

use actix::prelude::*;
use cgc_fresh_proto::{ClientFrame, Envelope, RequestId, ServerFrame};

/// Identifies one client connection for the life of the service.
pub type ConnId = u64;

/// A frame for one connection to write (a reply or a pushed frame).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Push(pub Envelope<ServerFrame>);

/// Who a connection's peer is, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: Option<i32>,
    pub uid: u32,
}

/// A decoded harness frame for the workspace actor, with where to answer.
/// Everything that touches freshness goes through one mailbox, so a
/// connection's replies come back in the order its requests went out.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromClient {
    pub conn: ConnId,
    pub peer: Peer,
    pub id: Option<RequestId>,
    pub frame: ClientFrame,
    pub reply_to: Recipient<Push>,
}

/// A connection was accepted (for the idle-exit count).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ConnectionOpened {
    pub conn: ConnId,
}

/// A connection closed; `sessions` are the sessions it started and did not
/// shut down (a harness that vanished without `session_shutdown`).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ConnectionClosed {
    pub conn: ConnId,
    pub sessions: Vec<String>,
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
