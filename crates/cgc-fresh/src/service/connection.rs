//! `Connection`: one actor per client socket.
//!
//! It owns the framing (a bounded JSON-lines codec), the peer check, and
//! the sessions this client started. Every decoded frame goes to the
//! workspace actor with a recipient for the reply; bad input is answered
//! with an `error` frame and the connection keeps serving, except an
//! over-long line, after which the stream cannot be re-synchronised and the
//! connection is closed.

use std::collections::BTreeSet;

use actix::io::{FramedWrite, WriteHandler};
use actix::prelude::*;
use bytes::Bytes;
use cgc_fresh_proto::{
    decode_client_frame, ClientFrame, CodecError, Envelope, ErrorCode, ErrorFrame, FrameCodec,
    ServerFrame,
};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio_util::codec::FramedRead;

use super::messages::{ConnId, ConnectionClosed, ConnectionOpened, FromClient, Peer, Push};
use super::workspace::WorkspaceActor;

type Writer = FramedWrite<Envelope<ServerFrame>, OwnedWriteHalf, FrameCodec>;

pub struct Connection {
    conn: ConnId,
    peer: Peer,
    writer: Writer,
    workspace: Addr<WorkspaceActor>,
    /// Sessions started over this connection and not yet shut down.
    sessions: BTreeSet<String>,
}

impl Connection {
    /// Starts the actor for an accepted stream whose peer passed the UID check.
    pub fn start(
        conn: ConnId,
        peer: Peer,
        stream: UnixStream,
        max_line_bytes: usize,
        workspace: Addr<WorkspaceActor>,
    ) -> Addr<Connection> {
        let (read, write) = stream.into_split();
        Connection::create(move |ctx| {
            ctx.add_stream(FramedRead::new(
                read,
                FrameCodec::with_max_line_bytes(max_line_bytes),
            ));
            let writer =
                FramedWrite::new(write, FrameCodec::with_max_line_bytes(max_line_bytes), ctx);
            Connection {
                conn,
                peer,
                writer,
                workspace,
                sessions: BTreeSet::new(),
            }
        })
    }

    fn reply_error(&mut self, reply: Envelope<ServerFrame>) {
        self.writer.write(reply);
    }

    fn route(&mut self, envelope: Envelope<ClientFrame>, ctx: &mut Context<Self>) {
        match &envelope.frame {
            ClientFrame::SessionStart(start) => {
                self.sessions.insert(start.session.clone());
            }
            ClientFrame::SessionShutdown(shutdown) => {
                self.sessions.remove(&shutdown.session);
            }
            _ => {}
        }
        self.workspace.do_send(FromClient {
            conn: self.conn,
            peer: self.peer,
            id: envelope.id,
            frame: envelope.frame,
            reply_to: ctx.address().recipient(),
        });
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        self.workspace.do_send(ConnectionOpened { conn: self.conn });
        tracing::info!(
            event = "connection_opened",
            conn = self.conn,
            peer_pid = self.peer.pid,
            peer_uid = self.peer.uid
        );
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        let sessions: Vec<String> = std::mem::take(&mut self.sessions).into_iter().collect();
        tracing::info!(event = "connection_closed", conn = self.conn, peer_pid = self.peer.pid, open_sessions = ?sessions);
        self.workspace.do_send(ConnectionClosed {
            conn: self.conn,
            sessions,
        });
    }
}

impl StreamHandler<Result<Bytes, CodecError>> for Connection {
    fn handle(&mut self, item: Result<Bytes, CodecError>, ctx: &mut Self::Context) {
        match item {
            Ok(line) => match decode_client_frame(&line) {
                Ok(envelope) => self.route(envelope, ctx),
                Err(error) => {
                    tracing::warn!(
                        event = "frame_error",
                        conn = self.conn,
                        peer_pid = self.peer.pid,
                        code = error.code().as_str(),
                        field = error.field(),
                        message = %error.message(),
                    );
                    self.reply_error(error.to_reply());
                }
            },
            Err(CodecError::TooLarge { limit }) => {
                tracing::warn!(
                    event = "frame_error",
                    conn = self.conn,
                    peer_pid = self.peer.pid,
                    code = "too_large",
                    limit
                );
                self.reply_error(Envelope::new(ServerFrame::Error(ErrorFrame::new(
                    ErrorCode::TooLarge,
                    format!("line longer than {limit} bytes; closing the connection"),
                ))));
                // Flush the error, then stop (WriteHandler::finished).
                self.writer.close();
            }
            Err(other) => {
                tracing::info!(event = "connection_read_error", conn = self.conn, error = %other);
                ctx.stop();
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        // The peer closed its side (or we stopped reading): flush what is
        // queued, then stop.
        self.writer.close();
        if self.writer.closed() {
            ctx.stop();
        }
    }
}

impl WriteHandler<CodecError> for Connection {
    fn error(&mut self, err: CodecError, _: &mut Self::Context) -> Running {
        tracing::info!(event = "connection_write_error", conn = self.conn, error = %err);
        Running::Stop
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Push> for Connection {
    type Result = ();
    fn handle(&mut self, msg: Push, _: &mut Self::Context) {
        self.writer.write(msg.0);
    }
}
