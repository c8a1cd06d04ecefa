//! The worker's patches of CodeGraphContext's embedded session for a file
//! it deletes and writes again in one request (`ParentDirectoriesKept`,
//! `ParameterRowsBatched` in `driver/session_patches.py`), on a stand-in
//! session (`session_patches_check.py`): each touches exactly its one
//! statement, the Parameter batch only when no key repeats (Kùzu's
//! mis-binding needs a repeated key), and everything is put back. The
//! graphs they leave, on CodeGraphContext itself, are compared with a
//! from-scratch index in `incremental.rs` and `stored_edges.rs`.

use crate::support::{driver_source, python_check};

#[test]
fn a_rewritten_files_directories_are_kept_and_only_distinct_parameter_rows_are_batched() {
    let cases = python_check(
        "session_patches_check.py",
        &[&driver_source("session_patches.py")],
    );
    assert_eq!(cases.len(), 5, "{cases:?}");
    for case in &cases {
        assert_eq!(
            case["put_back"], true,
            "the session was not put back: {case}"
        );
    }

    // The rewritten file's directories are not listed (so none is
    // deleted); a file only deleted, and any other statement, run as shipped.
    let parents = &cases[0];
    assert_eq!(parents["rewritten"], serde_json::json!([]), "{parents}");
    assert_eq!(
        parents["deleted"],
        serde_json::json!(["/repo/pkg"]),
        "{parents}"
    );
    assert_eq!(
        parents["other"],
        serde_json::json!(["/repo/pkg"]),
        "{parents}"
    );
    assert_eq!(
        (parents["kept"].as_u64(), parents["ran"].as_u64()),
        (Some(1), Some(2))
    );

    let batched: Vec<(&str, bool, u64)> = cases[1..]
        .iter()
        .map(|c| {
            assert_eq!(
                c["flag_after"],
                serde_json::Value::Null,
                "flag left set: {c}"
            );
            (
                c["case"].as_str().unwrap_or_default(),
                c["batched"][0].as_bool().unwrap_or_default(),
                c["counted"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    assert_eq!(
        batched,
        [
            ("distinct keys", true, 1),
            ("a repeated key", false, 0),
            ("one row", false, 0),
            ("another statement", false, 0),
        ]
    );
}
