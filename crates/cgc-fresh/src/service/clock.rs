//! The service's clock: the one place that reads the wall clock for the
//! core's machines, which take the time as an input (`Millis`).

use std::time::{SystemTime, UNIX_EPOCH};

use cgc_fresh_core::freshness::Millis;

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now() -> Millis {
    Millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}
