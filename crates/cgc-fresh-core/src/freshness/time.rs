//! Time as an input.
//!
//! The machine never reads a clock: every input comes with the time it
//! happened, in unix milliseconds, and every deadline the machine asks for is
//! a point on that same scale. This keeps the rules testable to the
//! millisecond and lets the shell decide what "now" is.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A point in time: milliseconds since the unix epoch, as the caller saw it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// The point `ms` unix milliseconds.
    pub const fn new(ms: u64) -> Self {
        Millis(ms)
    }

    /// The unix milliseconds of this point.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// This point moved `ms` later, saturating at the end of time instead of
    /// wrapping (a huge configured window must not make a deadline "past").
    pub const fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_saturates_instead_of_wrapping() {
        assert_eq!(Millis(u64::MAX - 1).plus(5), Millis(u64::MAX));
        assert_eq!(Millis(10).plus(5), Millis(15));
    }

    #[test]
    fn serializes_as_a_bare_number() {
        assert_eq!(serde_json::to_string(&Millis(42)).unwrap(), "42");
        assert_eq!(serde_json::from_str::<Millis>("7").unwrap(), Millis(7));
    }
}
