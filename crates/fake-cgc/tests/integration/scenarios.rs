//! Scenario selection: per-subcommand entries, sequences, defaults, the
//! die timer, and broken scenarios.

use std::os::unix::process::ExitStatusExt;

use fake_cgc::texts::{already_indexed_line, WATCH_READY};
use fake_cgc::{Event, SignalName, FAKE_ERROR_EXIT};
use serde_json::json;

use crate::support::{Running, Sandbox};

#[test]
fn exit_code_and_both_streams_come_from_the_scenario() {
    let sandbox = Sandbox::new("exit-code");
    sandbox.write_scenario(json!({"update": {
        "steps": [{"stdout": ["one", {"cgc": "already_indexed", "files": 50}]},
                  {"write_file": {"path": "sub/.cgcignore", "content": "first\n"}},
                  {"write_file": {"path": "sub/.cgcignore", "content": "second\n", "if_missing": true}},
                  {"stderr": "two"}],
        "exit": 7
    }}));
    let finished = sandbox.run(&["update", ".", "--quiet"]);
    assert_eq!(finished.status.code(), Some(7));
    assert_eq!(
        finished.stdout,
        ["one".to_owned(), already_indexed_line(".", 50)]
    );
    assert_eq!(finished.stderr, ["two"]);
    let written = std::fs::read_to_string(sandbox.workspace().join("sub/.cgcignore")).unwrap();
    assert_eq!(
        written, "first\n",
        "if_missing leaves an existing file alone"
    );
}

#[test]
fn a_sequence_is_used_per_invocation_and_sticks_to_its_last_entry() {
    let sandbox = Sandbox::new("sequence");
    sandbox.write_scenario(json!({"index": [
        {"steps": [{"stdout": "first"}], "exit": 3},
        "builtin",
        {"steps": [{"stdout": "third"}], "exit": 5}
    ]}));
    let mut results = Vec::new();
    for _ in 0..4 {
        let finished = sandbox.run(&["index"]);
        results.push((finished.status.code(), finished.stdout.first().cloned()));
        // Other subcommands do not advance the index sequence.
        sandbox.run(&["doctor"]);
    }
    let builtin_line = results[1].1.clone().unwrap();
    assert!(
        builtin_line.starts_with("Successfully finished indexing"),
        "{builtin_line}"
    );
    assert_eq!(
        results,
        [
            (Some(3), Some("first".to_owned())),
            (Some(0), Some(builtin_line)),
            (Some(5), Some("third".to_owned())),
            (Some(5), Some("third".to_owned())),
        ]
    );
    let behaviours: Vec<String> = sandbox
        .records()
        .into_iter()
        .filter(|record| record.event == Event::End && record.command.as_deref() == Some("index"))
        .map(|record| record.behaviour.unwrap())
        .collect();
    assert_eq!(
        behaviours,
        [
            "scenario:index[0]",
            "scenario:index[1]",
            "scenario:index[2]",
            "scenario:index[2]"
        ]
    );
}

#[test]
fn the_scenario_is_read_at_every_invocation() {
    let sandbox = Sandbox::new("rewrite");
    sandbox.write_scenario(json!({"default": {"exit": 4}}));
    assert_eq!(sandbox.run(&["list"]).status.code(), Some(4));
    sandbox.write_scenario(json!({"list": {"exit": 6}}));
    assert_eq!(sandbox.run(&["list"]).status.code(), Some(6));
    sandbox.write_scenario(json!({"watch": {"exit": 9}}));
    let builtin = sandbox.run(&["list"]);
    assert_eq!(builtin.status.code(), Some(0));
    assert_eq!(builtin.stdout, ["No repositories indexed yet."]);
}

#[test]
fn die_after_ms_kills_alongside_the_steps() {
    let sandbox = Sandbox::new("die-after");
    sandbox.write_scenario(json!({
        "watch": {"steps": [{"die_after_ms": 150, "signal": "KILL"},
                            {"stdout": {"cgc": "ready"}}, {"hang": true}]},
        "index": {"steps": [{"die_after_ms": 100, "exit": 42}, {"sleep_ms": 60000}]}
    }));
    let fake = Running::spawn(sandbox.command(&["watch"]));
    fake.read_until(WATCH_READY);
    let killed = fake.finish();
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL));
    let how = sandbox.record(Event::End, killed.pid).how.unwrap();
    assert_eq!(how.signal, Some(SignalName::KILL));

    let exited = sandbox.run(&["index"]);
    assert_eq!(exited.status.code(), Some(42));
}

#[test]
fn a_broken_scenario_is_a_fake_error_not_a_cgc_failure() {
    let sandbox = Sandbox::new("broken");
    std::fs::write(
        sandbox.scenario_path(),
        r#"{"watch": {"steps": [{"slep_ms": 1}]}}"#,
    )
    .unwrap();
    let finished = sandbox.run(&["watch"]);
    assert_eq!(finished.status.code(), Some(FAKE_ERROR_EXIT));
    assert!(
        finished
            .stderr
            .iter()
            .any(|line| line.starts_with("fake-cgc:") && line.contains("slep_ms")),
        "{:?}",
        finished.stderr
    );
    let end = sandbox.record(Event::End, finished.pid);
    assert!(end.error.is_some());
}
