//! The fuzzer's input: a scenario of timed steps, each one op (a session
//! start or end, a tool call or result, a wake, a sync or watcher report, a
//! restart), and the few names, tools and path pieces the ops pick from.

use arbitrary::Arbitrary;
use cgc_fresh_core::freshness::SyncOutcome;

pub(crate) const NAMES: [&str; 3] = ["a", "b", "c"];
/// `edit` and `write` modify files; `read` does not, nor does `Edit`
/// (tool names match exactly).
pub(crate) const TOOLS: [&str; 4] = ["edit", "write", "read", "Edit"];
pub(crate) const MODIFYING: [&str; 2] = ["edit", "write"];
/// Path components a tool path is built from.
const PIECES: [&str; 8] = ["ws", "src", "a.rs", ".", "..", "", "tmp", "ws2"];
#[derive(Arbitrary, Debug)]
pub(crate) struct Scenario {
    pub(crate) manual_only: bool,
    pub(crate) max_syncs: u8,
    pub(crate) batch_ms: u16,
    pub(crate) settle_ms: u16,
    pub(crate) steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
pub(crate) struct Step {
    pub(crate) advance: Advance,
    /// Whether a subscriber is there to receive this step's notices.
    pub(crate) subscribed: bool,
    pub(crate) op: Op,
}

#[derive(Arbitrary, Debug)]
pub(crate) enum Advance {
    Not,
    Little(u8),
    Much(u16),
}

impl Advance {
    pub(crate) fn millis(&self) -> u64 {
        match self {
            Advance::Not => 0,
            Advance::Little(ms) => u64::from(*ms),
            Advance::Much(ms) => u64::from(*ms) * 8,
        }
    }
}

#[derive(Arbitrary, Debug)]
pub(crate) enum Op {
    Start {
        name: u8,
        instance: u8,
        reason: u8,
    },
    End {
        name: u8,
    },
    Call {
        name: u8,
        tool: u8,
        paths: Vec<PathSpec>,
    },
    Result {
        name: u8,
        tool: u8,
        ok: bool,
    },
    Wake,
    WakeAtDeadline,
    Request {
        name: Option<u8>,
    },
    Spawn {
        pid: u32,
    },
    ProbeBusy,
    Declined,
    Finish(Outcome),
    StaleReport(u8),
    Restart,
    Watcher(WatcherOp),
}

#[derive(Arbitrary, Debug)]
pub(crate) struct PathSpec {
    absolute: bool,
    pieces: Vec<u8>,
}

impl PathSpec {
    pub(crate) fn text(&self) -> String {
        let pieces: Vec<&str> = self
            .pieces
            .iter()
            .take(6)
            .map(|piece| PIECES[usize::from(*piece) % PIECES.len()])
            .collect();
        let joined = pieces.join("/");
        if self.absolute {
            format!("/{joined}")
        } else {
            joined
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    NotApplied,
    Failed,
    TimedOut,
    Busy,
    Cancelled,
}

impl Outcome {
    pub(crate) fn report(self) -> SyncOutcome {
        match self {
            Outcome::Succeeded => SyncOutcome::Succeeded,
            Outcome::NotApplied => SyncOutcome::NotApplied {
                detail: "nothing to apply".into(),
            },
            Outcome::Failed => SyncOutcome::Failed {
                error: "exit status 1".into(),
            },
            Outcome::TimedOut => SyncOutcome::TimedOut {
                error: "after 600000 ms".into(),
            },
            Outcome::Busy => SyncOutcome::Busy {
                holder: "pid 7: cgc watch .".into(),
            },
            Outcome::Cancelled => SyncOutcome::Cancelled,
        }
    }
}

#[derive(Arbitrary, Debug)]
pub(crate) struct WatcherOp {
    /// Picks one of [`WatcherReport::ALL`].
    pub(crate) kind: u8,
    pub(crate) name: u8,
    /// Name the running watcher's session instead of `name`.
    pub(crate) owner: bool,
    /// Name the running watcher's pid instead of another.
    pub(crate) right_pid: bool,
    pub(crate) auto: bool,
}

pub(crate) fn name(index: u8) -> &'static str {
    NAMES[usize::from(index) % NAMES.len()]
}
