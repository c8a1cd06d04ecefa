//! The harness's frames, dispatched: hello, sessions, tool calls and
//! results, status, sync, subscribe, config, notices and MCP asks; each
//! becomes inputs of the core's observer or an answer on the requesting
//! connection's outlet.

use super::*;

/// Replies go through the connection's outlet, which counts their bytes
/// against its bound (`outbox.rs`); the connection stops reading requests
/// while it is over, so replies cannot pile up.
pub(super) fn reply(to: &Outlet, id: Option<RequestId>, frame: ServerFrame) {
    to.reply(&Envelope::with_id(id, frame));
}

/// Events answer only when the client asked (gave an `id`), so a harness can
/// pipeline them without reading acknowledgements.
pub(super) fn ack_if_asked(to: &Outlet, id: Option<RequestId>) {
    if id.is_some() {
        reply(to, id, ServerFrame::Ack);
    }
}

impl Handler<FromClient> for DriftObserverActor {
    type Result = ();

    fn handle(&mut self, msg: FromClient, ctx: &mut Self::Context) {
        let FromClient {
            conn,
            peer,
            id,
            frame,
            reply_to,
            // Counted against the connection's in-flight limit until the
            // end of this handler (after its reply is counted).
            in_flight: _in_flight,
        } = msg;
        match frame {
            ClientFrame::Hello(hello) => {
                tracing::info!(component = COMPONENT, event = "hello", conn, peer_pid = peer.pid, client = %hello.client, instance = %hello.instance);
                self.instances.insert(conn, hello.instance);
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
            ClientFrame::Status => {
                if self.panic_on_status {
                    panic!("fault injection: CGC_FRESH_FAULT_PANIC_ON_STATUS");
                }
                // Fault injection (debug builds only): wedge the event loop,
                // for the last-resort stop (`last_resort.rs`) to be tested.
                if cfg!(debug_assertions)
                    && std::env::var_os("CGC_FRESH_FAULT_WEDGE_ON_STATUS").is_some()
                {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                }
                self.check_cgc_executable();
                reply(&reply_to, id, ServerFrame::State(self.state_frame()))
            }
            ClientFrame::Config => reply(&reply_to, id, ServerFrame::Config(self.config_frame())),
            ClientFrame::McpTools => {
                tracing::info!(component = COMPONENT, event = "mcp_tools_requested", conn);
                self.forward_mcp(McpAsk::Tools, reply_to, id);
            }
            ClientFrame::McpCall(call) => {
                let arrived_ms = self.mcp_now_ms();
                tracing::info!(component = COMPONENT, event = "mcp_call_received", conn, tool = %call.name);
                if self.mcp_waiting.len() >= crate::service::mcp_route::MAX_WAITING_MCP_REQUESTS {
                    // Bounded memory whatever a client sends: answered at
                    // once, nothing kept.
                    tracing::warn!(
                        component = COMPONENT,
                        event = "mcp_call_refused",
                        conn,
                        reason = "too many waiting"
                    );
                    reply(
                        &reply_to,
                        id,
                        ServerFrame::Mcp(crate::service::mcp_route::internal_error(format!(
                            "{} requests already wait for the graph; try again",
                            crate::service::mcp_route::MAX_WAITING_MCP_REQUESTS
                        ))),
                    );
                    return;
                }
                self.mcp_waiting.push(WaitingMcpCall {
                    ask: McpAsk::Call {
                        name: call.name,
                        arguments: call.arguments,
                    },
                    reply_to,
                    id,
                    arrived_ms,
                    deadline_set: false,
                });
                self.release_mcp_calls(ctx);
            }
            ClientFrame::Subscribe => {
                self.flush_mail();
                if let Some(notices) = &self.notices {
                    notices.do_send(Subscribe(reply_to.clone()));
                }
                ack_if_asked(&reply_to, id);
                // A new subscriber sees where things stand right away.
                reply(&reply_to, None, ServerFrame::State(self.state_frame()));
            }
            ClientFrame::Sync => {
                ack_if_asked(&reply_to, id);
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_requested",
                    conn,
                    peer_pid = peer.pid
                );
                self.apply(Input::SyncRequested { session: None }, ctx);
            }
            ClientFrame::SessionStart(start) => {
                let instance = self
                    .instances
                    .get(&conn)
                    .cloned()
                    .unwrap_or_else(|| format!("conn-{conn}"));
                if !self.machine.admits_session(&start.session, &instance) {
                    // Said even without an `id`: the harness must learn
                    // that this session is not observed as its own.
                    tracing::warn!(component = COMPONENT, event = "session_refused", conn, session = %start.session, live = MAX_LIVE_SESSIONS);
                    reply(
                        &reply_to,
                        id,
                        ServerFrame::Error(ErrorFrame::new(
                            ErrorCode::Unavailable,
                            format!(
                                "{MAX_LIVE_SESSIONS} sessions are live in this workspace; \
                                 end one (session_shutdown) before starting another. \
                                 Edits reported under this session still mark the graph \
                                 possibly stale."
                            ),
                        )),
                    );
                    return;
                }
                if let Some(pid) = start.owner_pid {
                    if !owner_watch::exists(pid) {
                        tracing::warn!(component = COMPONENT, event = "owner_refused", conn, session = %start.session, owner_pid = pid);
                        reply(
                            &reply_to,
                            id,
                            ServerFrame::Error(ErrorFrame {
                                field: Some("owner_pid".into()),
                                ..ErrorFrame::new(
                                    ErrorCode::BadRequest,
                                    format!("owner_pid {pid} is not a running process"),
                                )
                            }),
                        );
                        return;
                    }
                }
                ack_if_asked(&reply_to, id);
                tracing::info!(component = COMPONENT, event = "session_start", conn, session = %start.session, instance = %instance, reason = ?start.reason);
                // A watcher attempt follows from the machine's
                // `SessionOpened`, for a new or a re-attached lifetime.
                self.apply(
                    Input::SessionStarted {
                        session: start.session,
                        instance,
                        reason: start.reason,
                        connection: Some(conn),
                        owner: start.owner_pid,
                    },
                    ctx,
                );
            }
            ClientFrame::ToolCall(call) => {
                if self.machine.policy().is_shell(&call.tool) {
                    self.take_watch_reference(ctx);
                }
                self.ack_session_event(
                    &reply_to,
                    id,
                    &call.session,
                    "the edit still marks the graph possibly stale, but no sync follows for it",
                );
                tracing::debug!(component = COMPONENT, event = "tool_call", session = %call.session, tool = %call.tool, paths = call.paths.len());
                // Paths as the file system names them: a symlinked or
                // `~`-relative path inside the workspace counts.
                let (paths, not_indexed) = if self.machine.policy().is_modifying(&call.tool) {
                    let resolved = real_path::resolve_all(call.paths, &self.workspace, &self.home);
                    self.drop_not_indexed(resolved)
                } else {
                    (call.paths, 0)
                };
                self.apply(
                    Input::ToolCall {
                        session: call.session,
                        tool: call.tool,
                        paths,
                        not_indexed,
                    },
                    ctx,
                );
            }
            ClientFrame::ToolResult(result) => {
                self.ack_session_event(&reply_to, id, &result.session, "the result is ignored");
                self.apply(
                    Input::ToolResult {
                        session: result.session,
                        tool: result.tool,
                        ok: result.ok,
                    },
                    ctx,
                );
            }
            ClientFrame::SessionShutdown(shutdown) => {
                ack_if_asked(&reply_to, id);
                tracing::info!(component = COMPONENT, event = "session_shutdown", conn, session = %shutdown.session, reason = shutdown.reason.as_deref());
                self.end_session(shutdown.session, ctx);
            }
            ClientFrame::TakeNotices(take) => {
                // What this session was offered before comes first.
                self.flush_mail();
                match (self.machine.current_lifetime(&take.session), &self.notices) {
                    (Some(session), Some(notices)) => notices.do_send(TakeHeld {
                        session,
                        id,
                        reply_to,
                        in_flight: _in_flight,
                    }),
                    _ => reply(
                        &reply_to,
                        id,
                        ServerFrame::Error(ErrorFrame::new(
                            ErrorCode::UnknownSession,
                            format!("session {:?} is not live here", take.session),
                        )),
                    ),
                }
            }
        }
    }
}

impl DriftObserverActor {
    pub(super) fn config_frame(&self) -> ConfigFrame {
        ConfigFrame {
            values: self.config.render_json(),
            warnings: self.config.warning_texts(),
        }
    }

    /// Drops the paths inside the workspace that CGC does not index (by
    /// the manifest's rules, `manifest::IndexRules`): an edit of such a
    /// file leaves the graph as it is, in lazy and watcher mode alike.
    /// Returns the rest and how many were dropped. Rules that cannot be
    /// read drop nothing.
    pub(super) fn drop_not_indexed(&mut self, paths: Vec<String>) -> (Vec<String>, usize) {
        if self.index_rules.is_none() {
            match IndexRules::load(&self.workspace) {
                Ok(rules) => self.index_rules = Some(rules),
                Err(error) => {
                    tracing::warn!(component = COMPONENT, event = "index_rules_unreadable", error = %error);
                    return (paths, 0);
                }
            }
        }
        let Some(rules) = self.index_rules.as_mut() else {
            return (paths, 0);
        };
        let mut kept = Vec::with_capacity(paths.len());
        let mut dropped = 0;
        let mut ignore_file_edited = false;
        for path in paths {
            let given = std::path::Path::new(&path);
            ignore_file_edited |= manifest::is_ignore_file(given);
            let relative = if given.is_absolute() {
                given.strip_prefix(&self.workspace).ok()
            } else {
                Some(given)
            };
            match relative {
                Some(relative) if !rules.indexes(relative) => dropped += 1,
                _ => kept.push(path),
            }
        }
        if dropped > 0 {
            tracing::debug!(
                component = COMPONENT,
                event = "paths_not_indexed",
                dropped,
                kept = kept.len()
            );
        }
        if ignore_file_edited {
            self.index_rules = None;
        }
        (kept, dropped)
    }

    /// Acknowledges an event about `session` when asked (an `id`); when the
    /// session is not live, the reply is an `unknown_session` error saying
    /// what became of the event (`consequence`) instead of a bare `ack`.
    pub(super) fn ack_session_event(
        &self,
        reply_to: &Outlet,
        id: Option<RequestId>,
        session: &str,
        consequence: &str,
    ) {
        if id.is_none() {
            return;
        }
        if self.machine.is_live(session) {
            return reply(reply_to, id, ServerFrame::Ack);
        }
        tracing::info!(component = COMPONENT, event = "unknown_session", session = %session);
        reply(
            reply_to,
            id,
            ServerFrame::Error(ErrorFrame::new(
                ErrorCode::UnknownSession,
                format!(
                    "session {session:?} is not live here (never started, or ended): \
                     {consequence}; send session_start first, on a connection that stays open"
                ),
            )),
        );
    }
}
