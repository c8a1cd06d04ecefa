//! `Connection`: one actor per client socket.
//!
//! It owns the framing (a bounded JSON-lines codec), the peer check, and
//! what is queued for the client: its own
//! writer over an [`OutQueue`], so that what waits for a client is counted
//! and bounded (`outbox.rs` has the rules and why). Every decoded frame goes
//! to the drift observer actor with an [`Outlet`] for the reply; bad input is
//! answered with an `error` frame and the connection keeps serving, except
//! an over-long line, after which the stream cannot be re-synchronised and
//! the connection is closed.
//!
//! Back-pressure: the reader asks the shared [`Outbox`] before each read
//! and holds off while the client's queue is over its bound (or too many of
//! its requests wait in the workspace's mailbox); the socket buffer then
//! fills and the client's `send` blocks. A subscriber that stays over the
//! bound for [`SLOW_SUBSCRIBER_GRACE`] is disconnected with an `error`
//! frame saying why.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use actix::prelude::*;
use bytes::Bytes;
use cgc_fresh_proto::{
    decode_client_frame, encode_server_frame, ClientFrame, CodecError, Envelope, ErrorCode,
    ErrorFrame, FrameCodec, ServerFrame,
};
use futures_util::Stream;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio_util::codec::FramedRead;

use super::drift_observer::DriftObserverActor;
use super::messages::{
    ConnId, ConnectionClosed, ConnectionOpened, Drain, FromClient, InFlight, Outlet, Peer, Push,
};
use super::outbox::{
    FrameKind, Limits, OutQueue, Outbox, CLOSE_FLUSH_GRACE, SLOW_SUBSCRIBER_GRACE,
    WRITE_BATCH_BYTES,
};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "connection";

pub struct Connection {
    conn: ConnId,
    peer: Peer,
    workspace: Addr<DriftObserverActor>,
    /// What is queued for this client, shared with everyone who sends to it.
    outbox: Arc<Outbox>,
    /// Given to the workspace with each request, for the reply.
    outlet: Outlet,
    /// Encoded frames not yet handed to the socket.
    queue: OutQueue,
    /// The socket's write half; `None` while a write is in progress.
    writer: Option<OwnedWriteHalf>,
    /// The client subscribed (pushes keep coming, so the grace applies).
    subscribed: bool,
    /// Stop once everything owed to the client is written.
    closing: bool,
    /// Disconnected for not reading: only the notices already counted and
    /// the `error` frame are still written.
    disconnected: bool,
    /// Armed while a subscriber is over the bound.
    grace: Option<SpawnHandle>,
}

/// Why a slow client is disconnected.
#[derive(Debug, Clone, Copy)]
enum SlowCause {
    /// Over the bound for the whole grace.
    Grace,
    /// A notice would have passed the hard cap.
    HardCap,
}

impl Connection {
    /// Starts the actor for an accepted stream whose peer passed the UID check.
    pub fn start(
        conn: ConnId,
        peer: Peer,
        stream: UnixStream,
        max_line_bytes: usize,
        workspace: Addr<DriftObserverActor>,
    ) -> Addr<Connection> {
        let (read, write) = stream.into_split();
        let outbox = Arc::new(Outbox::new(
            conn,
            Limits::for_max_line_bytes(max_line_bytes),
        ));
        Connection::create(move |ctx| {
            ctx.add_stream(Gated {
                inner: FramedRead::new(read, FrameCodec::with_max_line_bytes(max_line_bytes)),
                outbox: outbox.clone(),
            });
            let outlet = Outlet::new(conn, ctx.address().recipient(), outbox.clone());
            Connection {
                conn,
                peer,
                workspace,
                outbox,
                outlet,
                queue: OutQueue::default(),
                writer: Some(write),
                subscribed: false,
                closing: false,
                disconnected: false,
                grace: None,
            }
        })
    }

    /// Queues a frame the connection itself answers with (a decoding error).
    fn reply_error(&mut self, reply: Envelope<ServerFrame>, ctx: &mut Context<Self>) {
        let bytes = Bytes::from(encode_server_frame(&reply));
        self.outbox.add(bytes.len());
        self.enqueue(FrameKind::Reply, bytes, ctx);
    }

    /// Puts counted bytes into the queue (a newer state replaces the unsent
    /// one) and writes.
    fn enqueue(&mut self, kind: FrameKind, bytes: Bytes, ctx: &mut Context<Self>) {
        let replaced = self.queue.push(kind, bytes);
        self.outbox.release(replaced);
        self.watch_bound(ctx);
        self.pump(ctx);
    }

    /// Starts the next socket write unless one is in progress.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        let Some(mut half) = self.writer.take() else {
            return;
        };
        let Some(batch) = self.queue.take_batch(WRITE_BATCH_BYTES) else {
            self.writer = Some(half);
            self.stop_if_done(ctx);
            return;
        };
        let len = batch.len();
        let write = async move {
            let result = half.write_all(&batch).await;
            (half, result)
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(write).map(move |(half, result), act, ctx| {
                act.outbox.release(len);
                match result {
                    Ok(()) => {
                        act.writer = Some(half);
                        act.watch_bound(ctx);
                        act.pump(ctx);
                    }
                    Err(error) => {
                        tracing::info!(component = COMPONENT, event = "connection_write_error", conn = act.conn, error = %error);
                        ctx.stop();
                    }
                }
            }),
        );
    }

    /// Stops a closing connection once nothing more is owed to the client:
    /// the queue is written and no request of it is still being answered
    /// (a disconnected one owes only its queue).
    fn stop_if_done(&mut self, ctx: &mut Context<Self>) {
        let idle = self.writer.is_some() && self.queue.is_empty();
        let nothing_pending = self.outbox.queued() == 0 && self.outbox.in_flight() == 0;
        if self.closing && idle && (self.disconnected || nothing_pending) {
            ctx.stop();
        }
    }

    /// Flushes what is owed (including replies to requests still in the
    /// workspace's mailbox), then stops.
    fn close_after_flush(&mut self, ctx: &mut Context<Self>) {
        if self.closing {
            return;
        }
        self.closing = true;
        // Once the workspace has handled everything sent before this, every
        // reply is counted (and on its way here): check again then.
        ctx.spawn(
            self.workspace
                .send(Drain)
                .into_actor(self)
                .map(|_, act, ctx| act.pump(ctx)),
        );
        self.pump(ctx);
    }

    /// Arms the grace while a subscriber is over the bound; disarms it once
    /// it is not.
    fn watch_bound(&mut self, ctx: &mut Context<Self>) {
        let over = self.outbox.queued() > self.outbox.limits().bound;
        if !over {
            if let Some(grace) = self.grace.take() {
                ctx.cancel_future(grace);
            }
        } else if self.subscribed && !self.disconnected && self.grace.is_none() {
            self.grace = Some(ctx.run_later(SLOW_SUBSCRIBER_GRACE, |act, ctx| {
                act.grace = None;
                if act.outbox.queued() > act.outbox.limits().bound {
                    act.disconnect_slow(SlowCause::Grace, ctx);
                }
            }));
        }
    }

    /// Disconnects a client that does not read: nothing more counts as
    /// delivered to it; unsent replies and states are dropped, notices
    /// already queued stay, and the `error` frame saying why is written
    /// last. If it is not read within [`CLOSE_FLUSH_GRACE`], the socket is
    /// closed anyway.
    fn disconnect_slow(&mut self, cause: SlowCause, ctx: &mut Context<Self>) {
        if self.disconnected {
            return;
        }
        self.outbox.close();
        self.disconnected = true;
        self.closing = true;
        if let Some(grace) = self.grace.take() {
            ctx.cancel_future(grace);
        }
        let limits = *self.outbox.limits();
        let queued = self.outbox.queued();
        let grace_s = SLOW_SUBSCRIBER_GRACE.as_secs();
        let (cause_name, why) = match cause {
            SlowCause::Grace => (
                "over_bound_past_grace",
                format!(
                    "more than {} bytes stayed queued for it for {grace_s} s",
                    limits.bound
                ),
            ),
            SlowCause::HardCap => (
                "notice_over_hard_cap",
                format!(
                    "a notice would have passed {} bytes queued for it",
                    limits.hard_cap()
                ),
            ),
        };
        tracing::warn!(
            component = COMPONENT,
            event = "slow_subscriber_disconnected",
            conn = self.conn,
            peer_pid = self.peer.pid,
            cause = cause_name,
            queued_bytes = queued,
            bound = limits.bound,
            grace_ms = SLOW_SUBSCRIBER_GRACE.as_millis() as u64,
        );
        let dropped = self.queue.drop_all_but_notices();
        self.outbox.release(dropped);
        let error = Envelope::new(ServerFrame::Error(ErrorFrame::new(
            ErrorCode::Unavailable,
            format!(
                "this connection did not read what the service sent it: {why}; closing it. \
                 Unsent replies and states were dropped; reconnect and subscribe again to \
                 read the current state."
            ),
        )));
        let bytes = Bytes::from(encode_server_frame(&error));
        self.outbox.add(bytes.len());
        self.queue.set_last(bytes);
        ctx.run_later(CLOSE_FLUSH_GRACE, |act, ctx| {
            tracing::info!(
                component = COMPONENT,
                event = "slow_subscriber_closed",
                conn = act.conn,
                unwritten_bytes = act.outbox.queued(),
            );
            ctx.stop();
        });
        self.pump(ctx);
    }

    fn route(&mut self, envelope: Envelope<ClientFrame>) {
        // Which sessions this connection carries is the freshness
        // machine's to know (it decides detach and re-attach).
        if envelope.frame == ClientFrame::Subscribe {
            self.subscribed = true;
        }
        self.workspace.do_send(FromClient {
            conn: self.conn,
            peer: self.peer,
            id: envelope.id,
            frame: envelope.frame,
            reply_to: self.outlet.clone(),
            in_flight: InFlight::new(self.outbox.clone()),
        });
    }
}

/// The socket's frames, read only while the connection's [`Outbox`] allows:
/// while it says hold, the stream is pending and the outbox wakes it.
struct Gated<S> {
    inner: S,
    outbox: Arc<Outbox>,
}

impl<S: Stream + Unpin> Stream for Gated<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<S::Item>> {
        // A disconnected client is not read again; the actor stops soon.
        if self.outbox.is_closing() || self.outbox.hold_reading(cx.waker()) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        self.workspace.do_send(ConnectionOpened { conn: self.conn });
        tracing::info!(
            component = COMPONENT,
            event = "connection_opened",
            conn = self.conn,
            peer_pid = self.peer.pid,
            peer_uid = self.peer.uid
        );
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        self.outbox.close();
        tracing::info!(
            component = COMPONENT,
            event = "connection_closed",
            conn = self.conn,
            peer_pid = self.peer.pid
        );
        self.workspace.do_send(ConnectionClosed { conn: self.conn });
    }
}

impl StreamHandler<Result<Bytes, CodecError>> for Connection {
    fn handle(&mut self, item: Result<Bytes, CodecError>, ctx: &mut Self::Context) {
        match item {
            Ok(line) => match decode_client_frame(&line) {
                Ok(envelope) => self.route(envelope),
                Err(error) => {
                    tracing::warn!(
                        component = COMPONENT,
                        event = "frame_error",
                        conn = self.conn,
                        peer_pid = self.peer.pid,
                        code = error.code().as_str(),
                        field = error.field(),
                        message = %error.message(),
                    );
                    self.reply_error(error.to_reply(), ctx);
                }
            },
            Err(CodecError::TooLarge { limit }) => {
                tracing::warn!(
                    component = COMPONENT,
                    event = "frame_error",
                    conn = self.conn,
                    peer_pid = self.peer.pid,
                    code = "too_large",
                    limit
                );
                self.reply_error(
                    Envelope::new(ServerFrame::Error(ErrorFrame::new(
                        ErrorCode::TooLarge,
                        format!("line longer than {limit} bytes; closing the connection"),
                    ))),
                    ctx,
                );
                // Flush the error, then stop.
                self.close_after_flush(ctx);
            }
            Err(other) => {
                tracing::info!(component = COMPONENT, event = "connection_read_error", conn = self.conn, error = %other);
                ctx.stop();
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        // The peer closed its side: flush what is owed, then stop.
        self.close_after_flush(ctx);
    }
}

impl Handler<Push> for Connection {
    type Result = ();
    fn handle(&mut self, msg: Push, ctx: &mut Self::Context) {
        match msg {
            // After a disconnect only notices (counted as delivered when
            // they were sent) are still written.
            Push::Frame(kind, bytes) if self.disconnected && kind != FrameKind::Notice => {
                self.outbox.release(bytes.len());
            }
            Push::Frame(kind, bytes) => self.enqueue(kind, bytes, ctx),
            Push::Disconnect => self.disconnect_slow(SlowCause::HardCap, ctx),
        }
    }
}
