//! Accepting clients on the service's Unix socket.
//!
//! Each accepted stream is checked with `SO_PEERCRED`: a peer whose UID is
//! not ours gets one `forbidden` error frame and is closed before any of its
//! bytes are read. Everyone else gets a `Connection` actor.

use std::sync::atomic::{AtomicU64, Ordering};

use actix::prelude::*;
use cgc_fresh_proto::{encode_server_frame, Envelope, ErrorCode, ErrorFrame, ServerFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::connection::Connection;
use super::messages::Peer;
use super::workspace::WorkspaceActor;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// Runs the accept loop until the system stops.
pub async fn accept_loop(
    listener: UnixListener,
    max_line_bytes: usize,
    workspace: Addr<WorkspaceActor>,
) {
    let our_uid = nix::unistd::geteuid().as_raw();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // EMFILE and friends: say so and keep accepting; a short
                // pause keeps a descriptor shortage from spinning the loop.
                tracing::warn!(event = "accept_failed", error = %error);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
        let peer = match stream.peer_cred() {
            Ok(cred) => Peer {
                pid: cred.pid(),
                uid: cred.uid(),
            },
            Err(error) => {
                tracing::warn!(event = "peer_cred_failed", conn, error = %error);
                continue;
            }
        };
        if peer.uid != our_uid {
            tracing::warn!(
                event = "peer_refused",
                conn,
                peer_pid = peer.pid,
                peer_uid = peer.uid,
                our_uid
            );
            actix_rt::spawn(refuse(stream, peer.uid));
            continue;
        }
        Connection::start(conn, peer, stream, max_line_bytes, workspace.clone());
    }
}

async fn refuse(mut stream: UnixStream, uid: u32) {
    let frame = Envelope::new(ServerFrame::Error(ErrorFrame::new(
        ErrorCode::Forbidden,
        format!("uid {uid} may not use this service; only its owner may"),
    )));
    let _ = stream.write_all(&encode_server_frame(&frame)).await;
    let _ = stream.shutdown().await;
    // Drain (bounded) what the peer already sent: closing a Unix socket with
    // unread input resets it, and the peer would lose the error frame.
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut total = 0usize;
        while total < 64 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}
