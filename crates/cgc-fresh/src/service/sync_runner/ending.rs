//! How a running sync is asked to end: the time budget, the reconcile's
//! one SIGINT (sent again when `cgc watch` does not take it), and the
//! supervisor's stop.

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
        let Some(run) = self.run.as_mut().filter(|r| r.flight == flight) else {
            return;
        };
        run.timer = None;
        let child = run.phase.child();
        tracing::warn!(
            component = COMPONENT,
            event = "sync_timeout",
            flight = flight.0,
            child
        );
        run.facts.timed_out = true;
        self.request_end(EndRequest::Stop("time budget exhausted"));
    }

    /// The reconcile's SIGINT was sent `sent` times and `cgc watch` has not
    /// said it is stopping: send it again. CGC 0.6.13 waits for it in
    /// `threading.Event().wait()`, which a SIGINT the kernel hands to one
    /// of its other threads does not wake (seen on FalkorDB Lite, whose
    /// client runs two more threads, on a loaded machine: the reconcile
    /// sat after its ready line until the session ended). Only while the
    /// stopping line is not out, so a stop under way never gets a second
    /// SIGINT (that would make it exit 130); the time budget still bounds
    /// the whole run.
    pub(super) fn interrupt_not_taken(
        &mut self,
        flight: FlightId,
        sent: u32,
        ctx: &mut Context<Self>,
    ) {
        let Some(run) = self.run.as_ref() else { return };
        let waiting = run.flight == flight
            && run.facts.saw_ready
            && !run.facts.saw_stopping
            && matches!(run.end_requested, Some(EndRequest::Interrupt));
        let Some(id) = run.phase.child().filter(|_| waiting) else {
            return;
        };
        if sent >= INTERRUPT_ATTEMPTS {
            return;
        }
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

    /// Asks the running child to end, unless it was already asked as much
    /// or more (a stop is never downgraded to an interrupt, nor repeated).
    pub(super) fn request_end(&mut self, request: EndRequest) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        match (run.end_requested, request) {
            (Some(EndRequest::Stop(_)), _)
            | (Some(EndRequest::Interrupt), EndRequest::Interrupt) => return,
            _ => {}
        }
        run.end_requested = Some(request);
        if let Some(id) = run.phase.child() {
            send_end(&self.supervisor, id, request);
        }
    }
}
