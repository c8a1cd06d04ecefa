//! Readiness and status notifications to systemd (`sd_notify(3)`), without
//! libsystemd.
//!
//! Under `Type=notify` systemd puts the path of a datagram socket in
//! `$NOTIFY_SOCKET` (a filesystem path, or `@name` for the abstract
//! namespace) and waits for a datagram `READY=1` before it considers the
//! service started. `STOPPING=1` says shutdown has begun and `STATUS=...` is
//! the one-line text `systemctl status` shows. systemd identifies the sender
//! from the kernel's credentials on the datagram, so nothing else is needed.
//!
//! The watchdog is opt-in (`WatchdogSec=` in a drop-in): systemd then sets
//! `WATCHDOG_USEC` and expects `WATCHDOG=1` more often than that. The
//! [`Notifier`] only reports the interval to ping at; whoever runs the timer
//! must run none when it is `None`, so an idle service stays asleep.

use std::ffi::OsString;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::time::Duration;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "lifecycle";

const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// How long a notification may wait for room in systemd's socket buffer
/// before it is given up (it is sent from the service's event loop).
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// The notification variables as found in the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyVars {
    pub notify_socket: Option<OsString>,
    pub watchdog_usec: Option<OsString>,
    pub watchdog_pid: Option<OsString>,
}

impl NotifyVars {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` and removes
    /// them from the process environment so no child inherits them.
    ///
    /// Must be called while the process is still single-threaded (see the
    /// module docs of `systemd`).
    pub fn take_from_env() -> NotifyVars {
        let vars = NotifyVars {
            notify_socket: std::env::var_os(NOTIFY_SOCKET),
            watchdog_usec: std::env::var_os(WATCHDOG_USEC),
            watchdog_pid: std::env::var_os(WATCHDOG_PID),
        };
        for name in [NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID] {
            std::env::remove_var(name);
        }
        vars
    }
}

/// A notification variable systemd would not have set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyEnvError {
    #[error("NOTIFY_SOCKET={0:?} is neither an absolute path nor an abstract socket name (@name)")]
    Socket(OsString),
    #[error("WATCHDOG_USEC={0:?} is not a number of microseconds")]
    WatchdogUsec(OsString),
    #[error("WATCHDOG_PID={0:?} is not a process id")]
    WatchdogPid(OsString),
}

/// Where notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NotifyTarget {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

/// Sends notifications to the manager that started us, if any. Cheap to
/// clone; a `Notifier` without a target sends nothing and says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notifier {
    target: Option<NotifyTarget>,
    watchdog_interval: Option<Duration>,
}

impl Notifier {
    /// Takes the notification variables from the environment (removing
    /// them; call before any thread starts). A malformed variable is logged
    /// and that feature left off: notifications are a courtesy, never a
    /// reason to fail.
    pub fn from_env() -> Notifier {
        let vars = NotifyVars::take_from_env();
        let our_pid = std::process::id();
        let target = match parse_target(vars.notify_socket.as_ref()) {
            Ok(target) => target,
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "notify_socket_invalid", error = %error);
                None
            }
        };
        let watchdog_interval = match parse_watchdog(&vars, our_pid) {
            Ok(interval) => interval,
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "watchdog_env_invalid", error = %error);
                None
            }
        };
        Notifier {
            target,
            watchdog_interval,
        }
    }

    /// [`Notifier::from_env`] with explicit inputs; errors instead of logging.
    #[cfg(test)]
    pub fn from_vars(vars: &NotifyVars, our_pid: u32) -> Result<Notifier, NotifyEnvError> {
        Ok(Notifier {
            target: parse_target(vars.notify_socket.as_ref())?,
            watchdog_interval: parse_watchdog(vars, our_pid)?,
        })
    }

    /// A notifier that never sends (not started by systemd).
    #[cfg(test)]
    pub fn disabled() -> Notifier {
        Notifier::default()
    }

    /// Whether a manager is listening for our notifications.
    #[cfg(test)]
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments, e.g.
    /// `READY=1`) as one datagram. `Ok(false)`: there is no `NOTIFY_SOCKET`,
    /// nothing was sent. `Ok(true)`: the datagram was sent.
    pub fn notify(&self, state: &str) -> io::Result<bool> {
        let Some(target) = &self.target else {
            return Ok(false);
        };
        if state.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty notification",
            ));
        }
        let address = match target {
            NotifyTarget::Path(path) => SocketAddr::from_pathname(path)?,
            NotifyTarget::Abstract(name) => SocketAddr::from_abstract_name(name)?,
        };
        let socket = UnixDatagram::unbound()?;
        socket.set_write_timeout(Some(SEND_TIMEOUT))?;
        socket.send_to_addr(state.as_bytes(), &address)?;
        Ok(true)
    }

    /// `READY=1`: start-up is complete, clients are being accepted.
    pub fn ready(&self) -> io::Result<bool> {
        self.notify("READY=1")
    }

    /// `STOPPING=1`: shutdown has begun.
    pub fn stopping(&self) -> io::Result<bool> {
        self.notify("STOPPING=1")
    }

    /// `STATUS=<text>`: the line `systemctl status` shows. Line breaks in
    /// `text` become spaces (a newline would start a new assignment).
    #[cfg(test)]
    pub fn status(&self, text: &str) -> io::Result<bool> {
        let line: String = text
            .chars()
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
            .collect();
        self.notify(&format!("STATUS={line}"))
    }

    /// `WATCHDOG=1`: we are alive. Only meaningful when
    /// [`Notifier::watchdog_interval`] is `Some`.
    pub fn watchdog_ping(&self) -> io::Result<bool> {
        self.notify("WATCHDOG=1")
    }

    /// How often to send [`Notifier::watchdog_ping`]: half of `WatchdogSec=`,
    /// as `sd_watchdog_enabled(3)` recommends. `None` (the default, no
    /// `WatchdogSec=`): run no watchdog timer at all.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog_interval
    }
}

fn parse_target(value: Option<&OsString>) -> Result<Option<NotifyTarget>, NotifyEnvError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    match bytes.first() {
        Some(b'/') => Ok(Some(NotifyTarget::Path(PathBuf::from(value)))),
        Some(b'@') if bytes.len() > 1 => Ok(Some(NotifyTarget::Abstract(bytes[1..].to_vec()))),
        _ => Err(NotifyEnvError::Socket(value.clone())),
    }
}

fn parse_watchdog(vars: &NotifyVars, our_pid: u32) -> Result<Option<Duration>, NotifyEnvError> {
    let Some(usec) = &vars.watchdog_usec else {
        return Ok(None);
    };
    if let Some(pid) = &vars.watchdog_pid {
        let pid: u32 = pid
            .to_str()
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| NotifyEnvError::WatchdogPid(pid.clone()))?;
        if pid != our_pid {
            // Meant for the process that started us, not for us.
            return Ok(None);
        }
    }
    let usec: u64 = usec
        .to_str()
        .and_then(|u| u.trim().parse().ok())
        .ok_or_else(|| NotifyEnvError::WatchdogUsec(usec.clone()))?;
    if usec == 0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_micros(usec / 2)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn with_socket(value: &str) -> NotifyVars {
        NotifyVars {
            notify_socket: Some(OsString::from(value)),
            ..NotifyVars::default()
        }
    }

    fn receive(socket: &UnixDatagram) -> Vec<u8> {
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 512];
        let n = socket.recv(&mut buf).unwrap();
        buf[..n].to_vec()
    }

    #[test]
    fn without_notify_socket_nothing_is_sent() {
        let notifier = Notifier::from_vars(&NotifyVars::default(), 1).unwrap();
        assert!(!notifier.is_enabled());
        assert!(!notifier.ready().unwrap());
        assert!(!Notifier::disabled().stopping().unwrap());
        // An empty value is "unset", as in sd_notify.
        assert!(!Notifier::from_vars(&with_socket(""), 1)
            .unwrap()
            .is_enabled());
    }

    #[test]
    fn ready_arrives_as_exactly_one_datagram_on_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let manager = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::from_vars(&with_socket(path.to_str().unwrap()), 1).unwrap();

        assert!(notifier.ready().unwrap());
        assert_eq!(receive(&manager), b"READY=1");
        assert!(notifier.stopping().unwrap());
        assert_eq!(receive(&manager), b"STOPPING=1");
    }

    #[test]
    fn abstract_namespace_socket_is_reached() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("cgc-fresh-test-notify-{}-{nanos}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let manager = UnixDatagram::bind_addr(&address).unwrap();
        let notifier = Notifier::from_vars(&with_socket(&format!("@{name}")), 1).unwrap();

        assert!(notifier.notify("READY=1").unwrap());
        assert_eq!(receive(&manager), b"READY=1");
    }

    #[test]
    fn status_text_stays_on_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let manager = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::from_vars(&with_socket(path.to_str().unwrap()), 1).unwrap();

        assert!(notifier.status("fresh\nREADY=1").unwrap());
        assert_eq!(receive(&manager), b"STATUS=fresh READY=1");
    }

    #[test]
    fn a_missing_manager_socket_is_an_error_not_a_silent_success() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nobody-listens.sock");
        let notifier = Notifier::from_vars(&with_socket(path.to_str().unwrap()), 1).unwrap();
        assert!(notifier.ready().is_err());
        assert!(notifier.notify("").is_err());
    }

    #[test]
    fn notify_socket_must_be_absolute_or_abstract() {
        for bad in ["relative/notify", "@", "vsock:2:1"] {
            assert_eq!(
                Notifier::from_vars(&with_socket(bad), 1),
                Err(NotifyEnvError::Socket(OsString::from(bad)))
            );
        }
    }

    #[test]
    fn watchdog_interval_is_half_the_timeout_and_only_for_our_pid() {
        let watchdog = |usec: &str, pid: Option<&str>| NotifyVars {
            watchdog_usec: Some(OsString::from(usec)),
            watchdog_pid: pid.map(OsString::from),
            ..NotifyVars::default()
        };
        let interval = |vars: &NotifyVars| {
            Notifier::from_vars(vars, 42)
                .map(|n| n.watchdog_interval())
                .unwrap()
        };
        assert_eq!(interval(&NotifyVars::default()), None);
        assert_eq!(
            interval(&watchdog("60000000", None)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            interval(&watchdog("60000000", Some("42"))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(interval(&watchdog("60000000", Some("43"))), None);
        assert_eq!(interval(&watchdog("0", None)), None);
        assert_eq!(
            Notifier::from_vars(&watchdog("soon", None), 42),
            Err(NotifyEnvError::WatchdogUsec(OsString::from("soon")))
        );
        assert_eq!(
            Notifier::from_vars(&watchdog("1", Some("x")), 42),
            Err(NotifyEnvError::WatchdogPid(OsString::from("x")))
        );
    }
}
