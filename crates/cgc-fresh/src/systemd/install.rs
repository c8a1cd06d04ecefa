//! `cgc-fresh install` and `cgc-fresh uninstall`: put one workspace under
//! the systemd user manager (socket activation), or take it out again.
//!
//! Both build a [`Plan`] first. `--dry-run` prints it (with the effective
//! lines of every file) and stops. Otherwise the commands check that a user
//! manager is reachable, print the plan, and execute it step by step,
//! printing each step as it is done. Without a reachable manager (no
//! `systemctl`, no user bus: containers, ssh sessions without lingering)
//! nothing is changed and the command prints how to run the service by hand
//! instead; that is not an error (exit 0).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use super::plan::{install_plan, print_plan, uninstall_plan, Action, Instance, OnFailure, Plan};
use super::systemctl::{Availability, Systemctl, SystemctlCommand};
use crate::paths::{canonical_workspace, default_runtime_dir, Env, ProcessEnv};
use crate::shell_word::shell_word;

/// `cgc-fresh install --workspace PATH [--dry-run]`, writing its report to
/// `out`. Errors: unusable workspace or binary path, no config directory,
/// or a failed step (the report names it; later steps were not run).
pub fn run_install(workspace: &Path, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let workspace = canonical_workspace(workspace).context("cannot use the workspace")?;
    let systemctl = SystemctlCommand::from_path_env();
    let host = Host::from_process(&ProcessEnv, &systemctl)?;
    install(&workspace, &host, dry_run, out)
}

/// `cgc-fresh uninstall --workspace PATH [--dry-run]`. The workspace need
/// not exist any more; an absolute path is then taken as given (the instance
/// id is computed from it, so pass the path that was installed).
pub fn run_uninstall(workspace: &Path, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let workspace = match canonical_workspace(workspace) {
        Ok(canonical) => canonical,
        Err(error) if error.kind() == io::ErrorKind::NotFound && workspace.is_absolute() => {
            writeln!(
                out,
                "Note: {} does not exist any more; using the path as given.",
                workspace.display()
            )?;
            workspace.to_path_buf()
        }
        Err(error) => return Err(error).context("cannot use the workspace"),
    };
    let systemctl = SystemctlCommand::from_path_env();
    let host = Host::from_process(&ProcessEnv, &systemctl)?;
    uninstall(&workspace, &host, dry_run, out)
}

/// What the commands need from the machine, explicit so tests can supply
/// their own.
pub struct Host<'a> {
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config_home: PathBuf,
    /// Set when `$XDG_CONFIG_HOME` moves the config directory away from
    /// `~/.config`: the user manager must see the same value for `%E`.
    pub config_home_from_env: bool,
    /// The absolute path of the cgc-fresh binary to put in `ExecStart`.
    pub binary: PathBuf,
    /// Where clients look for sockets (`$XDG_RUNTIME_DIR/cgc-fresh`).
    pub runtime_dir: PathBuf,
    pub systemctl: &'a dyn Systemctl,
}

impl<'a> Host<'a> {
    /// The running process's view: its own binary and environment.
    pub fn from_process(env: &dyn Env, systemctl: &'a dyn Systemctl) -> anyhow::Result<Host<'a>> {
        let binary = std::env::current_exe().context("cannot find the path of this binary")?;
        if !binary.is_file() {
            bail!(
                "this binary's path {} no longer exists (replaced while running?); run the \
                 installed cgc-fresh again",
                binary.display()
            );
        }
        let (config_home, config_home_from_env) = config_home(env)?;
        Ok(Host {
            config_home,
            config_home_from_env,
            binary,
            runtime_dir: default_runtime_dir(env),
            systemctl,
        })
    }
}

/// `$XDG_CONFIG_HOME` when set to an absolute path (the XDG rule: a relative
/// one is ignored), else `$HOME/.config`. The flag says whether the variable
/// chose a directory other than `$HOME/.config`.
pub fn config_home(env: &dyn Env) -> anyhow::Result<(PathBuf, bool)> {
    let default = env
        .var("HOME")
        .map(|home| PathBuf::from(home).join(".config"));
    match env.var("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => {
            let custom = default.as_deref() != Some(dir.as_path());
            Ok((dir, custom))
        }
        _ => default
            .map(|dir| (dir, false))
            .context("neither XDG_CONFIG_HOME nor HOME is set; cannot find the config directory"),
    }
}

/// [`run_install`] for a canonical workspace on `host`.
pub fn install(
    workspace: &Path,
    host: &Host<'_>,
    dry_run: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let instance = Instance::new(workspace, &host.config_home);
    let mut plan = install_plan(&instance, &host.binary)?;
    if host.config_home_from_env {
        plan.notes.push(format!(
            "XDG_CONFIG_HOME is {}: the systemd user manager must have the same value \
             (`systemctl --user show-environment`), or it will not find the units and the \
             environment file.",
            host.config_home.display()
        ));
    }
    if dry_run {
        print_plan(&plan, true, out)?;
        writeln!(
            out,
            "Dry run: nothing was written and nothing was run. A real run first checks that a \
             systemd user manager is reachable; without one it changes nothing and prints how to \
             start the service by hand."
        )?;
        return Ok(());
    }
    if let Availability::Unavailable(reason) = host.systemctl.availability() {
        writeln!(out, "Not installing systemd units: {reason}.")?;
        writeln!(
            out,
            "Start the service by hand instead (foreground; JSON logs on stderr):"
        )?;
        writeln!(
            out,
            "  {} serve --workspace {}",
            shell_word(&host.binary),
            shell_word(workspace)
        )?;
        writeln!(
            out,
            "Nothing was changed. Without a unit, the harness bridge starts the service on demand."
        )?;
        return Ok(());
    }
    print_plan(&plan, false, out)?;
    if let Err(error) = execute_plan(&plan, host.systemctl, out) {
        writeln!(
            out,
            "To investigate: systemctl --user status {} {}",
            instance.socket_unit(),
            instance.service_unit()
        )?;
        return Err(error.into());
    }
    writeln!(
        out,
        "Installed: {} listens on {}; the service starts on the first connection.",
        instance.socket_unit(),
        host.runtime_dir
            .join(format!("{}.sock", instance.id))
            .display()
    )?;
    writeln!(
        out,
        "Logs: journalctl --user -u {} -o cat",
        instance.service_unit()
    )?;
    writeln!(
        out,
        "Status: systemctl --user status {} {}",
        instance.socket_unit(),
        instance.service_unit()
    )?;
    Ok(())
}

/// [`run_uninstall`] for an absolute workspace path on `host`.
pub fn uninstall(
    workspace: &Path,
    host: &Host<'_>,
    dry_run: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let instance = Instance::new(workspace, &host.config_home);
    let plan = uninstall_plan(&instance);
    if dry_run {
        print_plan(&plan, false, out)?;
        writeln!(out, "Dry run: nothing was run and nothing was removed.")?;
        return Ok(());
    }
    if let Availability::Unavailable(reason) = host.systemctl.availability() {
        writeln!(out, "Not uninstalling: {reason}.")?;
        writeln!(
            out,
            "Nothing was changed: without a user manager there is no unit to disable. \
             A service started by hand stops with Ctrl-C or SIGTERM."
        )?;
        return Ok(());
    }
    print_plan(&plan, false, out)?;
    execute_plan(&plan, host.systemctl, out)?;
    writeln!(out, "Uninstalled {}.", instance.socket_unit())?;
    Ok(())
}

/// A plan that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("step {step} of {total} failed ({action}): {detail}; the steps after it were not run")]
    Stopped {
        step: usize,
        total: usize,
        action: String,
        detail: String,
    },
    #[error("{} of {total} steps failed: {}", failures.len(), failures.join("; "))]
    SomeFailed { total: usize, failures: Vec<String> },
    #[error("cannot write the report: {0}")]
    Output(#[from] io::Error),
}

/// Executes `plan` in order, printing `[i/n] <step> ... done|failed: why`
/// for each step as it happens. Honors [`Plan::on_failure`].
pub fn execute_plan(
    plan: &Plan,
    systemctl: &dyn Systemctl,
    out: &mut dyn Write,
) -> Result<(), PlanError> {
    let total = plan.actions.len();
    let mut failures = Vec::new();
    for (index, action) in plan.actions.iter().enumerate() {
        let step = index + 1;
        write!(out, "[{step}/{total}] {} ... ", action.describe())?;
        out.flush()?;
        match perform(action, systemctl) {
            Ok(outcome) => writeln!(out, "{outcome}")?,
            Err(detail) => {
                writeln!(out, "failed: {detail}")?;
                match plan.on_failure {
                    OnFailure::Stop => {
                        return Err(PlanError::Stopped {
                            step,
                            total,
                            action: action.describe(),
                            detail,
                        })
                    }
                    OnFailure::KeepGoing => {
                        failures.push(format!("step {step} ({}): {detail}", action.describe()))
                    }
                }
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(PlanError::SomeFailed { total, failures })
    }
}

/// Does one step; `Ok` is the word to print, `Err` why it failed.
fn perform(action: &Action, systemctl: &dyn Systemctl) -> Result<&'static str, String> {
    match action {
        Action::WriteFile {
            path,
            contents,
            mode,
            ..
        } => write_file_atomically(path, contents, *mode)
            .map(|()| "done")
            .map_err(|e| e.to_string()),
        Action::RemoveFile { path, .. } => match fs::remove_file(path) {
            Ok(()) => Ok("done"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok("done (was not there)"),
            Err(e) => Err(e.to_string()),
        },
        Action::Systemctl { args, .. } => match systemctl.run(args) {
            Ok(output) if output.success => Ok("done"),
            Ok(output) => Err(if output.stderr.is_empty() {
                output.status
            } else {
                format!("{}: {}", output.status, output.stderr)
            }),
            Err(e) => Err(format!("cannot run systemctl: {e}")),
        },
    }
}

/// Writes through a temporary file in the same directory and renames it
/// over `path`, so the user manager never reads a half-written unit.
fn write_file_atomically(path: &Path, contents: &str, mode: u32) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no parent directory", path.display()),
        )
    })?;
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&temporary)?;
        file.write_all(contents.as_bytes())?;
        // The umask may have narrowed `mode` at creation; set it exactly.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::workspace_id;
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;

    use crate::systemd::systemctl::CommandOutput;

    /// Records every call; fails the `systemctl` subcommands listed in
    /// `failing` (matched on the second argument, after `--user`).
    struct FakeSystemctl {
        availability: Availability,
        failing: Vec<&'static str>,
        asked_availability: Cell<bool>,
        calls: RefCell<Vec<Vec<String>>>,
    }

    impl FakeSystemctl {
        fn available() -> FakeSystemctl {
            FakeSystemctl {
                availability: Availability::Available,
                failing: Vec::new(),
                asked_availability: Cell::new(false),
                calls: RefCell::new(Vec::new()),
            }
        }

        fn calls(&self) -> Vec<String> {
            self.calls.borrow().iter().map(|c| c.join(" ")).collect()
        }
    }

    impl Systemctl for FakeSystemctl {
        fn availability(&self) -> Availability {
            self.asked_availability.set(true);
            self.availability.clone()
        }

        fn run(&self, args: &[String]) -> io::Result<CommandOutput> {
            self.calls.borrow_mut().push(args.to_vec());
            let fails = args
                .get(1)
                .is_some_and(|a| self.failing.contains(&a.as_str()));
            Ok(CommandOutput {
                success: !fails,
                status: if fails {
                    "exit status: 1"
                } else {
                    "exit status: 0"
                }
                .to_string(),
                stdout: String::new(),
                stderr: if fails {
                    "Failed: Access denied".to_string()
                } else {
                    String::new()
                },
            })
        }
    }

    struct Fixture {
        _tmp: tempfile::TempDir,
        workspace: PathBuf,
        config_home: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            let workspace = tmp.path().join("my project");
            fs::create_dir(&workspace).unwrap();
            let workspace = fs::canonicalize(&workspace).unwrap();
            let config_home = tmp.path().join("config");
            Fixture {
                _tmp: tmp,
                workspace,
                config_home,
            }
        }

        fn host<'a>(&self, systemctl: &'a FakeSystemctl) -> Host<'a> {
            Host {
                config_home: self.config_home.clone(),
                config_home_from_env: false,
                binary: PathBuf::from("/opt/cgc/bin/cgc-fresh"),
                runtime_dir: PathBuf::from("/run/user/1000/cgc-fresh"),
                systemctl,
            }
        }

        fn id(&self) -> String {
            workspace_id(&self.workspace)
        }

        fn unit_dir(&self) -> PathBuf {
            self.config_home.join("systemd/user")
        }

        fn env_file(&self) -> PathBuf {
            self.config_home
                .join("cgc-fresh")
                .join(format!("{}.env", self.id()))
        }
    }

    fn text(out: Vec<u8>) -> String {
        String::from_utf8(out).unwrap()
    }

    impl Fixture {
        /// Runs `install` for the fixture's workspace; returns what it printed.
        fn install(&self, fake: &FakeSystemctl, dry_run: bool) -> String {
            let mut out = Vec::new();
            install(&self.workspace, &self.host(fake), dry_run, &mut out).unwrap();
            text(out)
        }

        /// Runs `uninstall` for the fixture's workspace; returns what it printed.
        fn uninstall(&self, fake: &FakeSystemctl, dry_run: bool) -> String {
            let mut out = Vec::new();
            uninstall(&self.workspace, &self.host(fake), dry_run, &mut out).unwrap();
            text(out)
        }
    }

    #[test]
    fn dry_run_prints_the_plan_and_changes_nothing() {
        let fx = Fixture::new();
        let fake = FakeSystemctl::available();
        let out = fx.install(&fake, true);

        let id = fx.id();
        for expected in [
            format!("  1. write {}/cgc-fresh@.socket\n", fx.unit_dir().display()),
            format!(
                "  2. write {}/cgc-fresh@.service\n",
                fx.unit_dir().display()
            ),
            format!("  3. write {}\n", fx.env_file().display()),
            "  4. systemctl --user daemon-reload\n".to_string(),
            format!("  5. systemctl --user enable --now cgc-fresh@{id}.socket\n"),
            "| ExecStart=/opt/cgc/bin/cgc-fresh serve --workspace ${CGC_FRESH_WORKSPACE}\n"
                .to_string(),
            format!("| CGC_FRESH_WORKSPACE=\"{}\"\n", fx.workspace.display()),
            "Dry run: nothing was written and nothing was run.".to_string(),
        ] {
            assert!(out.contains(&expected), "missing {expected:?} in:\n{out}");
        }
        assert!(fake.calls().is_empty());
        assert!(!fake.asked_availability.get());
        assert!(
            !fx.config_home.exists(),
            "dry run created {}",
            fx.config_home.display()
        );
    }

    #[test]
    fn install_writes_the_files_then_reloads_and_enables_the_socket() {
        let fx = Fixture::new();
        let fake = FakeSystemctl::available();
        let out = fx.install(&fake, false);
        let id = fx.id();

        assert_eq!(
            fake.calls(),
            [
                "--user daemon-reload".to_string(),
                format!("--user enable --now cgc-fresh@{id}.socket"),
            ]
        );
        assert_eq!(
            fs::read_to_string(fx.unit_dir().join("cgc-fresh@.socket")).unwrap(),
            crate::systemd::units::SOCKET_TEMPLATE
        );
        let service = fs::read_to_string(fx.unit_dir().join("cgc-fresh@.service")).unwrap();
        assert_eq!(
            service,
            crate::systemd::units::SERVICE_TEMPLATE.replace("@BIN@", "/opt/cgc/bin/cgc-fresh")
        );
        let env = fs::read_to_string(fx.env_file()).unwrap();
        assert!(env.ends_with(&format!(
            "\nCGC_FRESH_WORKSPACE=\"{}\"\n",
            fx.workspace.display()
        )));
        assert_eq!(fs::metadata(fx.env_file()).unwrap().mode() & 0o777, 0o600);
        // No temporary files left behind.
        assert_eq!(fs::read_dir(fx.unit_dir()).unwrap().count(), 2);

        assert!(out.contains(&format!(
            "[1/5] write {}/cgc-fresh@.socket ... done\n",
            fx.unit_dir().display()
        )));
        assert!(out.contains(&format!(
            "[5/5] systemctl --user enable --now cgc-fresh@{id}.socket ... done\n"
        )));
        assert!(out.contains(&format!(
            "Installed: cgc-fresh@{id}.socket listens on /run/user/1000/cgc-fresh/{id}.sock"
        )));
    }

    #[test]
    fn install_stops_at_the_first_failed_step_and_says_which() {
        let fx = Fixture::new();
        let mut fake = FakeSystemctl::available();
        fake.failing = vec!["daemon-reload"];
        let mut out = Vec::new();
        let error = install(&fx.workspace, &fx.host(&fake), false, &mut out).unwrap_err();
        let out = text(out);

        let message = format!("{error:#}");
        assert!(
            message.contains("step 4 of 5 failed (systemctl --user daemon-reload)"),
            "{message}"
        );
        assert!(message.contains("Failed: Access denied"), "{message}");
        assert_eq!(
            fake.calls(),
            ["--user daemon-reload"],
            "enable must not run"
        );
        assert!(out.contains("[4/5] systemctl --user daemon-reload ... failed: exit status: 1: Failed: Access denied\n"));
        assert!(out.contains("To investigate: systemctl --user status"));
    }

    #[test]
    fn without_systemd_install_prints_the_manual_command_and_changes_nothing() {
        let fx = Fixture::new();
        let mut fake = FakeSystemctl::available();
        fake.availability = Availability::Unavailable("`systemctl` is not on PATH".to_string());
        let out = fx.install(&fake, false);

        assert!(out.starts_with("Not installing systemd units: `systemctl` is not on PATH.\n"));
        assert!(out.contains(&format!(
            "\n  /opt/cgc/bin/cgc-fresh serve --workspace '{}'\n",
            fx.workspace.display()
        )));
        assert!(fake.calls().is_empty());
        assert!(!fx.config_home.exists());
    }

    #[test]
    fn uninstall_disables_stops_and_removes_the_env_file_but_keeps_templates() {
        let fx = Fixture::new();
        let fake = FakeSystemctl::available();
        fx.install(&fake, false);
        fake.calls.borrow_mut().clear();

        let out = fx.uninstall(&fake, false);
        let id = fx.id();
        assert_eq!(
            fake.calls(),
            [
                format!("--user disable --now cgc-fresh@{id}.socket"),
                format!("--user stop cgc-fresh@{id}.service"),
            ]
        );
        assert!(!fx.env_file().exists());
        assert!(fx.unit_dir().join("cgc-fresh@.socket").exists());
        assert!(fx.unit_dir().join("cgc-fresh@.service").exists());
        assert!(out.contains(&format!("Uninstalled cgc-fresh@{id}.socket.")));

        // A second uninstall finds nothing to remove and still succeeds.
        let out = fx.uninstall(&fake, false);
        assert!(out.contains(" ... done (was not there)\n"));
    }

    #[test]
    fn uninstall_keeps_going_after_a_failed_step_and_reports_it() {
        let fx = Fixture::new();
        fs::create_dir_all(fx.env_file().parent().unwrap()).unwrap();
        fs::write(fx.env_file(), "CGC_FRESH_WORKSPACE=/x\n").unwrap();
        let mut fake = FakeSystemctl::available();
        fake.failing = vec!["disable"];
        let error = uninstall(&fx.workspace, &fx.host(&fake), false, &mut Vec::new()).unwrap_err();

        let message = format!("{error:#}");
        assert!(
            message.starts_with("1 of 3 steps failed: step 1 (systemctl --user disable"),
            "{message}"
        );
        assert_eq!(fake.calls().len(), 2, "stop still ran");
        assert!(!fx.env_file().exists(), "env file still removed");
    }

    #[test]
    fn uninstall_dry_run_and_no_systemd_change_nothing() {
        let fx = Fixture::new();
        fs::create_dir_all(fx.env_file().parent().unwrap()).unwrap();
        fs::write(fx.env_file(), "CGC_FRESH_WORKSPACE=/x\n").unwrap();

        let fake = FakeSystemctl::available();
        let out = fx.uninstall(&fake, true);
        assert!(out.contains(&format!("  3. remove {}\n", fx.env_file().display())));
        assert!(out.contains("Dry run: nothing was run and nothing was removed."));

        let mut offline = FakeSystemctl::available();
        offline.availability = Availability::Unavailable("offline".to_string());
        uninstall(&fx.workspace, &fx.host(&offline), false, &mut Vec::new()).unwrap();

        assert!(fake.calls().is_empty() && offline.calls().is_empty());
        assert!(fx.env_file().exists());
    }

    struct MapEnv(HashMap<&'static str, &'static str>);
    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| v.to_string())
        }
    }

    #[test]
    fn config_home_follows_xdg_rules() {
        let env = |pairs: &[(&'static str, &'static str)]| MapEnv(pairs.iter().copied().collect());
        assert_eq!(
            config_home(&env(&[("HOME", "/h")])).unwrap(),
            (PathBuf::from("/h/.config"), false)
        );
        assert_eq!(
            config_home(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/h/.config")])).unwrap(),
            (PathBuf::from("/h/.config"), false)
        );
        assert_eq!(
            config_home(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/cfg")])).unwrap(),
            (PathBuf::from("/cfg"), true)
        );
        // A relative XDG_CONFIG_HOME is ignored, per the XDG spec.
        assert_eq!(
            config_home(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "cfg")])).unwrap(),
            (PathBuf::from("/h/.config"), false)
        );
        assert!(config_home(&env(&[])).is_err());
    }
}
