//! The agent's reads (`cgc-fresh mcp`): a call waits, bounded, while
//! reported edits are unsynced (the rule is
//! `cgc_fresh_core::read_your_writes`), then goes to the sync runner.

use super::*;

/// An MCP tool call held for read-your-writes.
pub(super) struct WaitingMcpCall {
    pub(super) ask: McpAsk,
    pub(super) reply_to: Outlet,
    pub(super) id: Option<RequestId>,
    pub(super) arrived_ms: u64,
    /// A wake-up at its deadline is scheduled.
    pub(super) deadline_set: bool,
}

impl DriftObserverActor {
    pub(super) fn mcp_now_ms(&self) -> u64 {
        self.mcp_clock.elapsed().as_millis() as u64
    }

    /// Hands an MCP request to the runner, which owns the worker that
    /// answers it; without one, an error answers it.
    pub(super) fn forward_mcp(&self, ask: McpAsk, reply_to: Outlet, id: Option<RequestId>) {
        match &self.runner {
            Some(runner) => runner.do_send(McpRequest { ask, reply_to, id }),
            None => reply(
                &reply_to,
                id,
                ServerFrame::Mcp(crate::service::mcp_route::internal_error(
                    "the service is not ready to answer MCP requests",
                )),
            ),
        }
    }

    /// Passes on every waiting MCP call the read-your-writes rule lets go
    /// now (the graph covers the edits seen, or its bound passed), logging
    /// each wait; the others are asked again at their deadline or at the
    /// next change of the state.
    pub(super) fn release_mcp_calls(&mut self, ctx: &mut Context<Self>) {
        if self.mcp_waiting.is_empty() {
            return;
        }
        let frame = self.state_frame();
        let edits_pending = edits_pending(frame.status, frame.stale_since);
        let bound_ms = self.config.settings.mcp.read_your_writes_ms;
        let now_ms = self.mcp_now_ms();
        let mut keep = Vec::new();
        for mut call in std::mem::take(&mut self.mcp_waiting) {
            if !call.reply_to.is_open() {
                tracing::info!(
                    component = COMPONENT,
                    event = "mcp_call_dropped",
                    conn = call.reply_to.conn,
                    tool = call.ask.tool(),
                    reason = "its connection closed"
                );
                continue;
            }
            match read_your_writes(edits_pending, call.arrived_ms, now_ms, bound_ms) {
                ReadDecision::Answer {
                    waited_ms,
                    caught_up,
                } => {
                    tracing::info!(
                        component = COMPONENT,
                        event = "mcp_read_your_writes",
                        conn = call.reply_to.conn,
                        tool = call.ask.tool(),
                        waited_ms,
                        caught_up,
                        bound_ms,
                        // The sync the answer reflects (the last one that
                        // succeeded when the call was released).
                        sync = self.last_synced.map(|f| f.0)
                    );
                    self.forward_mcp(call.ask, call.reply_to, call.id);
                }
                ReadDecision::Wait { until_ms } => {
                    if !call.deadline_set {
                        call.deadline_set = true;
                        tracing::info!(
                            component = COMPONENT,
                            event = "mcp_call_waits",
                            conn = call.reply_to.conn,
                            tool = call.ask.tool(),
                            bound_ms,
                            reason = "edits the graph does not cover yet"
                        );
                        let after =
                            std::time::Duration::from_millis(until_ms.saturating_sub(now_ms));
                        ctx.run_later(after, |act, ctx| act.release_mcp_calls(ctx));
                    }
                    keep.push(call);
                }
            }
        }
        self.mcp_waiting = keep;
    }
}
