//! Running under systemd: socket activation (the socket is passed in, not
//! bound), readiness notification, idle exit, and `install --dry-run`.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::{socket_activated_service, Conn, Sandbox, BIN};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Reads notification datagrams until one contains `state` (bounded).
fn wait_notification(socket: &UnixDatagram, state: &str) -> Vec<String> {
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = socket
            .recv(&mut buffer)
            .unwrap_or_else(|e| panic!("no {state} notification ({e}); saw {seen:?}"));
        let text = String::from_utf8_lossy(&buffer[..n]).to_string();
        let done = text.lines().any(|l| l == state);
        seen.push(text);
        if done {
            return seen;
        }
    }
}

#[test]
fn socket_activation_passes_the_socket_in_and_ready_is_notified() {
    assert!(
        have("systemd-socket-activate"),
        "systemd-socket-activate is required (Debian's systemd package)"
    );
    let sandbox = Sandbox::new();
    let socket = sandbox.root.path().join("activated.sock");
    let notify_path = sandbox.root.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let mut activator = socket_activated_service(
        &sandbox,
        &socket,
        &sandbox.root.path().join("activated.log"),
        &[format!("NOTIFY_SOCKET={}", notify_path.display())],
    );
    // The service starts on the first connection, on the socket it was given.
    let mut conn = Conn::connect_when_listening(&socket);
    let welcome = conn.hello();
    assert_eq!(
        welcome["pid"],
        activator.id(),
        "systemd-socket-activate execs the service in place"
    );
    let seen = wait_notification(&notify, "READY=1");
    assert!(seen.iter().any(|m| m.contains("READY=1")), "{seen:?}");
    assert_eq!(conn.request(json!({"type": "status"}), 2)["type"], "state");
    let text = std::fs::read_to_string(sandbox.root.path().join("activated.log")).unwrap();
    assert!(text.contains("\"socket_activated\""), "{text}");
    // SIGTERM: STOPPING=1, a clean exit, and the socket systemd owns is left alone.
    crate::support::send_signal(activator.id() as i32, libc::SIGTERM);
    wait_notification(&notify, "STOPPING=1");
    let status = activator.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        socket.exists(),
        "an activated service must not unlink its socket"
    );
}

#[test]
fn idle_exit_stops_the_service_after_the_last_client_leaves() {
    let sandbox = Sandbox::new();
    let mut service =
        crate::support::Service::start(&sandbox, &[], &[("CGC_SERVICE_IDLE_EXIT_MS", "300")]);
    {
        let mut conn = service.connect();
        conn.hello();
        // While a client is connected, nothing happens.
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(conn.request(json!({"type": "status"}), 1)["type"], "state");
    }
    let status = service.wait_exit(Duration::from_secs(10));
    assert!(status.success());
    assert_eq!(service.log_events("idle_exit").len(), 1);
}

#[test]
fn no_idle_exit_by_default() {
    let sandbox = Sandbox::new();
    let mut service = crate::support::Service::start(&sandbox, &[], &[]);
    drop(service.connect());
    std::thread::sleep(Duration::from_millis(500));
    assert!(service.child.try_wait().unwrap().is_none(), "still running");
}

#[test]
fn install_dry_run_prints_the_plan_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let config_home = sandbox.root.path().join("config");
    let out = sandbox
        .command()
        .env("XDG_CONFIG_HOME", &config_home)
        .args(["install", "--dry-run"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cgc-fresh@.socket") && text.contains("cgc-fresh@.service"),
        "{text}"
    );
    assert!(text.contains(BIN), "the unit runs this binary: {text}");
    assert!(!config_home.exists(), "a dry run writes nothing");
}

#[test]
fn the_watchdog_is_pinged_every_half_of_watchdog_sec_not_more_often() {
    let sandbox = Sandbox::new();
    let notify_path = sandbox.root.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    // WatchdogSec=2s: a ping each second (half of it, as sd_watchdog_enabled
    // recommends) — an earlier build halved it twice and pinged every 0.5 s.
    let service = crate::support::Service::start(
        &sandbox,
        &[],
        &[
            ("NOTIFY_SOCKET", notify_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "2000000"),
        ],
    );
    crate::support::wait_until("the watchdog to be armed", Duration::from_secs(10), || {
        !service.log_events("watchdog_enabled").is_empty()
    });
    let enabled = service.log_events("watchdog_enabled");
    assert_eq!(enabled.len(), 1, "{}", service.log_text());
    assert_eq!(enabled[0]["ping_every_ms"], 1000);
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut pings = 0;
    let until = std::time::Instant::now() + Duration::from_millis(3_200);
    let mut buffer = [0u8; 4096];
    while std::time::Instant::now() < until {
        if let Ok(n) = notify.recv(&mut buffer) {
            if String::from_utf8_lossy(&buffer[..n])
                .lines()
                .any(|l| l == "WATCHDOG=1")
            {
                pings += 1;
            }
        }
    }
    // About three in 3.2 s; a half-second period would send about six. A
    // loaded machine can only delay pings, never add any.
    assert!((1..=4).contains(&pings), "{pings} pings in 3.2 s");
}
