//! Signal names as scenarios and the invocation log spell them: `"INT"`,
//! `"TERM"`, ... (a `SIG` prefix is accepted on input).

use std::fmt;
use std::str::FromStr;

use nix::sys::signal::Signal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A signal, named without the `SIG` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignalName(pub Signal);

impl SignalName {
    /// SIGINT.
    pub const INT: SignalName = SignalName(Signal::SIGINT);
    /// SIGTERM.
    pub const TERM: SignalName = SignalName(Signal::SIGTERM);
    /// SIGHUP.
    pub const HUP: SignalName = SignalName(Signal::SIGHUP);
    /// SIGKILL.
    pub const KILL: SignalName = SignalName(Signal::SIGKILL);

    /// The name without the `SIG` prefix, e.g. `"TERM"`.
    pub fn short_name(self) -> &'static str {
        let full = self.0.as_str();
        full.strip_prefix("SIG").unwrap_or(full)
    }
}

impl fmt::Display for SignalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// A name that is not a signal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal name {0:?} (expected e.g. \"INT\", \"TERM\", \"KILL\")")]
pub struct UnknownSignal(pub String);

impl FromStr for SignalName {
    type Err = UnknownSignal;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let upper = text.to_ascii_uppercase();
        let full = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        Signal::from_str(&full)
            .map(SignalName)
            .map_err(|_| UnknownSignal(text.to_owned()))
    }
}

impl Serialize for SignalName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.short_name())
    }
}

impl<'de> Deserialize<'de> for SignalName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_prefix() {
        assert_eq!("KILL".parse::<SignalName>(), Ok(SignalName::KILL));
        assert_eq!("sigterm".parse::<SignalName>(), Ok(SignalName::TERM));
        assert!("NOPE".parse::<SignalName>().is_err());
        assert_eq!(SignalName::INT.to_string(), "INT");
    }
}
