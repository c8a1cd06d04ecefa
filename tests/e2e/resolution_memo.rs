//! The driver's resolution memo (`driver/resolution_memo.py`) on stand-in
//! resolution functions of known shape (`resolution_memo_check.py`): which
//! files it resolves again, and when it steps aside for the function run
//! whole. Its work on CodeGraphContext itself is checked end to end in
//! `incremental.rs` (`CGC_FRESH_VERIFY_RESOLUTION`).

use serde_json::Value;

use crate::support::{driver_source, python_check};

/// One JSON line per request of the check script's three trees.
fn requests(case: &str) -> Vec<Value> {
    let lines = python_check(
        "resolution_memo_check.py",
        &[&driver_source("resolution_memo.py"), case],
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        assert_eq!(
            line["equal"], true,
            "{case}: the memo's answer differs: {line}"
        );
    }
    lines
}

/// Only the files whose reads changed are resolved again: a renamed
/// function's caller (its lookup now finds nothing), not the file whose
/// lookups kept their answer; a new definition of a called name brings its
/// caller back, and files with nothing changed are reused.
#[test]
fn the_memo_resolves_again_exactly_the_files_whose_lookups_changed() {
    let lines = requests("reads");
    let counts: Vec<(i64, i64)> = lines
        .iter()
        .map(|l| {
            (
                l["reused"].as_i64().unwrap_or(-1),
                l["resolved"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    // First: all three; then a.py (changed) and b.py (its `f` went), c.py
    // reused; then d.py (new) and b.py (its `f` is back), a.py and c.py
    // reused.
    assert_eq!(counts, [(0, 3), (1, 2), (2, 2)], "{lines:?}");
    assert_eq!(lines[1]["answer"][0].as_array().map(Vec::len), Some(1));
    assert_eq!(lines[2]["answer"][0][0]["to"], "d.py", "{}", lines[2]);
}

/// A loop that adds to its maps makes one file's answer depend on the
/// files before it: the memo notices the write, answers with the function
/// run whole and stays off.
#[test]
fn a_loop_that_writes_its_maps_turns_the_memo_off() {
    let lines = requests("writes");
    // The first tree's calls all find their name: nothing is written.
    assert!(lines[0]["off"].is_null(), "{}", lines[0]);
    // b.py's `f` is gone from the second: the loop adds it.
    for line in &lines[1..] {
        let off = line["off"].as_str().unwrap_or_default();
        assert!(off.contains("wrote to index"), "{line}");
    }
}

/// A loop that reads what the previous file's iteration left does too.
#[test]
fn a_loop_that_carries_values_between_files_turns_the_memo_off() {
    let lines = requests("carries");
    let off = lines[0]["off"].as_str().unwrap_or_default();
    assert!(off.contains("another file's iteration"), "{}", lines[0]);
}

/// A resolution function without the per-file loop the memo hooks into
/// runs as shipped.
#[test]
fn a_resolution_function_of_another_shape_runs_as_shipped() {
    let lines = requests("other_shape");
    let off = lines[0]["off"].as_str().unwrap_or_default();
    assert!(off.contains("another shape"), "{}", lines[0]);
}
