//! `WorkspaceActor`: the one mailbox through which every harness frame
//! reaches the workspace's freshness state.
//!
//! It answers `hello`, `status`, `config` and `subscribe`, and (once the
//! freshness core is wired in) feeds session and tool events to it and
//! carries out its decisions. Replies go back through the requesting
//! connection's recipient, in the order the frames arrived.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use cgc_fresh_proto::{
    ClientFrame, ConfigFrame, Envelope, ErrorCode, ErrorFrame, FreshnessStatus, RequestId,
    ServerFrame, StateFrame, Welcome, PROTOCOL_VERSION,
};

use super::hub::NoticeHub;
use super::messages::{ConfigChanged, ConnectionClosed, FromClient, Push};
use crate::config_load::LoadedConfig;

pub struct WorkspaceActor {
    workspace: PathBuf,
    config: Arc<LoadedConfig>,
    hub: NoticeHub,
}

impl WorkspaceActor {
    pub fn new(workspace: PathBuf, config: Arc<LoadedConfig>) -> Self {
        WorkspaceActor {
            workspace,
            config,
            hub: NoticeHub::default(),
        }
    }

    fn state_frame(&self) -> StateFrame {
        StateFrame {
            workspace: self.workspace.display().to_string(),
            status: FreshnessStatus::Unknown,
            last_synced_at: None,
            stale_since: None,
            last_error: None,
            edit_epoch: 0,
            syncing: false,
            watcher: None,
            backend: None,
            detail: Some("no sync has completed since the service started".into()),
        }
    }

    fn config_frame(&self) -> ConfigFrame {
        ConfigFrame {
            values: self.config.render_json(),
            warnings: self.config.warning_texts(),
        }
    }
}

fn reply(to: &Recipient<Push>, id: Option<RequestId>, frame: ServerFrame) {
    to.do_send(Push(Envelope::with_id(id, frame)));
}

/// Events answer only when the client asked (gave an `id`), so a harness can
/// pipeline them without reading acknowledgements.
fn ack_if_asked(to: &Recipient<Push>, id: Option<RequestId>) {
    if id.is_some() {
        reply(to, id, ServerFrame::Ack);
    }
}

impl Actor for WorkspaceActor {
    type Context = Context<Self>;
}

impl Handler<FromClient> for WorkspaceActor {
    type Result = ();

    fn handle(&mut self, msg: FromClient, _: &mut Self::Context) {
        let FromClient {
            conn,
            peer,
            id,
            frame,
            reply_to,
        } = msg;
        match frame {
            ClientFrame::Hello(hello) => {
                tracing::info!(event = "hello", conn, peer_pid = peer.pid, client = %hello.client, instance = %hello.instance);
                reply(
                    &reply_to,
                    id,
                    ServerFrame::Welcome(Welcome {
                        protocol: PROTOCOL_VERSION,
                        service_version: env!("CARGO_PKG_VERSION").to_string(),
                        pid: std::process::id(),
                        workspace: self.workspace.display().to_string(),
                    }),
                );
            }
            ClientFrame::Status => reply(&reply_to, id, ServerFrame::State(self.state_frame())),
            ClientFrame::Config => reply(&reply_to, id, ServerFrame::Config(self.config_frame())),
            ClientFrame::Subscribe => {
                self.hub.subscribe(conn, reply_to.clone());
                ack_if_asked(&reply_to, id);
                // A new subscriber sees where things stand right away.
                reply(&reply_to, None, ServerFrame::State(self.state_frame()));
            }
            ClientFrame::Sync => reply(
                &reply_to,
                id,
                ServerFrame::Error(ErrorFrame::new(
                    ErrorCode::Unavailable,
                    "syncing is not available in this build",
                )),
            ),
            ClientFrame::SessionStart(_)
            | ClientFrame::ToolCall(_)
            | ClientFrame::ToolResult(_)
            | ClientFrame::SessionShutdown(_) => ack_if_asked(&reply_to, id),
        }
    }
}

impl Handler<ConnectionClosed> for WorkspaceActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionClosed, _: &mut Self::Context) {
        self.hub.unsubscribe(msg.conn);
    }
}

impl Handler<ConfigChanged> for WorkspaceActor {
    type Result = ();
    fn handle(&mut self, msg: ConfigChanged, _: &mut Self::Context) {
        self.config = msg.0;
    }
}
