//! A shadow of what the freshness machine has been told, kept by the
//! `freshness_machine` target from the inputs it feeds and the effects it
//! receives — never from the machine's internals.
//!
//! It is deliberately *permissive* about settling: an edit counts as
//! settled after any `tool_result` of the same session lifetime and tool,
//! at its settle deadline, or when its lifetime ends — never later than the
//! machine settles it (which matches results first-in first-out). So "the
//! shadow saw an unsettled edit at a sync's start" implies the machine did,
//! which is what makes the no-false-freshness check sound.

use std::collections::BTreeMap;

use cgc_fresh_core::freshness::watcher_model::WatcherModel;
use cgc_fresh_core::freshness::FlightId;

/// The workspace root every scenario uses.
pub const WORKSPACE_ROOT: &str = "/ws";

/// Whether `path` lies inside [`WORKSPACE_ROOT`], by the rule the machine
/// documents, restated: relative paths start at the root, `.` and empty
/// components vanish, `..` drops the previous component and never climbs
/// above `/`, and the result is inside when it starts with the root's
/// component. No filesystem access.
pub fn inside_workspace(path: &str) -> bool {
    let root = WORKSPACE_ROOT.trim_start_matches('/');
    let mut stack: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        vec![root]
    };
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            name => stack.push(name),
        }
    }
    stack.first() == Some(&root)
}

/// `path` relative to [`WORKSPACE_ROOT`] by the same rule, `/`-separated
/// (`.` for the root itself), when it lies inside.
pub fn workspace_relative(path: &str) -> Option<String> {
    let root = WORKSPACE_ROOT.trim_start_matches('/');
    let mut stack: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        vec![root]
    };
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            name => stack.push(name),
        }
    }
    if stack.first() != Some(&root) {
        return None;
    }
    Some(match stack.len() {
        1 => ".".to_string(),
        _ => stack[1..].join("/"),
    })
}

/// The lifetime of an edit reported under the name of a session that had
/// ended: no lifetime is live for it, so only its deadline settles it.
pub const ORPHAN: u64 = 0;

/// One observed edit.
#[derive(Debug, Clone)]
pub struct Edit {
    pub lifetime: u64,
    pub tool: &'static str,
    pub at: u64,
    pub settled: bool,
}

/// The sync occupying the workspace, from its `StartSync` to the terminal
/// report the target sends for it.
#[derive(Debug, Clone)]
pub struct OpenFlight {
    pub id: FlightId,
    /// How many edits had been observed at its start.
    pub edits_at_start: usize,
    /// Whether one of them was unsettled then.
    pub unsettled_at_start: bool,
    /// The paying lifetime of an automatic sync.
    pub payer: Option<u64>,
    /// Cancelled (its payer ended) or superseded (a watcher was verified):
    /// its outcome no longer counts.
    pub draining: bool,
    pub spawned: bool,
}

/// A live session name.
#[derive(Debug, Clone, Copy)]
pub struct Live {
    pub lifetime: u64,
    pub instance: Option<u8>,
}

/// Everything the shadow tracks.
#[derive(Debug, Default)]
pub struct Shadow {
    pub now: u64,
    pub settle_ms: u64,
    pub live: BTreeMap<&'static str, Live>,
    /// Ended names and the instance they ended with.
    pub ended: BTreeMap<&'static str, Option<u8>>,
    next_lifetime: u64,
    pub edits: Vec<Edit>,
    pub flight: Option<OpenFlight>,
    pub last_started: Option<FlightId>,
    /// Flights whose terminal report was sent (reports about them are stale).
    pub closed: Vec<FlightId>,
    /// The number of edits a covering success saw: `fresh` is justified
    /// while no further edit was observed.
    pub fresh_basis: Option<usize>,
    /// Automatic syncs spawned per lifetime, net of busy refunds.
    pub spawns: BTreeMap<u64, u32>,
    /// Notices delivered per (lifetime, condition).
    pub delivered: BTreeMap<(u64, cgc_fresh_proto::NoticeCondition), u32>,
    /// The managed watcher and the attempts made, by the core's reference
    /// model of the watcher rules.
    pub watcher: WatcherModel,
}

impl Shadow {
    /// A shadow for a machine whose edits settle `settle_ms` after their call.
    pub fn new(settle_ms: u64) -> Self {
        Shadow {
            settle_ms,
            watcher: WatcherModel::new(1_001),
            ..Shadow::default()
        }
    }

    /// Starts a lifetime for `name`.
    pub fn start_lifetime(&mut self, name: &'static str, instance: Option<u8>) -> u64 {
        // Lifetimes start at 1: [`ORPHAN`] is never live.
        self.next_lifetime += 1;
        self.ended.remove(name);
        self.live.insert(
            name,
            Live {
                lifetime: self.next_lifetime,
                instance,
            },
        );
        self.next_lifetime
    }

    /// The lifetime ended (shutdown or replacement): its edits are settled,
    /// its watcher is gone, and an automatic sync it pays for is cancelled
    /// — returned, since the machine must say `CancelSync` for it.
    pub fn end_lifetime(&mut self, lifetime: u64) -> Option<FlightId> {
        for edit in &mut self.edits {
            if edit.lifetime == lifetime {
                edit.settled = true;
            }
        }
        self.watcher.end_lifetime(lifetime);
        match &mut self.flight {
            Some(flight) if flight.payer == Some(lifetime) && !flight.draining => {
                flight.draining = true;
                Some(flight.id)
            }
            _ => None,
        }
    }

    /// Whether an observed edit may still be being written now.
    pub fn any_unsettled(&self) -> bool {
        self.edits
            .iter()
            .any(|edit| !edit.settled && self.now < edit.at.saturating_add(self.settle_ms))
    }

    /// The terminal report for the open flight is being sent; returns the
    /// flight. `refund`: a busy ending gives a spawned automatic sync's
    /// slot back (a draining one's outcome counts for nothing).
    pub fn close_flight(&mut self, refund: bool) -> Option<OpenFlight> {
        let flight = self.flight.take()?;
        if refund && !flight.draining && flight.spawned {
            if let Some(payer) = flight.payer {
                if let Some(spent) = self.spawns.get_mut(&payer) {
                    *spent = spent.saturating_sub(1);
                }
            }
        }
        self.closed.push(flight.id);
        Some(flight)
    }

    /// The live lifetime of `name`.
    /// A restarted machine numbers lifetimes from 1 again; what was kept
    /// per lifetime belonged to the ones that are gone.
    pub fn restart_lifetimes(&mut self) {
        self.next_lifetime = 0;
        self.spawns.clear();
        self.delivered.clear();
    }

    pub fn lifetime(&self, name: &str) -> Option<u64> {
        self.live.get(name).map(|live| live.lifetime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_placed_lexically() {
        assert!(inside_workspace("src/a.rs"));
        assert!(inside_workspace("/ws"));
        assert!(inside_workspace("/ws/../ws/./x"));
        assert!(inside_workspace("../ws/x"));
        assert!(inside_workspace("/../../ws/x"));
        assert!(!inside_workspace("../ws2/x"));
        assert!(!inside_workspace("/tmp/x"));
        assert!(!inside_workspace("/"));
        assert!(!inside_workspace(".."));
        assert!(!inside_workspace("/wsx"));
    }
}
