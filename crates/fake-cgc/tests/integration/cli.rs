//! The command line and the built-in behaviours of the short subcommands.

use fake_cgc::texts::{path_missing_line, version_line};
use fake_cgc::Event;

use crate::support::Sandbox;

#[test]
fn unknown_subcommand_is_a_usage_error_with_exit_2() {
    let sandbox = Sandbox::new("usage");
    let finished = sandbox.run(&["--db", "kuzudb", "frobnicate", "."]);
    assert_eq!(finished.status.code(), Some(2));
    assert!(finished.stdout.is_empty());
    assert!(finished
        .stderr
        .iter()
        .any(|line| line == "Error: No such command 'frobnicate'."));
    let end = sandbox.record(Event::End, finished.pid);
    assert_eq!(end.command, None);
    assert_eq!(end.how.unwrap().exit, Some(2));

    // Root options belong before the subcommand, as in the real CLI.
    assert_eq!(
        sandbox.run(&["index", "--db", "kuzudb", "."]).status.code(),
        Some(2)
    );
}

#[test]
fn version_and_doctor_print_on_stderr() {
    let sandbox = Sandbox::new("version-doctor");
    for args in [&["--version"][..], &["--unknown-root", "x", "version"][..]] {
        let finished = sandbox.run(args);
        assert_eq!(finished.status.code(), Some(0));
        assert!(finished.stdout.is_empty());
        assert_eq!(finished.stderr, [version_line()]);
    }

    let mut doctor = sandbox.command(&["doctor"]);
    doctor
        .env_remove("DATABASE_TYPE")
        .env_remove("DEFAULT_DATABASE");
    let finished = crate::support::Running::spawn(doctor).finish();
    assert_eq!(finished.status.code(), Some(0));
    assert_eq!(
        finished.stderr,
        ["   Default database: kuzudb (source: default)"]
    );

    let mut doctor = sandbox.command(&["doctor"]);
    doctor
        .env_remove("DATABASE_TYPE")
        .env("DEFAULT_DATABASE", "falkordb-remote");
    let finished = crate::support::Running::spawn(doctor).finish();
    assert_eq!(
        finished.stderr,
        ["   Default database: falkordb-remote (source: environment (DEFAULT_DATABASE))"]
    );
}

#[test]
fn a_missing_path_fails_like_the_real_one() {
    let sandbox = Sandbox::new("missing-path");
    let finished = sandbox.run(&["watch", "nowhere"]);
    assert_eq!(finished.status.code(), Some(1));
    let missing = sandbox.workspace().join("nowhere");
    assert_eq!(
        finished.stdout,
        [path_missing_line(&missing.to_string_lossy())]
    );
}

#[test]
fn query_and_find_have_empty_results() {
    let sandbox = Sandbox::new("query-find");
    let query = sandbox.run(&["query", "MATCH (f:Function) RETURN f.name AS name"]);
    assert_eq!(
        (query.status.code(), query.stdout),
        (Some(0), vec!["[]".to_owned()])
    );
    let find = sandbox.run(&["find", "name", "foo"]);
    assert_eq!(find.status.code(), Some(0));
    assert_eq!(find.stdout, ["No matches found for 'foo'."]);
}
