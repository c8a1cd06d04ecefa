//! Shell commands' edits: a probe's tree walk before and after the
//! command, compared, and the changed paths given to the core.

use super::*;

/// The answers for `probes`: the first carries `changes` (one comparison,
/// one edit), the others "unchanged" — their commands are covered by it.
pub(super) fn answers(probes: Vec<ProbeId>, changes: TreeChanges) -> Vec<Input> {
    probes
        .into_iter()
        .enumerate()
        .map(|(n, probe)| Input::ProbeAnswered {
            probe,
            changes: if n == 0 {
                changes.clone()
            } else {
                TreeChanges::Unchanged
            },
        })
        .collect()
}

impl DriftObserverActor {
    /// Starts one comparison for every waiting probe, unless one runs. The
    /// reference is the running sync's snapshot once taken (what changed
    /// after its start), else the manifest. Without a usable reference the
    /// answer is "whole workspace" at once: those inputs are returned.
    pub(super) fn compare_probes(&mut self, ctx: &mut Context<Self>) -> Vec<Input> {
        if self.comparing || self.probes_waiting.is_empty() {
            return Vec::new();
        }
        let running = self.machine.current_flight();
        let reference = match (&self.watch_reference, &self.snapshot) {
            // Its walk ends by calling this again.
            (Some(WatchReference::Taking), _) => return Vec::new(),
            (Some(WatchReference::Ready(taken)), _) => Some(taken.clone()),
            (Some(WatchReference::Failed), _) => None,
            (
                None,
                Some(Snapshot {
                    flight,
                    state: SnapshotState::Ready(taken),
                }),
            ) if Some(*flight) == running => Some(taken.clone()),
            (None, _) => self.manifest.clone(),
        };
        let batch = std::mem::take(&mut self.probes_waiting);
        if matches!(self.watch_reference, Some(WatchReference::Failed)) {
            // Answered below; the next command under the watcher tries anew.
            self.watch_reference = None;
        }
        let Some(reference) = reference.filter(|m| matches!(**m, Manifest::Recorded(_))) else {
            tracing::info!(
                component = COMPONENT,
                event = "shell_compared",
                probes = batch.len(),
                whole_workspace = true,
                reason = "no manifest"
            );
            return answers(batch, TreeChanges::WholeWorkspace);
        };
        self.comparing = true;
        let root = self.workspace.clone();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::compare(&root, &reference, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, ctx| {
                act.comparing = false;
                // A shell command may have changed an ignore file.
                act.index_rules = None;
                let changes = match joined {
                    Ok((Some(paths), ms)) => {
                        tracing::info!(component = COMPONENT, event = "shell_compared", probes = batch.len(), changed = paths.len(), ms = ms as u64, paths = ?paths.iter().take(8).collect::<Vec<_>>());
                        if paths.is_empty() {
                            TreeChanges::Unchanged
                        } else {
                            TreeChanges::Paths(paths)
                        }
                    }
                    Ok((None, ms)) => {
                        tracing::info!(component = COMPONENT, event = "shell_compared", probes = batch.len(), whole_workspace = true, ms = ms as u64);
                        TreeChanges::WholeWorkspace
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "shell_compare_failed", error = %error);
                        TreeChanges::WholeWorkspace
                    }
                };
                let mut inputs = answers(batch, changes).into_iter();
                if let Some(first) = inputs.next() {
                    act.apply(first, ctx);
                }
                for input in inputs {
                    act.apply(input, ctx);
                }
                if !act.machine.shell_commands_open() {
                    act.watch_reference = None;
                }
            }),
        );
        Vec::new()
    }
}
