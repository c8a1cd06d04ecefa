//! The worker's `.cgcignore` memo (`RequestMemos._memoize_ignore_matches`
//! in `driver/session_patches.py`) on a stand-in for CodeGraphContext's matcher
//! (`ignore_memo_check.py`): it gives the matcher's own answers, asks the
//! matcher again only under other rules, and stays bounded. Discovery
//! through it on CodeGraphContext itself runs in every real-CLI sync of
//! `incremental.rs`.

use crate::support::{driver_source, python_check};

#[test]
fn ignore_answers_are_remembered_per_rule_set_and_equal_the_matchers_own() {
    let cases = python_check(
        "ignore_memo_check.py",
        &[&driver_source("session_patches.py")],
    );
    let asked: Vec<(&str, u64)> = cases
        .iter()
        .map(|c| {
            assert_eq!(c["memo"], c["own"], "the memo's answers differ: {c}");
            (
                c["case"].as_str().unwrap_or_default(),
                c["asked"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    // Six paths and one path object per case: the object always goes to
    // the matcher; a path only under rules the memo does not hold (the
    // bounded case: five new paths, one of them asked twice).
    assert_eq!(
        asked,
        [
            ("first matcher", 7),
            ("same rules again", 1),
            ("other rules", 7),
            ("the first rules once more", 7),
            ("bounded", 6),
        ]
    );
    // The rule change's negation reached the answers.
    assert_eq!(cases[2]["memo"][2], false, "{:?}", cases[2]);
    assert_eq!(cases[0]["memo"][2], true, "{:?}", cases[0]);
    let kept = cases[4]["kept"].as_u64().unwrap_or(u64::MAX);
    assert!(kept <= 3, "the memo grew past its bound: {kept}");
}
