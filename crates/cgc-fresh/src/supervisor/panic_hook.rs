//! The last line of defence: a panic anywhere kills every child group and
//! exits non-zero. An actor that died silently would leave a service that
//! looks alive and does nothing — and children nobody stops.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::process::kill::{kill_token_holders, Tokens};
use crate::process::stop::kill_now;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "root_supervisor";

/// Live child groups and the owner-token prefix of this instance, kept
/// where a panic hook can reach them without the actor system.
static LIVE: Mutex<Option<LiveGroups>> = Mutex::new(None);

struct LiveGroups {
    token_prefix: String,
    groups: BTreeMap<u64, i32>,
}

/// Records our owner-token prefix; call once before the first spawn.
pub fn init(token_prefix: &str) {
    if let Ok(mut live) = LIVE.lock() {
        *live = Some(LiveGroups {
            token_prefix: token_prefix.to_string(),
            groups: BTreeMap::new(),
        });
    }
}

pub fn track(id: u64, pgid: i32) {
    if let Ok(mut live) = LIVE.lock() {
        if let Some(live) = live.as_mut() {
            live.groups.insert(id, pgid);
        }
    }
}

pub fn untrack(id: u64) {
    if let Ok(mut live) = LIVE.lock() {
        if let Some(live) = live.as_mut() {
            live.groups.remove(&id);
        }
    }
}

/// Kills every tracked group and every process carrying our token, at once.
/// Used by the panic hook and by the escalated (second-signal) shutdown.
pub fn kill_everything_now() -> usize {
    // try_lock: a panic while the lock is held must not deadlock the hook.
    let Ok(live) = LIVE.try_lock() else { return 0 };
    let Some(live) = live.as_ref() else { return 0 };
    let mut killed = 0;
    for pgid in live.groups.values() {
        if kill_now(*pgid) {
            killed += 1;
        }
    }
    killed += kill_token_holders(Tokens::StartingWith(&live.token_prefix), |_, _| false).len();
    killed
}

/// Installs the hook: log the panic as an event, kill every child, exit 101.
pub fn install() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(component = COMPONENT, event = "panic", location = %location, message = %message, action = "kill_children_and_exit");
        default_hook(info);
        let killed = kill_everything_now();
        tracing::error!(component = COMPONENT, event = "panic_cleanup", killed);
        std::process::exit(101);
    }));
}
