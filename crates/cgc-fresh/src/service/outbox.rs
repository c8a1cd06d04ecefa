//! Back-pressure: what one connection may have queued for it, and what
//! happens when a client does not read.
//!
//! Why: a reply or a pushed frame used to be queued with no limit. A client
//! that pipelined requests and never read its socket, or a subscriber that
//! never read during a burst of state changes, made the service hold every
//! frame meant for it — gigabytes within seconds. Now each connection has a
//! bound on its *outgoing bytes*: frames the workspace has sent to the
//! connection's mailbox and not yet written, plus the connection's own queue
//! and the write in progress. `do_send` ignores mailbox capacity, so the
//! senders count what they send in a shared [`Outbox`] and the connection
//! subtracts what the socket took.
//!
//! The rules (pure functions and a plain queue here, unit-tested):
//!
//! - **Reading pauses** while the connection is over the bound, or while
//!   [`MAX_IN_FLIGHT`] of its requests wait in the workspace's mailbox (so a
//!   burst read in one go cannot queue more replies than that past the
//!   bound). The kernel socket buffer then fills and the client's `send`
//!   blocks: that is the back-pressure. Reading resumes below the low-water
//!   mark (a quarter of the bound, a quarter of the in-flight limit), woken
//!   by whoever made the queue shrink — no timer.
//! - **States coalesce**: a subscriber only needs the latest `state`, so a
//!   connection keeps at most one pushed state not yet handed to the socket;
//!   a newer one replaces it (and moves to the end, so states never go
//!   backwards relative to replies).
//! - **Notices are never dropped silently**: a notice is queued (and counts
//!   as delivered) unless the connection is already being disconnected, or
//!   queuing it would pass [`hard_cap`](Limits::hard_cap); then it is not
//!   counted, and the connection is disconnected with an `error` frame.
//! - **A subscriber over the bound for [`SLOW_SUBSCRIBER_GRACE`]** is
//!   disconnected with an `error` frame saying why: pushes keep coming for
//!   a subscriber, so its queue cannot be left to grow or notices to wait
//!   forever. A requester that is not subscribed is only held (its queue
//!   cannot grow while its requests are not read). On disconnect, unsent
//!   replies and states are dropped (it re-reads `state` when it
//!   reconnects); queued notices stay, counted as they were; the `error`
//!   frame is the last thing written. If the client does not read that
//!   either within [`CLOSE_FLUSH_GRACE`], the socket is closed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::Waker;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

/// Identifies one client connection for the life of the service (the
/// outbox is one connection's; the messages module re-exports it).
pub type ConnId = u64;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "connection";

/// The default bound on one connection's queued outgoing bytes: 1 MiB,
/// sixteen lines of the default `service.maxLineBytes` (64 KiB) — far more
/// than any harness keeps unread, far less than the machine.
pub const QUEUE_BOUND_BYTES: usize = 1024 * 1024;

/// Requests one connection may have waiting in the workspace's mailbox.
pub const MAX_IN_FLIGHT: usize = 64;

/// How long a subscriber may stay over the bound before it is disconnected.
pub const SLOW_SUBSCRIBER_GRACE: Duration = Duration::from_secs(5);

/// How long a disconnected client gets to read the `error` frame (and the
/// notices queued before it) before its socket is closed regardless.
pub const CLOSE_FLUSH_GRACE: Duration = Duration::from_secs(10);

/// How many bytes one socket write takes from the queue at most.
pub const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// One connection's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Over this many queued bytes, reading stops (and a subscriber's grace
    /// starts).
    pub bound: usize,
    /// Reading resumes at or below this many queued bytes.
    pub low_water: usize,
    /// Reading stops with this many requests in the workspace's mailbox.
    pub max_in_flight: usize,
    /// Reading resumes at or below this many requests in flight.
    pub in_flight_low: usize,
}

impl Limits {
    /// The limits for a connection whose lines may be `max_line_bytes` long:
    /// [`QUEUE_BOUND_BYTES`], raised to hold two maximal lines when
    /// `service.maxLineBytes` is configured larger.
    pub fn for_max_line_bytes(max_line_bytes: usize) -> Limits {
        let bound = QUEUE_BOUND_BYTES.max(max_line_bytes.saturating_mul(2));
        Limits {
            bound,
            low_water: bound / 4,
            max_in_flight: MAX_IN_FLIGHT,
            in_flight_low: MAX_IN_FLIGHT / 4,
        }
    }

    /// Past this, a notice is not queued and the connection is disconnected
    /// at once: room for notices that arrive during the grace, no more.
    pub fn hard_cap(&self) -> usize {
        self.bound.saturating_mul(2)
    }
}

/// Whether reading stays (or becomes) paused, with hysteresis: a reader
/// pauses over the bound or at the in-flight limit, and resumes only when
/// both are at or below their low-water marks.
pub fn reading_paused(paused: bool, queued: usize, in_flight: usize, limits: &Limits) -> bool {
    if paused {
        queued > limits.low_water || in_flight > limits.in_flight_low
    } else {
        queued > limits.bound || in_flight >= limits.max_in_flight
    }
}

/// What becomes of a notice offered to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Queued: it counts as delivered.
    Queue,
    /// The connection is already being disconnected: not delivered.
    Closing,
    /// Queuing it would pass the hard cap: not delivered, and the
    /// connection is to be disconnected now.
    OverCap,
}

/// The rule for a notice of `len` bytes to a connection with `queued` bytes.
pub fn admit_notice(queued: usize, len: usize, closing: bool, limits: &Limits) -> Admission {
    if closing {
        Admission::Closing
    } else if queued.saturating_add(len) > limits.hard_cap() {
        Admission::OverCap
    } else {
        Admission::Queue
    }
}

/// What a queued frame is, for coalescing and for what survives a
/// disconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A reply to a request (or an error about one): written in order.
    Reply,
    /// A pushed `state`: only the latest unsent one is kept.
    State,
    /// A pushed `notice`: counted as delivered once queued, never dropped.
    Notice,
}

/// Whether reading is paused, and who to wake when it may resume.
#[derive(Debug, Default)]
struct Gate {
    paused: bool,
    /// Paused because of queued bytes (logged), not only in-flight requests.
    over_bound: bool,
    waker: Option<Waker>,
}

/// The per-connection accounting shared by the connection (which writes and
/// reads) and everyone who sends to it (the workspace's replies and the
/// hub's pushes). All of them run on one thread; the atomics and the mutex
/// only make it `Send`, as actix recipients need.
#[derive(Debug)]
pub struct Outbox {
    conn: ConnId,
    limits: Limits,
    queued: AtomicUsize,
    in_flight: AtomicUsize,
    closing: AtomicBool,
    gate: Mutex<Gate>,
}

impl Outbox {
    pub fn new(conn: ConnId, limits: Limits) -> Outbox {
        Outbox {
            conn,
            limits,
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            gate: Mutex::new(Gate::default()),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Bytes queued for this connection and not yet written.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Requests read from this connection and not yet handled.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Counts `len` bytes as queued (before they are sent to the mailbox).
    pub fn add(&self, len: usize) {
        self.queued.fetch_add(len, Ordering::AcqRel);
    }

    /// Counts `len` bytes as gone (written, replaced or dropped) and wakes
    /// the reader if it may resume.
    pub fn release(&self, len: usize) {
        if len == 0 {
            return;
        }
        let _ = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(len))
            });
        self.settle();
    }

    /// A request was read and sent to the workspace.
    pub fn request_sent(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A request was handled (or dropped unhandled).
    pub fn request_done(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
        self.settle();
    }

    /// Whether the connection is being disconnected (nothing more counts as
    /// delivered to it).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Marks the connection as being disconnected. Returns whether it was
    /// not already.
    pub fn close(&self) -> bool {
        !self.closing.swap(true, Ordering::AcqRel)
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asked by the reader before each read: whether to hold off. When it
    /// does, `waker` is woken once reading may resume.
    pub fn hold_reading(&self, waker: &Waker) -> bool {
        let queued = self.queued();
        let in_flight = self.in_flight();
        let mut gate = self.gate();
        let was = gate.paused;
        gate.paused = reading_paused(was, queued, in_flight, &self.limits);
        if gate.paused {
            if !gate.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                gate.waker = Some(waker.clone());
            }
            if queued > self.limits.bound && !gate.over_bound {
                gate.over_bound = true;
                tracing::info!(
                    component = COMPONENT,
                    event = "connection_backpressure",
                    conn = self.conn,
                    queued_bytes = queued,
                    in_flight,
                    bound = self.limits.bound,
                    low_water = self.limits.low_water,
                );
            }
        } else {
            gate.waker = None;
            self.note_resumed(&mut gate, queued);
        }
        gate.paused
    }

    /// Wakes a paused reader that may resume.
    fn settle(&self) {
        let waker = {
            let mut gate = self.gate();
            if !gate.paused {
                return;
            }
            let queued = self.queued();
            if reading_paused(true, queued, self.in_flight(), &self.limits) {
                return;
            }
            gate.paused = false;
            self.note_resumed(&mut gate, queued);
            gate.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn note_resumed(&self, gate: &mut Gate, queued: usize) {
        if std::mem::take(&mut gate.over_bound) {
            tracing::info!(
                component = COMPONENT,
                event = "connection_resumed",
                conn = self.conn,
                queued_bytes = queued,
                low_water = self.limits.low_water,
            );
        }
    }
}

/// One frame waiting in a connection's queue.
#[derive(Debug)]
struct Entry {
    kind: FrameKind,
    /// Empty once a newer state replaced this one.
    bytes: Bytes,
}

/// A connection's own queue of encoded frames, in the order they are to be
/// written, with at most one unsent pushed state and an optional last frame
/// (the `error` that ends a disconnect).
#[derive(Debug, Default)]
pub struct OutQueue {
    entries: VecDeque<Entry>,
    /// Sequence number of `entries[0]`.
    head: u64,
    /// Sequence number of the unsent pushed state, if any.
    state_at: Option<u64>,
    /// Bytes held (live entries and the last frame).
    bytes: usize,
    /// Written after everything else, once set.
    last: Option<Bytes>,
}

impl OutQueue {
    /// Appends a frame. A pushed state replaces the unsent one (which is
    /// dropped). Returns the bytes dropped that way.
    pub fn push(&mut self, kind: FrameKind, bytes: Bytes) -> usize {
        let mut dropped = 0;
        if kind == FrameKind::State {
            if let Some(at) = self.state_at.take() {
                let index = usize::try_from(at - self.head).unwrap_or(usize::MAX);
                if let Some(old) = self.entries.get_mut(index) {
                    dropped = old.bytes.len();
                    old.bytes = Bytes::new();
                }
            }
            self.state_at = Some(self.head + self.entries.len() as u64);
        }
        self.bytes = self.bytes - dropped + bytes.len();
        self.entries.push_back(Entry { kind, bytes });
        dropped
    }

    /// Sets the frame written after everything queued (and after anything
    /// queued later).
    pub fn set_last(&mut self, bytes: Bytes) {
        self.bytes += bytes.len();
        if let Some(old) = self.last.replace(bytes) {
            self.bytes -= old.len();
        }
    }

    /// Takes the next frames to write, at least one and at most about
    /// `max_bytes` of them, as one buffer; `None` when nothing is queued.
    pub fn take_batch(&mut self, max_bytes: usize) -> Option<Bytes> {
        let mut first: Option<Bytes> = None;
        let mut joined: Option<BytesMut> = None;
        let mut taken = 0usize;
        while let Some(entry) = self.entries.front() {
            let len = entry.bytes.len();
            if taken > 0 && taken + len > max_bytes {
                break;
            }
            let Some(entry) = self.entries.pop_front() else {
                break;
            };
            if self.state_at == Some(self.head) {
                self.state_at = None;
            }
            self.head += 1;
            if len == 0 {
                continue;
            }
            taken += len;
            match (&mut first, &mut joined) {
                (None, _) => first = Some(entry.bytes),
                (Some(one), None) => {
                    let mut buf = BytesMut::with_capacity(max_bytes.max(taken));
                    buf.extend_from_slice(one);
                    buf.extend_from_slice(&entry.bytes);
                    joined = Some(buf);
                }
                (Some(_), Some(buf)) => buf.extend_from_slice(&entry.bytes),
            }
        }
        let batch = match (first, joined) {
            (_, Some(buf)) => Some(buf.freeze()),
            (Some(one), None) => Some(one),
            (None, None) if self.entries.is_empty() => self.last.take(),
            (None, None) => None,
        };
        if let Some(batch) = &batch {
            self.bytes -= batch.len();
        }
        batch
    }

    /// Drops every unsent reply and state (a disconnect); notices stay, as
    /// they were counted as delivered. Returns the bytes dropped.
    pub fn drop_all_but_notices(&mut self) -> usize {
        let before = self.bytes;
        self.entries.retain(|e| e.kind == FrameKind::Notice);
        self.head = 0;
        self.state_at = None;
        self.bytes = self.entries.iter().map(|e| e.bytes.len()).sum::<usize>()
            + self.last.as_ref().map_or(0, Bytes::len);
        before - self.bytes
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.last.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            bound: 1000,
            low_water: 250,
            max_in_flight: 8,
            in_flight_low: 2,
        }
    }

    fn frame(text: &str) -> Bytes {
        Bytes::from(format!("{text}\n"))
    }

    fn drain(queue: &mut OutQueue) -> String {
        let mut out = Vec::new();
        while let Some(batch) = queue.take_batch(1 << 20) {
            out.extend_from_slice(&batch);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_default_bound_is_a_mebibyte_and_grows_with_a_larger_line_limit() {
        let default = Limits::for_max_line_bytes(64 * 1024);
        assert_eq!(default.bound, QUEUE_BOUND_BYTES);
        assert_eq!(default.low_water, QUEUE_BOUND_BYTES / 4);
        assert_eq!(default.hard_cap(), 2 * QUEUE_BOUND_BYTES);
        let large = Limits::for_max_line_bytes(4 * 1024 * 1024);
        assert_eq!(large.bound, 8 * 1024 * 1024);
    }

    #[test]
    fn reading_pauses_over_the_bound_and_resumes_only_below_the_low_water_mark() {
        let l = limits();
        assert!(!reading_paused(false, 1000, 0, &l), "at the bound: reading");
        assert!(reading_paused(false, 1001, 0, &l));
        // Hysteresis: between the marks, it stays as it was.
        assert!(reading_paused(true, 500, 0, &l));
        assert!(!reading_paused(false, 500, 0, &l));
        assert!(!reading_paused(true, 250, 0, &l));
    }

    #[test]
    fn reading_pauses_at_the_in_flight_limit_and_resumes_when_most_are_handled() {
        let l = limits();
        assert!(!reading_paused(false, 0, 7, &l));
        assert!(reading_paused(false, 0, 8, &l));
        assert!(reading_paused(true, 0, 3, &l));
        assert!(!reading_paused(true, 0, 2, &l));
        // Both must be low to resume.
        assert!(reading_paused(true, 251, 0, &l));
    }

    #[test]
    fn notices_are_queued_up_to_the_hard_cap_and_never_to_a_closing_connection() {
        let l = limits();
        assert_eq!(admit_notice(1500, 500, false, &l), Admission::Queue);
        assert_eq!(admit_notice(1500, 501, false, &l), Admission::OverCap);
        assert_eq!(admit_notice(0, 10, true, &l), Admission::Closing);
    }

    #[test]
    fn a_newer_state_replaces_the_unsent_one_and_moves_behind_the_replies() {
        let mut q = OutQueue::default();
        assert_eq!(q.push(FrameKind::State, frame("s1")), 0);
        q.push(FrameKind::Reply, frame("r1"));
        assert_eq!(q.push(FrameKind::State, frame("s2")), 3);
        q.push(FrameKind::Notice, frame("n1"));
        assert_eq!(q.push(FrameKind::State, frame("s3")), 3);
        assert_eq!(q.bytes(), 9);
        assert_eq!(drain(&mut q), "r1\nn1\ns3\n");
        assert_eq!(q.bytes(), 0);
        assert!(q.is_empty());
    }

    #[test]
    fn a_state_already_taken_for_writing_is_not_replaced() {
        let mut q = OutQueue::default();
        q.push(FrameKind::State, frame("s1"));
        assert_eq!(q.take_batch(1 << 20).unwrap(), frame("s1"));
        assert_eq!(q.push(FrameKind::State, frame("s2")), 0);
        assert_eq!(q.push(FrameKind::State, frame("s3")), 3);
        assert_eq!(drain(&mut q), "s3\n");
    }

    #[test]
    fn many_states_for_a_slow_reader_leave_one() {
        let mut q = OutQueue::default();
        let mut dropped = 0;
        for n in 0..10_000 {
            dropped += q.push(FrameKind::State, frame(&format!("s{n:05}")));
        }
        assert_eq!(q.bytes(), 7);
        assert_eq!(dropped, 9_999 * 7);
        assert_eq!(drain(&mut q), "s09999\n");
    }

    #[test]
    fn batches_join_frames_up_to_the_size_and_always_take_one() {
        let mut q = OutQueue::default();
        q.push(FrameKind::Reply, frame("aaaa"));
        q.push(FrameKind::Reply, frame("bbbb"));
        q.push(FrameKind::Reply, frame("cccc"));
        assert_eq!(q.take_batch(10).unwrap(), Bytes::from("aaaa\nbbbb\n"));
        assert_eq!(q.take_batch(1).unwrap(), frame("cccc"));
        assert_eq!(q.take_batch(10), None);
    }

    #[test]
    fn a_disconnect_keeps_the_notices_and_ends_with_the_last_frame() {
        let mut q = OutQueue::default();
        q.push(FrameKind::Reply, frame("r1"));
        q.push(FrameKind::Notice, frame("n1"));
        q.push(FrameKind::State, frame("s1"));
        assert_eq!(q.drop_all_but_notices(), 6);
        q.set_last(frame("error"));
        // A notice counted before the disconnect still goes before the end.
        q.push(FrameKind::Notice, frame("n2"));
        q.push(FrameKind::State, frame("s2"));
        assert_eq!(q.bytes(), 3 + 6 + 3 + 3);
        assert_eq!(drain(&mut q), "n1\nn2\ns2\nerror\n");
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn the_outbox_counts_bytes_and_requests_and_wakes_a_paused_reader() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        use std::task::Wake;

        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(woken.clone());
        let outbox = Outbox::new(1, limits());
        assert!(!outbox.hold_reading(&waker));
        outbox.add(1200);
        assert!(outbox.hold_reading(&waker));
        outbox.release(600);
        assert_eq!(woken.0.load(Ordering::SeqCst), 0, "still above low water");
        outbox.release(400);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert!(!outbox.hold_reading(&waker));
        for _ in 0..8 {
            outbox.request_sent();
        }
        assert!(outbox.hold_reading(&waker));
        for _ in 0..6 {
            outbox.request_done();
        }
        assert_eq!(woken.0.load(Ordering::SeqCst), 2);
        assert_eq!(outbox.in_flight(), 2);
        assert!(outbox.close());
        assert!(!outbox.close());
        assert!(outbox.is_closing());
    }
}
