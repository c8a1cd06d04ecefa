//! The actor tree of one workspace, started and wired in one place.
//!
//! ```text
//! ConfigActor ──ConfigChanged──▶ DriftObserverActor, SyncRunner,
//!                                WatcherSupervisor, BackendDetector
//! DriftObserverActor ─▶ SyncSchedulerActor ─▶ SyncRunner ─▶ RootSupervisor
//!        │                     └──────────▶ NoticesActor
//!        └─▶ WatcherSupervisor ─▶ BackendDetector
//! ```
//!
//! The observer and the scheduler address each other (the scheduler's
//! `ObserverLink`), so the observer's address exists before it runs: its
//! context is made first, its peers are started with that address, and
//! then it runs with them. Each actor that reads the configuration is a
//! listener of the config actor itself, except the scheduler, whose
//! policy is the observer machine's (see `drift_observer/reports.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use cgc_fresh_core::freshness::SyncScheduler;

use super::backend_detector::BackendDetector;
use super::clock::now;
use super::config_actor::ConfigActor;
use super::drift_observer::{DriftObserverActor, ObserverPeers};
use super::messages::Shutdown;
use super::notices::NoticesActor;
use super::sync_runner::SyncRunner;
use super::sync_scheduler::{ObserverLink, SyncSchedulerActor};
use super::watcher_supervisor::WatcherSupervisor;
use crate::config_load::LoadedConfig;
use crate::paths::ServicePaths;
use crate::supervisor::RootSupervisor;

/// The addresses the service's shell needs: where connections and
/// signals go.
pub struct WorkspaceActors {
    /// Every harness frame's mailbox.
    pub observer: Addr<DriftObserverActor>,
    /// What a SIGHUP reloads.
    pub config: Addr<ConfigActor>,
}

/// Starts every actor of the workspace at `paths` and wires them; the
/// `supervisor` owns their children, `lifecycle` hears an idle exit.
pub fn start(
    paths: &ServicePaths,
    config_file: Option<PathBuf>,
    config: Arc<LoadedConfig>,
    supervisor: Addr<RootSupervisor>,
    lifecycle: Recipient<Shutdown>,
) -> WorkspaceActors {
    let settings = config.settings.clone();
    let workspace = paths.workspace.clone();
    let mut observer =
        DriftObserverActor::new(paths, config.clone(), supervisor.clone(), lifecycle);
    let observer_context = Context::<DriftObserverActor>::new();
    let observer_address = observer_context.address();

    let notices = NoticesActor::new(&observer.policy().workspace_root).start();
    let record = observer.record();
    let scheduler = SyncScheduler::new(
        observer.policy().clone(),
        record.sync_generation,
        record.edit_epoch,
        // Work pending in a restored record: the next lifetime pays.
        !record.pending.is_empty(),
        now(),
    );
    let link = ObserverLink {
        mail: observer_address.clone().recipient(),
        carry_out: observer_address.clone().recipient(),
        queued: observer_address.clone().recipient(),
        noted: observer_address.clone().recipient(),
    };
    let scheduler = SyncSchedulerActor::new(scheduler, link, notices.clone()).start();
    let runner = SyncRunner::new(
        workspace.clone(),
        settings.clone(),
        supervisor.clone(),
        scheduler.clone().recipient(),
    )
    .start();
    let detector = BackendDetector::new(settings.clone(), supervisor.clone()).start();
    let watcher = WatcherSupervisor::new(
        workspace.clone(),
        settings,
        supervisor,
        detector.clone(),
        observer_address.clone().recipient(),
    )
    .start();

    let config_actor = ConfigActor::new(
        workspace,
        config_file,
        vec![
            observer_address.clone().recipient(),
            runner.clone().recipient(),
            watcher.clone().recipient(),
            detector.clone().recipient(),
        ],
        config,
    )
    .start();
    observer.wire(ObserverPeers {
        notices,
        scheduler,
        runner,
        watcher,
        detector,
    });
    let observer = observer_context.run(observer);
    WorkspaceActors {
        observer,
        config: config_actor,
    }
}
