//! `fake-cgc`: a scriptable stand-in for the CodeGraphContext `cgc` CLI.
//!
//! Point the service's `cgc.executable` at this binary (or at a symlink
//! named `cgc`), describe what each subcommand should do in the JSON file
//! named by `FAKE_CGC_SCENARIO`, and read what happened from the JSON-lines
//! log named by `FAKE_CGC_LOG`. The full reference (scenario format,
//! built-in behaviours, log records) is in the crate's `README.md`, which
//! is also the library's crate documentation.

fn main() {
    fake_cgc::main_entry()
}
