//! Shared pieces of the cgc-fresh fuzz targets (see `docs/FUZZING.md`).
//!
//! The targets live in `fuzz_targets/`; this library holds what more than
//! one of them needs: feeding a byte stream through the line codec the way
//! a socket reader does ([`framing`]), the round-trip checks every decoded
//! or replied frame must pass ([`round_trip`]), and the way the service
//! answers a line ([`replies`]). Every check panics with a message saying
//! which rule broke: a panic is what libFuzzer records as a crash.

pub mod framing;
pub mod replies;
pub mod round_trip;
pub mod workspace_model;
