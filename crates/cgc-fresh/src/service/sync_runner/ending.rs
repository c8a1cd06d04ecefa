//! How a running sync is asked to end: the time budget, the reconcile's
//! one SIGINT (sent again when `cgc watch` does not take it), and the
//! supervisor's stop. What may be asked, and when, is the core's
//! (`cgc_fresh_core::sync_run`); here it is sent.

use super::*;

/// Sends what `request` asks for to the supervisor.
pub(super) fn send_end(supervisor: &Addr<RootSupervisor>, id: u64, request: EndRequest) {
    match request {
        EndRequest::Interrupt => supervisor.do_send(InterruptChild {
            id,
            reason: "reconcile complete",
        }),
        EndRequest::Stop(reason) => supervisor.do_send(StopChild { id, reason }),
    }
}

impl SyncRunner {
    pub(super) fn timed_out(&mut self, flight: FlightId) {
        let Some(run) = self.run.as_mut().filter(|r| r.flight() == flight) else {
            return;
        };
        run.timer = None;
        tracing::warn!(
            component = COMPONENT,
            event = "sync_timeout",
            flight = flight.0,
            child = run.state.child()
        );
        if let Some((id, request)) = run.state.time_out() {
            send_end(&self.supervisor, id, request);
        }
    }

    /// The reconcile's SIGINT was sent `sent` times: send it again if the
    /// run's rule says so (`SyncRunState::interrupt_again`), and look again
    /// later.
    pub(super) fn interrupt_not_taken(
        &mut self,
        flight: FlightId,
        sent: u32,
        ctx: &mut Context<Self>,
    ) {
        let Some(run) = self.run.as_ref().filter(|r| r.flight() == flight) else {
            return;
        };
        let Some(id) = run.state.interrupt_again(sent) else {
            return;
        };
        tracing::warn!(
            component = COMPONENT,
            event = "interrupt_repeated",
            flight = flight.0,
            child = id,
            sent,
            waited_ms = INTERRUPT_RETRY.as_millis() as u64
        );
        send_end(&self.supervisor, id, EndRequest::Interrupt);
        ctx.run_later(INTERRUPT_RETRY, move |act, ctx| {
            act.interrupt_not_taken(flight, sent + 1, ctx)
        });
    }

    /// The reconcile is done (its ready line): one SIGINT now, or when the
    /// child's id is known, and a look later in case it was not taken.
    pub(super) fn reconciled(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        let flight = run.flight();
        if let Some((id, request)) = run.state.request_end(EndRequest::Interrupt) {
            send_end(&self.supervisor, id, request);
        }
        ctx.run_later(INTERRUPT_RETRY, move |act, ctx| {
            act.interrupt_not_taken(flight, 1, ctx)
        });
    }
}
