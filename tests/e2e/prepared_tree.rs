//! When a worker's request uses the tree it prepared during the batching
//! window (`PreparedTree` in `driver/prepared_tree.py`), on real files and a
//! stand-in for CodeGraphContext's settings (`prepared_tree_check.py`):
//! only while the tree is what was prepared. Its use on CodeGraphContext
//! itself is checked end to end in `incremental.rs`
//! (`CGC_FRESH_VERIFY_PREPARED`).

use crate::support::{driver_source, python_check};

#[test]
fn a_prepared_tree_is_used_only_while_every_file_and_setting_is_as_it_was() {
    let cases: Vec<(String, bool, i64)> = python_check(
        "prepared_tree_check.py",
        &[&driver_source("prepared_tree.py")],
    )
    .iter()
    .map(|v| {
        (
            v["case"].as_str().unwrap_or_default().to_string(),
            v["holds"].as_bool().expect("holds"),
            v["racy"].as_i64().unwrap_or(-1),
        )
    })
    .collect();
    let expected = [
        ("unchanged", true, 0),
        // The three files were just written: compared byte for byte.
        ("unchanged, just edited", true, 3),
        ("same identity, other bytes", false, 3),
        ("a file rewritten", false, 0),
        ("a file added", false, 0),
        ("a file removed", false, 0),
        ("other settings", false, 0),
        ("another repository", false, 0),
        ("a file no parser reads", true, 0),
        ("a file whose parse may read other files", false, 0),
    ];
    let expected: Vec<(String, bool, i64)> = expected
        .iter()
        .map(|(case, holds, racy)| (case.to_string(), *holds, *racy))
        .collect();
    assert_eq!(cases, expected);
}
