//! The unit templates and the per-workspace environment file, rendered for
//! one binary and one workspace.
//!
//! The templates in `deploy/systemd/` are compiled in, so `cgc-fresh install`
//! writes exactly the files the repository reviews. Only the service needs
//! rendering: its `ExecStart` names the binary (placeholder
//! [`BINARY_PLACEHOLDER`]). The workspace path goes into a small environment
//! file per instance instead of a unit name, so unit names stay short.
//!
//! Quoting follows what systemd 252 accepts, checked with
//! `systemd-analyze verify`: an executable path may contain spaces (quoted)
//! and `%` (doubled, it starts a specifier), but systemd refuses one with a
//! quote or a backslash, and a `$` in it is taken literally. Environment file
//! values are double-quoted with `\`, `"`, `` ` `` and `$` escaped, as its
//! environment-file parser expects.

use std::path::{Path, PathBuf};

/// `cgc-fresh@.socket`, as shipped.
pub const SOCKET_TEMPLATE: &str = include_str!("../../../../deploy/systemd/cgc-fresh@.socket");
/// `cgc-fresh@.service`, as shipped (with [`BINARY_PLACEHOLDER`]).
pub const SERVICE_TEMPLATE: &str = include_str!("../../../../deploy/systemd/cgc-fresh@.service");

pub const SOCKET_TEMPLATE_NAME: &str = "cgc-fresh@.socket";
pub const SERVICE_TEMPLATE_NAME: &str = "cgc-fresh@.service";

/// Stands for the absolute binary path in [`SERVICE_TEMPLATE`].
pub const BINARY_PLACEHOLDER: &str = "@BIN@";

/// The variable the environment file sets and `ExecStart` passes on.
pub const WORKSPACE_VARIABLE: &str = "CGC_FRESH_WORKSPACE";

/// `cgc-fresh@<id>.socket`
pub fn socket_unit(id: &str) -> String {
    format!("cgc-fresh@{id}.socket")
}

/// `cgc-fresh@<id>.service`
pub fn service_unit(id: &str) -> String {
    format!("cgc-fresh@{id}.service")
}

/// A path that cannot be written into a unit or environment file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("{what} {path:?} is not valid UTF-8; systemd unit and environment files must be")]
    NotUtf8 { what: &'static str, path: PathBuf },
    #[error(
        "{what} {path:?} contains a control character (such as a newline); systemd cannot take it"
    )]
    ControlCharacter { what: &'static str, path: PathBuf },
    #[error("{what} {path:?} is not an absolute path")]
    NotAbsolute { what: &'static str, path: PathBuf },
    #[error(
        "the cgc-fresh binary path {0:?} contains a quote or a backslash, which systemd refuses \
         in an executable name; install cgc-fresh under a plain path"
    )]
    UnsafeExecutable(PathBuf),
}

/// The service template with `ExecStart` naming `binary`.
pub fn render_service(binary: &Path) -> Result<String, UnitError> {
    Ok(SERVICE_TEMPLATE.replace(BINARY_PLACEHOLDER, &executable_word(binary)?))
}

/// The socket unit needs nothing substituted.
pub fn render_socket() -> String {
    SOCKET_TEMPLATE.to_string()
}

/// `<config>/cgc-fresh/<id>.env` for `workspace` (absolute, canonical).
pub fn render_env_file(workspace: &Path, id: &str) -> Result<String, UnitError> {
    let value = checked_text("workspace", workspace)?;
    Ok(format!(
        "# Written by `cgc-fresh install`: the workspace served by {}.\n\
         {WORKSPACE_VARIABLE}={}\n",
        service_unit(id),
        env_file_quoted(value)
    ))
}

/// `binary` as the first word of `ExecStart=`.
fn executable_word(binary: &Path) -> Result<String, UnitError> {
    let text = checked_text("binary", binary)?;
    if text.contains(['"', '\'', '\\']) {
        return Err(UnitError::UnsafeExecutable(binary.to_path_buf()));
    }
    let text = text.replace('%', "%%");
    if text.contains(char::is_whitespace) {
        Ok(format!("\"{text}\""))
    } else {
        Ok(text)
    }
}

/// Double quotes with the characters systemd's environment-file parser
/// treats specially escaped.
fn env_file_quoted(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '`' | '$') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

fn checked_text<'a>(what: &'static str, path: &'a Path) -> Result<&'a str, UnitError> {
    let text = path.to_str().ok_or_else(|| UnitError::NotUtf8 {
        what,
        path: path.to_path_buf(),
    })?;
    if !path.is_absolute() {
        return Err(UnitError::NotAbsolute {
            what,
            path: path.to_path_buf(),
        });
    }
    if text.chars().any(char::is_control) {
        return Err(UnitError::ControlCharacter {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn exec_start(service: &str) -> &str {
        service
            .lines()
            .find(|l| l.starts_with("ExecStart="))
            .unwrap()
    }

    #[test]
    fn the_service_template_has_one_placeholder_in_exec_start() {
        assert_eq!(SERVICE_TEMPLATE.matches(BINARY_PLACEHOLDER).count(), 1);
        assert_eq!(
            exec_start(SERVICE_TEMPLATE),
            "ExecStart=@BIN@ serve --workspace ${CGC_FRESH_WORKSPACE}"
        );
        assert!(!SOCKET_TEMPLATE.contains(BINARY_PLACEHOLDER));
    }

    #[test]
    fn binary_path_is_substituted_and_escaped_for_systemd() {
        let plain = render_service(Path::new("/usr/local/bin/cgc-fresh")).unwrap();
        assert_eq!(
            exec_start(&plain),
            "ExecStart=/usr/local/bin/cgc-fresh serve --workspace ${CGC_FRESH_WORKSPACE}"
        );
        assert!(!plain.contains(BINARY_PLACEHOLDER));
        let odd = render_service(Path::new("/opt/my tools/100%/cgc-fresh")).unwrap();
        assert_eq!(
            exec_start(&odd),
            "ExecStart=\"/opt/my tools/100%%/cgc-fresh\" serve --workspace ${CGC_FRESH_WORKSPACE}"
        );
    }

    #[test]
    fn unusable_binary_paths_are_refused() {
        for bad in [
            "/opt/a\"b/cgc-fresh",
            "/opt/a\\b/cgc-fresh",
            "/opt/it's/cgc-fresh",
        ] {
            assert_eq!(
                render_service(Path::new(bad)),
                Err(UnitError::UnsafeExecutable(PathBuf::from(bad)))
            );
        }
        assert!(matches!(
            render_service(Path::new("cgc-fresh")),
            Err(UnitError::NotAbsolute { .. })
        ));
        assert!(matches!(
            render_service(Path::new("/opt/a\nb")),
            Err(UnitError::ControlCharacter { .. })
        ));
        let not_utf8 = Path::new(OsStr::from_bytes(b"/opt/\xff/cgc-fresh"));
        assert!(matches!(
            render_service(not_utf8),
            Err(UnitError::NotUtf8 { .. })
        ));
    }

    #[test]
    fn env_file_quotes_the_workspace() {
        assert_eq!(
            render_env_file(Path::new("/home/dev/project"), "0123456789abcdef").unwrap(),
            "# Written by `cgc-fresh install`: the workspace served by \
             cgc-fresh@0123456789abcdef.service.\n\
             CGC_FRESH_WORKSPACE=\"/home/dev/project\"\n"
        );
        let odd = render_env_file(Path::new("/home/dev/a \"b\" $HOME `x` \\ c"), "x").unwrap();
        assert!(
            odd.ends_with("CGC_FRESH_WORKSPACE=\"/home/dev/a \\\"b\\\" \\$HOME \\`x\\` \\\\ c\"\n"),
            "{odd}"
        );
        assert!(matches!(
            render_env_file(Path::new("/home/dev/a\nb"), "x"),
            Err(UnitError::ControlCharacter { .. })
        ));
    }

    fn on_path(program: &str) -> bool {
        std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
            .unwrap_or(false)
    }

    /// Runs `systemd-analyze verify --user` on the instance units of `id`
    /// found in `unit_dir`; returns (exit success, stderr). `None` when the
    /// tool is not installed.
    pub(crate) fn systemd_verify(unit_dir: &Path, id: &str) -> Option<(bool, String)> {
        if !on_path("systemd-analyze") {
            return None;
        }
        let scratch = tempfile::tempdir().unwrap();
        let runtime = scratch.path().join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        // `--user` needs a runtime directory for %t; HOME and the config
        // directory are isolated so no unit of the real user is loaded.
        let output = Command::new("systemd-analyze")
            .args(["verify", "--user", "--man=no"])
            .arg(unit_dir.join(socket_unit(id)))
            .arg(unit_dir.join(service_unit(id)))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_CONFIG_HOME", scratch.path().join("config"))
            .env("HOME", scratch.path())
            .env("SYSTEMD_LOG_LEVEL", "notice")
            .output()
            .unwrap();
        Some((
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }

    /// Writes the rendered templates under their installed names; systemd
    /// derives the instances `cgc-fresh@<id>.*` from them.
    fn write_templates(dir: &Path, service: &str) {
        std::fs::write(dir.join(SOCKET_TEMPLATE_NAME), render_socket()).unwrap();
        std::fs::write(dir.join(SERVICE_TEMPLATE_NAME), service).unwrap();
    }

    #[test]
    fn rendered_units_pass_systemd_analyze_verify() {
        let dir = tempfile::tempdir().unwrap();
        // A real executable: verify checks that ExecStart can be executed.
        let binary = std::env::current_exe().unwrap();
        write_templates(dir.path(), &render_service(&binary).unwrap());
        let Some((ok, stderr)) = systemd_verify(dir.path(), "0123456789abcdef") else {
            eprintln!("skipped: systemd-analyze is not on PATH");
            return;
        };
        // verify exits 0 on settings it merely ignores, so any message
        // about our files counts as a failure too.
        assert!(ok, "systemd-analyze verify failed:\n{stderr}");
        assert!(!stderr.contains("cgc-fresh"), "warnings:\n{stderr}");

        // The check is real: a misspelt setting is reported.
        let broken = render_service(&binary)
            .unwrap()
            .replace("Type=notify", "Type=notfy");
        write_templates(dir.path(), &broken);
        let (_, stderr) = systemd_verify(dir.path(), "0123456789abcdef").unwrap();
        assert!(
            stderr.contains("notfy"),
            "no warning for a bad Type=:\n{stderr}"
        );
    }

    #[test]
    fn an_escaped_binary_path_with_spaces_and_percent_passes_verify() {
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = dir.path().join("my tools 100%");
        std::fs::create_dir(&bin_dir).unwrap();
        let binary = bin_dir.join("cgc-fresh");
        std::fs::write(&binary, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        let unit_dir = dir.path().join("units");
        std::fs::create_dir(&unit_dir).unwrap();
        write_templates(&unit_dir, &render_service(&binary).unwrap());
        let Some((ok, stderr)) = systemd_verify(&unit_dir, "0123456789abcdef") else {
            eprintln!("skipped: systemd-analyze is not on PATH");
            return;
        };
        assert!(ok, "systemd-analyze verify failed:\n{stderr}");
        assert!(!stderr.contains("cgc-fresh"), "warnings:\n{stderr}");
    }
}
