//! `BackendDetector`: which database backend CGC will use, for `auto`
//! watcher mode — bounded by `cgc.timeoutMs` and failing open to the
//! conservative "embedded" answer.
//!
//! Order (the rules are `cgc_fresh_core::watcher::backend`): `--db` in
//! `cgc.globalArgs` (CGC's own highest override); the runtime environment
//! overrides CGC itself honours; then `cgc doctor`'s `Default
//! database:` line (its exit code says nothing; a hung doctor is stopped with
//! its group at the bound); then `~/.codegraphcontext/.env`. Answers are
//! cached per session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;

use crate::service::messages::ConfigChanged;
use cgc_fresh_core::config::Settings;
use cgc_fresh_core::freshness::SessionKey;
use cgc_fresh_core::watcher::backend::{decide, from_global_args, from_runtime_env, BackendAnswer};

use crate::process::spawn::ChildKind;
use crate::supervisor::{ChildEvent, RootSupervisor, SpawnChild, StopChild};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "backend_detector";

/// Asks for the backend on behalf of a session.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DetectBackend {
    pub session: SessionKey,
    pub reply_to: Recipient<BackendDetected>,
}

/// The answer.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct BackendDetected {
    pub session: SessionKey,
    pub answer: BackendAnswer,
}

/// A session lifetime's work stopped: its answer (and a wait for one) is
/// dropped, so the cache holds only live lifetimes.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForgetBackend(pub SessionKey);

struct Probe {
    child: Option<u64>,
    output: Vec<String>,
    timer: Option<SpawnHandle>,
    timed_out: bool,
    waiting: Vec<(SessionKey, Recipient<BackendDetected>)>,
}

pub struct BackendDetector {
    home: PathBuf,
    settings: Settings,
    supervisor: Addr<RootSupervisor>,
    cache: HashMap<SessionKey, BackendAnswer>,
    probe: Option<Probe>,
}

impl BackendDetector {
    pub fn new(settings: Settings, supervisor: Addr<RootSupervisor>) -> Self {
        let home = crate::paths::home_dir();
        BackendDetector {
            home,
            settings,
            supervisor,
            cache: HashMap::new(),
            probe: None,
        }
    }

    fn answer(
        &mut self,
        session: SessionKey,
        answer: BackendAnswer,
        to: &Recipient<BackendDetected>,
    ) {
        tracing::info!(component = COMPONENT, event = "backend_detected", session = %session, backend = %answer);
        self.cache.insert(session.clone(), answer.clone());
        to.do_send(BackendDetected { session, answer });
    }

    fn finish_probe(&mut self) {
        let Some(probe) = self.probe.take() else {
            return;
        };
        let doctor = (!probe.timed_out).then(|| probe.output.join("\n"));
        let dotenv = std::fs::read_to_string(self.home.join(".codegraphcontext/.env")).ok();
        let env = from_runtime_env(|name| std::env::var(name).ok());
        let answer = decide(env, doctor.as_deref(), dotenv.as_deref());
        for (session, to) in probe.waiting {
            self.answer(session, answer.clone(), &to);
        }
    }
}

impl Actor for BackendDetector {
    type Context = Context<Self>;
}

impl Handler<ForgetBackend> for BackendDetector {
    type Result = ();
    fn handle(&mut self, msg: ForgetBackend, _: &mut Self::Context) {
        self.cache.remove(&msg.0);
        if let Some(probe) = self.probe.as_mut() {
            probe.waiting.retain(|(session, _)| *session != msg.0);
        }
    }
}

impl Handler<DetectBackend> for BackendDetector {
    type Result = ();
    fn handle(&mut self, msg: DetectBackend, ctx: &mut Self::Context) {
        if let Some(answer) = self.cache.get(&msg.session).cloned() {
            msg.reply_to.do_send(BackendDetected {
                session: msg.session,
                answer,
            });
            return;
        }
        let overrides = from_global_args(&self.settings.cgc.global_args)
            .or_else(|| from_runtime_env(|name| std::env::var(name).ok()));
        if let Some(env) = overrides {
            let answer = decide(Some(env), None, None);
            self.answer(msg.session, answer, &msg.reply_to);
            return;
        }
        if let Some(probe) = self.probe.as_mut() {
            probe.waiting.push((msg.session, msg.reply_to));
            return;
        }
        self.probe = Some(Probe {
            child: None,
            output: Vec::new(),
            timer: None,
            timed_out: false,
            waiting: vec![(msg.session, msg.reply_to)],
        });
        let mut args = self.settings.cgc.global_args.clone();
        args.push("doctor".into());
        let spawn = self.supervisor.send(SpawnChild {
            program: PathBuf::from(&self.settings.cgc.executable),
            args,
            env_set: Vec::new(),
            kind: ChildKind::Probe,
            session: None,
            requester: ctx.address().recipient(),
            piped_stdin: false,
        });
        let bound = Duration::from_millis(self.settings.cgc.timeout_ms);
        ctx.spawn(
            spawn
                .into_actor(self)
                .map(move |result, act, ctx| match result {
                    Ok(Ok(started)) => {
                        if let Some(probe) = act.probe.as_mut() {
                            probe.child = Some(started.id);
                            probe.timer = Some(ctx.run_later(bound, move |act, _| {
                                if let Some(probe) = act.probe.as_mut() {
                                    tracing::warn!(
                                        component = COMPONENT,
                                        event = "doctor_timeout",
                                        bound_ms = bound.as_millis() as u64
                                    );
                                    probe.timed_out = true;
                                    act.supervisor.do_send(StopChild {
                                        id: started.id,
                                        reason: "cgc doctor exceeded cgc.timeoutMs",
                                    });
                                }
                            }));
                        }
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(component = COMPONENT, event = "doctor_failed", error = %error);
                        if let Some(probe) = act.probe.as_mut() {
                            probe.timed_out = true;
                        }
                        act.finish_probe();
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "doctor_failed", error = %error);
                        act.finish_probe();
                    }
                }),
        );
    }
}

impl Handler<ChildEvent> for BackendDetector {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { text, .. } => {
                if let Some(probe) = self.probe.as_mut() {
                    if probe.output.len() < 1000 {
                        probe.output.push(text);
                    }
                }
            }
            ChildEvent::Exited { .. } => {
                if let Some(timer) = self.probe.as_mut().and_then(|p| p.timer.take()) {
                    ctx.cancel_future(timer);
                }
                self.finish_probe();
            }
        }
    }
}

impl Handler<ConfigChanged> for BackendDetector {
    type Result = ();
    /// A reloaded configuration.
    fn handle(&mut self, msg: ConfigChanged, _: &mut Self::Context) {
        self.settings = msg.0.settings.clone();
    }
}
