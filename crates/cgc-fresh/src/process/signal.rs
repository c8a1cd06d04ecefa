//! One signal type for everything the service sends, receives and logs.
//!
//! The names come from `signal-hook` (`signal_hook::low_level::signal_name`),
//! so the service keeps no table of its own that could drift from the
//! numbers: a log line says `SIGTERM` wherever the number came from (the
//! stop escalation, a shutdown request, the last-resort watchdog).

use std::fmt;

use signal_hook::consts::signal as consts;

/// A signal number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(libc::c_int);

impl Signal {
    pub const INT: Signal = Signal(consts::SIGINT);
    pub const TERM: Signal = Signal(consts::SIGTERM);
    pub const KILL: Signal = Signal(consts::SIGKILL);
    pub const HUP: Signal = Signal(consts::SIGHUP);

    /// The signal with this number (any number; unknown ones are named as
    /// such).
    pub const fn from_raw(number: libc::c_int) -> Signal {
        Signal(number)
    }

    pub const fn number(self) -> libc::c_int {
        self.0
    }

    /// `SIGTERM`, `SIGINT`, ...; `unknown signal` for a number the platform
    /// does not name.
    pub fn name(self) -> &'static str {
        signal_hook::low_level::signal_name(self.0).unwrap_or("unknown signal")
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_by_signal_hook() {
        assert_eq!(Signal::TERM.name(), "SIGTERM");
        assert_eq!(Signal::INT.to_string(), "SIGINT");
        assert_eq!(format!("{:?}", Signal::HUP), "SIGHUP");
        assert_eq!(Signal::KILL.number(), libc::SIGKILL);
        assert_eq!(Signal::from_raw(libc::SIGTERM), Signal::TERM);
        assert_eq!(Signal::from_raw(4242).name(), "unknown signal");
    }
}
