//! What `cgc-fresh install` and `uninstall` do, as data: an ordered list of
//! steps that is printed as-is by `--dry-run` and executed step by step
//! otherwise, so what the user reviews is what runs.
//!
//! Install (for workspace id `<id>`, config directory `<cfg>`):
//! 1. write `<cfg>/systemd/user/cgc-fresh@.socket`
//! 2. write `<cfg>/systemd/user/cgc-fresh@.service` (binary path filled in)
//! 3. write `<cfg>/cgc-fresh/<id>.env` (`CGC_FRESH_WORKSPACE=...`)
//! 4. `systemctl --user daemon-reload`
//! 5. `systemctl --user enable --now cgc-fresh@<id>.socket`
//!
//! Uninstall: `disable --now` the socket (first, so no new connection
//! starts the service again), `stop` the service, remove the env file. The
//! two templates are kept: they are shared by every installed workspace, and
//! finding out whether another instance still uses them would need more
//! systemd state than is worth trusting. They are inert without an enabled
//! instance.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::units::{
    render_env_file, render_service, render_socket, service_unit, socket_unit, UnitError,
    SERVICE_TEMPLATE_NAME, SOCKET_TEMPLATE_NAME,
};
use crate::paths::{workspace_id, APP_DIR};

/// One workspace's systemd instance and where its files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Canonical, absolute.
    pub workspace: PathBuf,
    /// `workspace_id(workspace)`: the unit instance name.
    pub id: String,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config_home: PathBuf,
}

impl Instance {
    pub fn new(workspace: &Path, config_home: &Path) -> Instance {
        Instance {
            workspace: workspace.to_path_buf(),
            id: workspace_id(workspace),
            config_home: config_home.to_path_buf(),
        }
    }

    /// Where the user manager looks for the user's own units.
    pub fn unit_dir(&self) -> PathBuf {
        self.config_home.join("systemd").join("user")
    }

    /// `%E/cgc-fresh/%i.env` in the service unit.
    pub fn env_file(&self) -> PathBuf {
        self.config_home
            .join(APP_DIR)
            .join(format!("{}.env", self.id))
    }

    pub fn socket_unit(&self) -> String {
        socket_unit(&self.id)
    }

    pub fn service_unit(&self) -> String {
        service_unit(&self.id)
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create or replace `path` (parents created) with `contents`.
    WriteFile {
        path: PathBuf,
        contents: String,
        mode: u32,
        purpose: String,
    },
    /// Remove `path`; already absent counts as done.
    RemoveFile { path: PathBuf, purpose: String },
    /// `systemctl` with `args` (which include `--user`).
    Systemctl { args: Vec<String>, purpose: String },
}

impl Action {
    /// The step as a command-like line: `write PATH`, `remove PATH`,
    /// `systemctl --user ...`.
    pub fn describe(&self) -> String {
        match self {
            Action::WriteFile { path, .. } => format!("write {}", path.display()),
            Action::RemoveFile { path, .. } => format!("remove {}", path.display()),
            Action::Systemctl { args, .. } => format!("systemctl {}", args.join(" ")),
        }
    }

    pub fn purpose(&self) -> &str {
        match self {
            Action::WriteFile { purpose, .. }
            | Action::RemoveFile { purpose, .. }
            | Action::Systemctl { purpose, .. } => purpose,
        }
    }
}

/// What a failed step means for the steps after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// Install: later steps depend on earlier ones.
    Stop,
    /// Uninstall: remove as much as possible.
    KeepGoing,
}

/// An ordered list of steps and how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub heading: String,
    pub actions: Vec<Action>,
    pub on_failure: OnFailure,
    /// Printed after the steps.
    pub notes: Vec<String>,
}

fn systemctl(args: &[&str], purpose: &str) -> Action {
    Action::Systemctl {
        args: std::iter::once("--user")
            .chain(args.iter().copied())
            .map(str::to_string)
            .collect(),
        purpose: purpose.to_string(),
    }
}

/// The install steps for `instance`, with `binary` (absolute) in `ExecStart`.
pub fn install_plan(instance: &Instance, binary: &Path) -> Result<Plan, UnitError> {
    let unit_dir = instance.unit_dir();
    let socket = instance.socket_unit();
    let actions = vec![
        Action::WriteFile {
            path: unit_dir.join(SOCKET_TEMPLATE_NAME),
            contents: render_socket(),
            mode: 0o644,
            purpose: "socket unit template, shared by every workspace".to_string(),
        },
        Action::WriteFile {
            path: unit_dir.join(SERVICE_TEMPLATE_NAME),
            contents: render_service(binary)?,
            mode: 0o644,
            purpose: format!(
                "service unit template, shared by every workspace; runs {}",
                binary.display()
            ),
        },
        Action::WriteFile {
            path: instance.env_file(),
            contents: render_env_file(&instance.workspace, &instance.id)?,
            mode: 0o600,
            purpose: format!("tells {} its workspace", instance.service_unit()),
        },
        systemctl(
            &["daemon-reload"],
            "make the user manager read the unit files",
        ),
        systemctl(
            &["enable", "--now", &socket],
            "listen now and at every login; the service starts on the first connection",
        ),
    ];
    Ok(Plan {
        heading: format!(
            "Install cgc-fresh for {} (instance {}):",
            instance.workspace.display(),
            instance.id
        ),
        actions,
        on_failure: OnFailure::Stop,
        notes: vec![format!(
            "A {} that is already running keeps its binary until it exits; \
             `systemctl --user restart {}` switches now.",
            instance.service_unit(),
            instance.service_unit()
        )],
    })
}

/// The uninstall steps for `instance`.
pub fn uninstall_plan(instance: &Instance) -> Plan {
    let unit_dir = instance.unit_dir();
    let actions = vec![
        systemctl(
            &["disable", "--now", &instance.socket_unit()],
            "stop listening, and not at login either",
        ),
        systemctl(
            &["stop", &instance.service_unit()],
            "stop the service if it is running; its children stop with it",
        ),
        Action::RemoveFile {
            path: instance.env_file(),
            purpose: "forget the workspace path".to_string(),
        },
    ];
    Plan {
        heading: format!(
            "Uninstall cgc-fresh for {} (instance {}):",
            instance.workspace.display(),
            instance.id
        ),
        actions,
        on_failure: OnFailure::KeepGoing,
        notes: vec![format!(
            "The unit templates {} and {} in {} are kept: other workspaces may use them, \
             and without an enabled instance they do nothing. To remove them once no workspace \
             uses them (`systemctl --user list-units 'cgc-fresh@*'` shows none), delete both \
             files and run `systemctl --user daemon-reload`.",
            SOCKET_TEMPLATE_NAME,
            SERVICE_TEMPLATE_NAME,
            unit_dir.display()
        )],
    }
}

/// Prints the plan: numbered steps with their purpose, and with
/// `show_contents` the effective lines (comments left out) of every file
/// to be written.
pub fn print_plan(plan: &Plan, show_contents: bool, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", plan.heading)?;
    for (index, action) in plan.actions.iter().enumerate() {
        writeln!(out, "  {}. {}", index + 1, action.describe())?;
        writeln!(out, "       ({})", action.purpose())?;
        if let (true, Action::WriteFile { contents, .. }) = (show_contents, action) {
            for line in contents
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            {
                writeln!(out, "       | {line}")?;
            }
        }
    }
    for note in &plan.notes {
        writeln!(out, "Note: {note}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Instance {
        Instance::new(Path::new("/tmp/ws"), Path::new("/home/dev/.config"))
    }

    #[test]
    fn install_plan_for_a_sample_workspace() {
        let plan = install_plan(&sample(), Path::new("/opt/cgc/bin/cgc-fresh")).unwrap();
        let described: Vec<String> = plan.actions.iter().map(Action::describe).collect();
        assert_eq!(
            described,
            [
                "write /home/dev/.config/systemd/user/cgc-fresh@.socket",
                "write /home/dev/.config/systemd/user/cgc-fresh@.service",
                "write /home/dev/.config/cgc-fresh/b011ea26cc731e1a.env",
                "systemctl --user daemon-reload",
                "systemctl --user enable --now cgc-fresh@b011ea26cc731e1a.socket",
            ]
        );
        assert_eq!(plan.on_failure, OnFailure::Stop);
        let contents: Vec<(&Path, &str, u32)> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::WriteFile {
                    path,
                    contents,
                    mode,
                    ..
                } => Some((path.as_path(), contents.as_str(), *mode)),
                _ => None,
            })
            .collect();
        assert_eq!(contents[0].1, crate::systemd::units::SOCKET_TEMPLATE);
        assert!(contents[1].1.contains(
            "\nExecStart=/opt/cgc/bin/cgc-fresh serve --workspace ${CGC_FRESH_WORKSPACE}\n"
        ));
        assert!(!contents[1].1.contains("@BIN@"));
        assert!(contents[2]
            .1
            .ends_with("\nCGC_FRESH_WORKSPACE=\"/tmp/ws\"\n"));
        assert_eq!(contents[2].2, 0o600);
    }

    #[test]
    fn uninstall_plan_stops_the_socket_first_and_keeps_templates() {
        let plan = uninstall_plan(&sample());
        let described: Vec<String> = plan.actions.iter().map(Action::describe).collect();
        assert_eq!(
            described,
            [
                "systemctl --user disable --now cgc-fresh@b011ea26cc731e1a.socket",
                "systemctl --user stop cgc-fresh@b011ea26cc731e1a.service",
                "remove /home/dev/.config/cgc-fresh/b011ea26cc731e1a.env",
            ]
        );
        assert_eq!(plan.on_failure, OnFailure::KeepGoing);
        assert!(plan.notes[0].contains("kept"));
    }

    #[test]
    fn printed_plan_lists_steps_and_effective_file_lines() {
        let plan = install_plan(&sample(), Path::new("/opt/cgc/bin/cgc-fresh")).unwrap();
        let mut out = Vec::new();
        print_plan(&plan, true, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("Install cgc-fresh for /tmp/ws (instance b011ea26cc731e1a):\n"));
        assert!(text
            .contains("\n  5. systemctl --user enable --now cgc-fresh@b011ea26cc731e1a.socket\n"));
        assert!(text.contains(
            "\n       | ExecStart=/opt/cgc/bin/cgc-fresh serve --workspace ${CGC_FRESH_WORKSPACE}\n"
        ));
        assert!(text.contains("\n       | CGC_FRESH_WORKSPACE=\"/tmp/ws\"\n"));
        // Comments are left out.
        assert!(!text.contains("| #"));
    }
}
