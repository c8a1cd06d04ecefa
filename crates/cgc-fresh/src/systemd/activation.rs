//! Socket activation: taking over the listening socket systemd passed us.
//!
//! The protocol (`sd_listen_fds(3)`): the manager binds the socket, forks,
//! and in the child sets `LISTEN_PID` to the child's pid, `LISTEN_FDS` to the
//! number of passed descriptors (they start at fd 3, `SD_LISTEN_FDS_START`)
//! and `LISTEN_FDNAMES` to their names. The variables are only meant for the
//! process whose pid is `LISTEN_PID`; a process that inherited them from an
//! activated parent must ignore them.
//!
//! We take exactly one socket: a listening Unix stream socket. Anything else
//! at fd 3 is a configuration mistake reported as an [`ActivationError`], never
//! silently replaced by a socket of our own (clients would then reach a
//! different socket than the one systemd shows).

// Socket activation hands descriptors over by number (`LISTEN_FDS`);
// taking ownership of one (`from_raw_fd`) has no safe interface.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::fd::{BorrowedFd, FromRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::socket::{
    getsockname, getsockopt, sockopt, AddressFamily, SockType, SockaddrLike, SockaddrStorage,
};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "lifecycle";

/// The first passed descriptor (`SD_LISTEN_FDS_START` in `sd-daemon.h`).
pub const SD_LISTEN_FDS_START: RawFd = 3;

const LISTEN_PID: &str = "LISTEN_PID";
const LISTEN_FDS: &str = "LISTEN_FDS";
const LISTEN_FDNAMES: &str = "LISTEN_FDNAMES";

/// The `LISTEN_*` variables as found in the environment (absent = `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenVars {
    pub pid: Option<OsString>,
    pub fds: Option<OsString>,
    pub fd_names: Option<OsString>,
}

impl ListenVars {
    /// Reads the `LISTEN_*` variables and removes them from the process
    /// environment, whether or not they were meant for us, so no child
    /// inherits them.
    ///
    /// Must be called while the process is still single-threaded (see the
    /// module docs of `systemd`): another thread reading the environment at
    /// the same moment is undefined behaviour in libc.
    pub fn take_from_env() -> ListenVars {
        let vars = ListenVars {
            pid: std::env::var_os(LISTEN_PID),
            fds: std::env::var_os(LISTEN_FDS),
            fd_names: std::env::var_os(LISTEN_FDNAMES),
        };
        for name in [LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES] {
            std::env::remove_var(name);
        }
        vars
    }
}

/// Why a passed socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error("LISTEN_PID={0:?} is not a process id")]
    InvalidPid(OsString),
    #[error("LISTEN_FDS={0:?} is not a descriptor count")]
    InvalidFdCount(OsString),
    #[error("passed descriptor {fd} is not open: {source}")]
    NotOpen { fd: RawFd, source: nix::Error },
    #[error("passed descriptor {fd} is not a socket: {source}")]
    NotASocket { fd: RawFd, source: nix::Error },
    #[error("passed descriptor {fd} is a {family} socket, not a Unix socket")]
    NotUnix { fd: RawFd, family: String },
    #[error("passed descriptor {fd} is a {kind} socket, not a stream socket")]
    NotStream { fd: RawFd, kind: String },
    #[error("passed descriptor {fd} is a stream socket that is not listening")]
    NotListening { fd: RawFd },
    #[error("cannot set close-on-exec and non-blocking mode on passed descriptor {fd}: {source}")]
    Flags { fd: RawFd, source: nix::Error },
}

/// The listening socket systemd passed us, if it passed one.
///
/// `Ok(None)`: not socket-activated (no `LISTEN_PID`, a `LISTEN_PID` of
/// another process, or `LISTEN_FDS=0`); bind a socket as usual. `Ok(Some)`:
/// fd 3, checked to be a listening Unix stream socket, now close-on-exec and
/// non-blocking (ready for `tokio::net::UnixListener::from_std`). The
/// `LISTEN_*` variables are removed from the environment in every case.
///
/// Call before any thread starts (it changes the environment). The service
/// must not unlink or re-bind the socket path when it got its socket this
/// way: systemd owns that path (`RemoveOnStop=` cleans it up).
pub fn listen_fds_listener() -> Result<Option<UnixListener>, ActivationError> {
    let vars = ListenVars::take_from_env();
    listener_from_vars(&vars, std::process::id(), SD_LISTEN_FDS_START)
}

/// [`listen_fds_listener`] with its inputs explicit: the variables, our pid,
/// and where the passed descriptors start (fd 3 except in tests). On success
/// the returned listener owns `first_fd`; on error the descriptor is left
/// open and untouched.
pub fn listener_from_vars(
    vars: &ListenVars,
    our_pid: u32,
    first_fd: RawFd,
) -> Result<Option<UnixListener>, ActivationError> {
    let Some(pid) = &vars.pid else {
        return Ok(None);
    };
    let pid: u32 = parse_number(pid).ok_or_else(|| ActivationError::InvalidPid(pid.clone()))?;
    if pid != our_pid {
        // Inherited from an activated parent: those descriptors are not ours.
        tracing::debug!(
            component = COMPONENT,
            event = "listen_fds_not_for_us",
            listen_pid = pid,
            our_pid
        );
        return Ok(None);
    }
    let Some(count) = &vars.fds else {
        return Ok(None);
    };
    let count: RawFd = parse_number::<u32>(count)
        .and_then(|n| RawFd::try_from(n).ok())
        .ok_or_else(|| ActivationError::InvalidFdCount(count.clone()))?;
    if count == 0 {
        return Ok(None);
    }
    if count > 1 {
        let names = vars
            .fd_names
            .as_ref()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        tracing::warn!(
            component = COMPONENT,
            event = "listen_fds_extra",
            passed = count,
            used_fd = first_fd,
            fd_names = %names,
            "systemd passed more than one socket; using the first and ignoring the rest"
        );
        // The extra descriptors must not leak into the cgc children either.
        for fd in first_fd.saturating_add(1)..first_fd.saturating_add(count) {
            let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
        }
    }
    check_listening_unix_stream(first_fd)?;
    make_cloexec_nonblocking(first_fd)?;
    // SAFETY: `first_fd` is open (checked above), it is a listening Unix
    // stream socket, and systemd handed it to this process alone; nothing
    // else in the process refers to it, so the listener may own and close it.
    Ok(Some(unsafe { UnixListener::from_raw_fd(first_fd) }))
}

/// The filesystem path the listener is bound to (`getsockname`), for logs
/// and for comparing with the path clients compute. `None` for abstract and
/// unnamed sockets.
pub fn bound_path(listener: &UnixListener) -> std::io::Result<Option<PathBuf>> {
    Ok(listener.local_addr()?.as_pathname().map(Path::to_path_buf))
}

fn parse_number<T: std::str::FromStr>(value: &OsString) -> Option<T> {
    value.to_str()?.trim().parse().ok()
}

fn check_listening_unix_stream(fd: RawFd) -> Result<(), ActivationError> {
    // Checked first so that `borrow_raw` below is given an open descriptor.
    fcntl(fd, FcntlArg::F_GETFD).map_err(|source| ActivationError::NotOpen { fd, source })?;
    // SAFETY: `fd` is open (F_GETFD succeeded) and stays open for the rest of
    // this function: nothing here closes it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let kind = getsockopt(&borrowed, sockopt::SockType)
        .map_err(|source| ActivationError::NotASocket { fd, source })?;
    let address: SockaddrStorage =
        getsockname(fd).map_err(|source| ActivationError::NotASocket { fd, source })?;
    match address.family() {
        Some(AddressFamily::Unix) => {}
        other => {
            return Err(ActivationError::NotUnix {
                fd,
                family: other.map_or_else(|| "unknown".to_string(), |f| format!("{f:?}")),
            })
        }
    }
    if kind != SockType::Stream {
        return Err(ActivationError::NotStream {
            fd,
            kind: format!("{kind:?}"),
        });
    }
    let listening = getsockopt(&borrowed, sockopt::AcceptConn)
        .map_err(|source| ActivationError::NotASocket { fd, source })?;
    if !listening {
        return Err(ActivationError::NotListening { fd });
    }
    Ok(())
}

fn make_cloexec_nonblocking(fd: RawFd) -> Result<(), ActivationError> {
    let flags_error = |source| ActivationError::Flags { fd, source };
    // systemd passes the descriptors without close-on-exec (they had to
    // survive its exec of us); our cgc children must not inherit the socket.
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(flags_error)?;
    let status = fcntl(fd, FcntlArg::F_GETFL).map_err(flags_error)?;
    let status = OFlag::from_bits_truncate(status) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(status)).map_err(flags_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::net::{UnixDatagram, UnixStream};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn vars(pid: Option<&str>, fds: Option<&str>) -> ListenVars {
        ListenVars {
            pid: pid.map(OsString::from),
            fds: fds.map(OsString::from),
            fd_names: None,
        }
    }

    fn for_us(fds: &str) -> ListenVars {
        vars(Some(&std::process::id().to_string()), Some(fds))
    }

    fn fd_flags(fd: RawFd) -> (bool, bool) {
        let fd_flags = FdFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFD).unwrap());
        let status = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        (
            fd_flags.contains(FdFlag::FD_CLOEXEC),
            status.contains(OFlag::O_NONBLOCK),
        )
    }

    /// Clears close-on-exec and non-blocking, as systemd passes descriptors.
    fn as_systemd_passes_it(fd: RawFd) {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
        fcntl(fd, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
        assert_eq!(fd_flags(fd), (false, false));
    }

    #[test]
    fn takes_a_listening_unix_stream_socket_and_makes_it_cloexec_nonblocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passed.sock");
        let fd = UnixListener::bind(&path).unwrap().into_raw_fd();
        as_systemd_passes_it(fd);

        let listener = listener_from_vars(&for_us("1"), std::process::id(), fd)
            .unwrap()
            .expect("a listener for our pid");
        assert_eq!(listener.as_raw_fd(), fd);
        assert_eq!(fd_flags(fd), (true, true));
        assert_eq!(bound_path(&listener).unwrap(), Some(path.clone()));

        // It really is the socket at `path`: a client connects and is accepted.
        let mut client = UnixStream::connect(&path).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        served.set_nonblocking(false).unwrap();
        served.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
    }

    #[test]
    fn variables_for_another_process_or_no_fds_mean_not_activated() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join("s.sock")).unwrap();
        let fd = listener.as_raw_fd();
        as_systemd_passes_it(fd);
        let ours = std::process::id();
        let other = (ours + 1).to_string();

        for v in [
            vars(None, None),
            vars(None, Some("1")),
            vars(Some(&other), Some("1")),
            for_us("0"),
            vars(Some(&ours.to_string()), None),
        ] {
            assert!(
                listener_from_vars(&v, ours, fd).unwrap().is_none(),
                "{v:?} must not activate"
            );
        }
        // The descriptor was left exactly as it was.
        assert_eq!(fd_flags(fd), (false, false));
    }

    #[test]
    fn malformed_variables_are_errors() {
        let ours = std::process::id();
        let err = listener_from_vars(&vars(Some("12x"), Some("1")), ours, 999_999).unwrap_err();
        assert!(matches!(err, ActivationError::InvalidPid(_)), "{err}");
        let err = listener_from_vars(&for_us("-1"), ours, 999_999).unwrap_err();
        assert!(matches!(err, ActivationError::InvalidFdCount(_)), "{err}");
    }

    #[test]
    fn a_closed_descriptor_is_reported() {
        // Far above any descriptor this test process opens, so never open.
        let err = listener_from_vars(&for_us("1"), std::process::id(), 999_999).unwrap_err();
        assert!(
            matches!(err, ActivationError::NotOpen { fd: 999_999, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_regular_file_is_not_a_socket() {
        let file = tempfile::tempfile().unwrap();
        let err =
            listener_from_vars(&for_us("1"), std::process::id(), file.as_raw_fd()).unwrap_err();
        assert!(matches!(err, ActivationError::NotASocket { .. }), "{err}");
    }

    #[test]
    fn a_datagram_socket_is_not_a_stream() {
        let (a, _b) = UnixDatagram::pair().unwrap();
        let err = listener_from_vars(&for_us("1"), std::process::id(), a.as_raw_fd()).unwrap_err();
        assert!(matches!(err, ActivationError::NotStream { .. }), "{err}");
    }

    #[test]
    fn a_connected_stream_is_not_listening() {
        let (a, _b) = UnixStream::pair().unwrap();
        let err = listener_from_vars(&for_us("1"), std::process::id(), a.as_raw_fd()).unwrap_err();
        assert!(matches!(err, ActivationError::NotListening { .. }), "{err}");
    }

    #[test]
    fn a_tcp_listener_is_not_a_unix_socket() {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let err =
            listener_from_vars(&for_us("1"), std::process::id(), tcp.as_raw_fd()).unwrap_err();
        assert!(matches!(err, ActivationError::NotUnix { .. }), "{err}");
    }

    #[test]
    fn with_several_sockets_the_first_is_used_and_the_rest_made_cloexec() {
        let dir = tempfile::tempdir().unwrap();
        let first = UnixListener::bind(dir.path().join("1.sock")).unwrap();
        let second = UnixListener::bind(dir.path().join("2.sock")).unwrap();
        // Two adjacent descriptor numbers, as systemd passes them; chosen far
        // above what the test process uses so nothing else is overwritten.
        let (fd1, fd2) = (900, 901);
        for fd in [fd1, fd2] {
            assert!(
                fcntl(fd, FcntlArg::F_GETFD).is_err(),
                "fd {fd} already in use"
            );
        }
        nix::unistd::dup2(first.as_raw_fd(), fd1).unwrap();
        nix::unistd::dup2(second.as_raw_fd(), fd2).unwrap();
        // SAFETY: fd2 was just created by dup2 and nothing else owns it.
        let second_copy = unsafe { UnixListener::from_raw_fd(fd2) };
        as_systemd_passes_it(fd2);

        let listener = listener_from_vars(&for_us("2"), std::process::id(), fd1)
            .unwrap()
            .unwrap();
        assert_eq!(
            bound_path(&listener).unwrap(),
            Some(dir.path().join("1.sock"))
        );
        assert!(fd_flags(fd2).0, "the unused socket must be close-on-exec");
        drop(second_copy);
    }

    /// Environment variable that turns [`activated_child`] into the program
    /// `systemd-socket-activate` runs.
    const CHILD_MODE: &str = "CGC_FRESH_TEST_ACTIVATED_CHILD";

    /// Not a test on its own: the child half of
    /// `real_socket_activation_through_systemd_socket_activate`, which runs
    /// this test binary with only this test selected and `CHILD_MODE` set.
    /// It takes the passed socket the way `serve` does, sends READY=1, and
    /// reports what it saw to the client that triggered the activation.
    /// (libtest runs it on a second thread while the main thread only waits,
    /// which is as close to "before any thread starts" as a test can get.)
    #[test]
    fn activated_child() {
        if std::env::var_os(CHILD_MODE).is_none() {
            return;
        }
        let notifier = crate::systemd::notify::Notifier::from_env();
        let listener = listen_fds_listener().unwrap().expect("socket-activated");
        let path = bound_path(&listener).unwrap().unwrap();
        let leftover: Vec<&str> = [LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES, "NOTIFY_SOCKET"]
            .into_iter()
            .filter(|name| std::env::var_os(name).is_some())
            .collect();
        let ready = notifier.notify("READY=1").unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        writeln!(
            stream,
            "path={} leftover={} ready_sent={ready}",
            path.display(),
            leftover.join(",")
        )
        .unwrap();
    }

    fn on_path(program: &str) -> bool {
        std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
            .unwrap_or(false)
    }

    #[test]
    fn real_socket_activation_through_systemd_socket_activate() {
        if !on_path("systemd-socket-activate") {
            eprintln!("skipped: systemd-socket-activate is not on PATH");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("activated.sock");
        let notify_path = dir.path().join("notify.sock");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();

        let child = Command::new("systemd-socket-activate")
            .arg("--listen")
            .arg(&socket)
            .arg("--fdname=cgc-fresh")
            .arg(format!("--setenv={CHILD_MODE}=1"))
            .arg(format!("--setenv=NOTIFY_SOCKET={}", notify_path.display()))
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "systemd::activation::tests::activated_child",
                "--test-threads=1",
                "--nocapture",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();

        // The program only starts once a client connects.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut client = loop {
            match UnixStream::connect(&socket) {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(error) => panic!("could not connect to {}: {error}", socket.display()),
            }
        };
        client
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut report = String::new();
        let read = client.read_to_string(&mut report);

        let mut datagram = [0u8; 64];
        let received = notify.recv(&mut datagram);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        read.unwrap_or_else(|e| panic!("reading the child's report: {e}\n{stderr}"));
        assert_eq!(
            report.trim_end(),
            format!("path={} leftover= ready_sent=true", socket.display()),
            "child stderr:\n{stderr}"
        );
        let received = received.unwrap_or_else(|e| panic!("no READY=1: {e}\n{stderr}"));
        assert_eq!(&datagram[..received], b"READY=1");
        assert!(output.status.success(), "child failed:\n{stderr}");
    }
}
