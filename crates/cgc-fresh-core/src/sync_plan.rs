//! What a sync runs, and what its ending means — as pure functions, so the
//! rule that turns a `cgc` exit into a claim about the graph is tested
//! without a process.
//!
//! On CGC 0.6.13 `cgc index .` skips an indexed repository and applies no
//! edits; only `cgc watch --sync-on-start .` (stopped once it is ready) and
//! `cgc update .` bring an indexed graph up to date. See the strategies.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::SyncStrategy;
use crate::freshness::SyncOutcome;

/// The prefix of the driver's one result line on stdout.
pub const DRIVER_RESULT_PREFIX: &str = "CGC_FRESH_RESULT ";

/// The version of the line protocol between the service and the driver
/// (`"protocol"` in every result line; the driver's `PROTOCOL`). A driver
/// that speaks another is not run: its probe fails (`probe_answer`).
pub const DRIVER_PROTOCOL: u32 = 1;

/// The driver's exit code for "cannot apply incrementally; nothing was
/// written" (the sync runs `reconcile` instead).
pub const DRIVER_EXIT_UNSUPPORTED: i32 = 3;

/// What one sync actually runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncRun {
    /// The incremental driver on these workspace-relative paths.
    Incremental { paths: Vec<String> },
    /// The incremental driver on the files whose content in the graph is
    /// not what a from-scratch index writes (`driver/graph_baseline.py`):
    /// nothing proves what the graph holds, for `reason`.
    Baseline { reason: String },
    /// The configured strategy's `cgc` command (for `Incremental`,
    /// `reconcile`), with the reason when it replaces `incremental`.
    Command {
        strategy: SyncStrategy,
        fallback_reason: Option<String>,
    },
}

/// Decides what a sync runs. `paths` are the changed workspace-relative
/// paths of the flight (`None`: the whole workspace); `must_reconcile` is
/// set after an incremental run that may have left the graph partial.
///
/// When the changes are not known file by file (no manifest: the first
/// sync after the person's own `cgc index .`; a manifest that cannot be
/// compared; an edit the harness could not name), the driver finds them
/// by comparing the graph with the tree (`Baseline`), which costs a parse
/// and the changed files' writes, not the repository's. A run that may
/// have left the graph partial still reconciles: the comparison reads the
/// nodes and imports a file's write makes, not every edge a half-done
/// run may have left behind.
pub fn plan_sync(
    strategy: &SyncStrategy,
    paths: Option<&[String]>,
    must_reconcile: Option<&str>,
) -> SyncRun {
    if *strategy != SyncStrategy::Incremental {
        return SyncRun::Command {
            strategy: strategy.clone(),
            fallback_reason: None,
        };
    }
    let reconcile = |reason: String| SyncRun::Command {
        strategy: SyncStrategy::Reconcile,
        fallback_reason: Some(reason),
    };
    if let Some(why) = must_reconcile {
        return reconcile(why.to_string());
    }
    let baseline = |reason: &str| SyncRun::Baseline {
        reason: reason.to_string(),
    };
    match paths {
        None => baseline("the changes are not known file by file (whole workspace)"),
        Some([]) => baseline("no changed file was recorded"),
        // Any number of files: the driver's writes grow with the files it
        // writes (each file's nodes, its link rows), the reconcile's with
        // the repository, and both parse the whole tree — so a branch
        // switch of hundreds of files is still cheaper applied than
        // reconciled.
        Some(list) => SyncRun::Incremental {
            paths: list.to_vec(),
        },
    }
}

/// The driver's root option that carries `cgc.allowUnprovenVersion`: the
/// person's opt-in to patch a CGC version the driver was not proven
/// against (`driver/cgc_seam.py`).
pub const ALLOW_UNPROVEN_CGC_FLAG: &str = "--allow-unproven-cgc";

/// What every mode of the driver that may patch CGC takes first: CGC's
/// root options, and whether the person allows a CGC version the driver
/// was not proven against.
#[derive(Debug, Clone, Copy)]
pub struct DriverOptions<'a> {
    pub global_args: &'a [String],
    pub allow_unproven_cgc: bool,
}

/// The driver probe's answer, from its result line and exit code (the
/// one-shot `--probe`'s, or a worker's answer to a probe line): `Ok` with
/// the note of an unproven CGC version the person allowed, `Err` with why
/// the driver cannot run; `None` when neither says (the caller names the
/// exit or the timeout).
pub fn probe_answer(
    result: Option<&DriverResult>,
    code: Option<i32>,
) -> Option<Result<Option<String>, String>> {
    match (result, code) {
        // A yes counts only in the service's protocol (an old driver file
        // left behind, a mismatched build: nothing else in its line can be
        // trusted). A no is a no in any protocol, and says its own why.
        (Some(r), Some(0)) if r.ok && r.protocol != Some(DRIVER_PROTOCOL) => Some(Err(format!(
            "the driver answered in protocol {}, this service speaks {DRIVER_PROTOCOL}",
            r.protocol
                .map_or_else(|| "(none)".to_string(), |p| p.to_string())
        ))),
        (Some(r), Some(0)) if r.ok => Some(Ok(r.unproven.clone())),
        (Some(r), _) if !r.missing.is_empty() => Some(Err(format!(
            "CodeGraphContext lacks what it needs: {}",
            r.missing.join(", ")
        ))),
        (Some(r), _) if r.error.is_some() => Some(Err(r.error.clone().unwrap_or_default())),
        _ => None,
    }
}

/// The driver's arguments after the interpreter: the script, CGC's root
/// options (and the opt-in flag), `--parse-cache PATH` when parses are
/// kept between syncs, then `--probe` or `apply -- PATH...`.
pub fn driver_argv(
    script: &str,
    options: &DriverOptions<'_>,
    parse_cache: Option<&str>,
    paths: Option<&[String]>,
) -> Vec<String> {
    let mut argv = driver_options(script, options, parse_cache);
    match paths {
        None => argv.push("--probe".into()),
        Some(paths) => {
            argv.extend(["apply", "--"].map(String::from));
            argv.extend(paths.iter().cloned());
        }
    }
    argv
}

/// The driver script, CGC's root options and the opt-in, then the parse
/// cache: what every mode of the driver takes first.
fn driver_options(
    script: &str,
    options: &DriverOptions<'_>,
    parse_cache: Option<&str>,
) -> Vec<String> {
    let mut argv = vec![script.to_string()];
    argv.extend(options.global_args.iter().cloned());
    if options.allow_unproven_cgc {
        argv.push(ALLOW_UNPROVEN_CGC_FLAG.to_string());
    }
    if let Some(cache) = parse_cache {
        argv.extend(["--parse-cache".to_string(), cache.to_string()]);
    }
    argv
}

/// The driver as a long-lived worker (`serve`): root options, the parse
/// cache, and how long it may wait for a request before it ends.
pub fn worker_argv(
    script: &str,
    options: &DriverOptions<'_>,
    parse_cache: &str,
    idle_exit: std::time::Duration,
) -> Vec<String> {
    let mut argv = driver_options(script, options, Some(parse_cache));
    argv.extend([
        "--idle-exit".to_string(),
        idle_exit.as_secs().max(1).to_string(),
        "serve".to_string(),
    ]);
    argv
}

/// One request line for a worker: apply `paths` (with `baseline`, and
/// every file the graph does not hold as a from-scratch index would),
/// answer with `serial`.
pub fn worker_request(serial: u64, paths: &[String], baseline: bool) -> String {
    let mut request = serde_json::json!({ "serial": serial, "paths": paths });
    if baseline {
        request["baseline"] = serde_json::Value::Bool(true);
    }
    let mut line = request.to_string();
    line.push('\n');
    line
}

/// The line that asks a worker to prepare its next request: parse and
/// resolve the tree as it is now. It is not answered.
pub fn worker_prepare() -> String {
    "{\"prepare\":true}\n".to_string()
}

/// The line that asks a worker for the driver's API probe (the service's
/// warm-up at a session's start), answered like the one-shot `--probe`
/// with `serial`.
pub fn worker_probe(serial: u64) -> String {
    let mut line = serde_json::json!({ "serial": serial, "probe": true }).to_string();
    line.push('\n');
    line
}

/// What a run does when the worker it asked exits without answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnansweredWorkerExit {
    /// A new worker takes the same request.
    Retry,
    /// The run ends with this exit, as it would with a one-shot driver's.
    End,
}

/// A worker that exits 0 without answering ended on its own before it read
/// the request — its idle time-out struck as the request was written, or
/// its input ended — so it wrote nothing, and a new worker can take the
/// same request: once, and not when the run was being cancelled or was out
/// of time. Any other exit (a signal, a crash) may have come mid-apply: the
/// graph is in doubt, and the run ends as a failed one-shot run would.
pub fn unanswered_worker_exit(
    code: Option<i32>,
    cancelled: bool,
    timed_out: bool,
    retried: bool,
) -> UnansweredWorkerExit {
    if code == Some(0) && !cancelled && !timed_out && !retried {
        UnansweredWorkerExit::Retry
    } else {
        UnansweredWorkerExit::End
    }
}

/// The interpreter named by a script's first line (`#!/path/python` or
/// `#!/usr/bin/env python3`): program and its arguments before the script.
pub fn interpreter_from_shebang(first_line: &str) -> Option<(String, Vec<String>)> {
    let rest = first_line.strip_prefix("#!")?.trim();
    let mut words = rest.split_whitespace();
    let program = words.next()?.to_string();
    let args: Vec<String> = words.map(str::to_string).collect();
    if program.ends_with("/env") {
        let (name, more) = args.split_first()?;
        if name.starts_with('-') {
            return None;
        }
        return Some((name.clone(), more.to_vec()));
    }
    Some((program, args))
}

/// The driver's result line, as far as the service reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct DriverResult {
    /// The line protocol's version ([`DRIVER_PROTOCOL`]).
    #[serde(default)]
    pub protocol: Option<u32>,
    #[serde(default)]
    pub ok: bool,
    #[serde(default)]
    pub mode: Option<String>,
    /// What happened to each requested path (a batch of at most
    /// `DRIVER_PATHS_LISTED` paths).
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
    /// A larger batch's account, in a line of bounded length: the SHA-256
    /// (hex) of the accounted paths, sorted, joined by newlines
    /// ([`paths_digest`]), and their number.
    #[serde(default)]
    pub paths_digest: Option<String>,
    #[serde(default)]
    pub paths_accounted: Option<usize>,
    #[serde(default)]
    pub error: Option<String>,
    /// Cannot apply incrementally; nothing was written.
    #[serde(default)]
    pub unsupported: bool,
    #[serde(default)]
    pub missing: Vec<String>,
    /// A probe's word that the driver will run on a CGC version it was
    /// not proven against, because the person allowed it.
    #[serde(default)]
    pub unproven: Option<String>,
    #[serde(default)]
    pub relinked: Option<u64>,
    /// The driver compared the graph with the tree (a baseline request).
    #[serde(default)]
    pub baseline: bool,
    /// The driver's timings, for the log: the entries that are numbers
    /// (anything else in them is dropped, never a reason to miss the
    /// answer: a result line that does not parse leaves its request
    /// unanswered until the time budget ends it).
    #[serde(default, deserialize_with = "numbers_only")]
    pub timings: BTreeMap<String, f64>,
    /// A worker's answer: the request it answers, and the exit code the
    /// one-shot driver would have ended with.
    #[serde(default)]
    pub serial: Option<u64>,
    #[serde(default)]
    pub exit: Option<i32>,
}

/// The numeric entries of a JSON object; nothing for anything else.
fn numbers_only<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, f64>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(value
        .as_object()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|(key, value)| value.as_f64().map(|n| (key.clone(), n)))
                .collect()
        })
        .unwrap_or_default())
}

/// Reads one output line as the driver's result line, if it is one.
pub fn parse_driver_result(line: &str) -> Option<DriverResult> {
    let json = line.trim_start().strip_prefix(DRIVER_RESULT_PREFIX)?;
    serde_json::from_str(json.trim()).ok()
}

/// How an incremental driver run ended, for the runner.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverVerdict {
    /// Run `reconcile` now instead: the driver wrote nothing.
    Fallback { reason: String },
    /// The outcome to report (success only when every path is accounted for).
    Outcome(SyncOutcome),
}

/// Judges an ended baseline run (`SyncRun::Baseline`): `Succeeded` only
/// on exit 0 with a result line that says `ok` and that the graph was
/// compared with the tree; otherwise as [`classify_driver_exit`].
pub fn classify_baseline_exit(
    result: Option<&DriverResult>,
    facts: &SyncRunFacts,
) -> DriverVerdict {
    match ended_ok(result, facts) {
        Err(verdict) => verdict,
        Ok(result) if result.baseline => DriverVerdict::Outcome(SyncOutcome::Succeeded),
        Ok(_) => DriverVerdict::Outcome(SyncOutcome::Failed {
            error: "the incremental driver did not say it compared the graph with the tree".into(),
        }),
    }
}

/// Judges an ended driver run: `Succeeded` only on exit 0 with a result
/// line that says `ok` and accounts for every requested path.
pub fn classify_driver_exit(
    requested: &[String],
    result: Option<&DriverResult>,
    facts: &SyncRunFacts,
) -> DriverVerdict {
    let result = match ended_ok(result, facts) {
        Ok(result) => result,
        Err(verdict) => return verdict,
    };
    if let Some(digest) = &result.paths_digest {
        // The driver accounts for the requested set exactly as it read it:
        // without empty names, each once, sorted.
        let mut wanted: Vec<&str> = requested
            .iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        if result.paths_accounted != Some(wanted.len()) || *digest != paths_digest(&wanted) {
            return DriverVerdict::Outcome(SyncOutcome::Failed {
                error: format!(
                    "the incremental driver's account of {} path(s) is not the {} requested",
                    result.paths_accounted.unwrap_or(0),
                    wanted.len()
                ),
            });
        }
        return DriverVerdict::Outcome(SyncOutcome::Succeeded);
    }
    let unaccounted: Vec<&str> = requested
        .iter()
        .filter(|path| !result.paths.contains_key(path.as_str()))
        .map(String::as_str)
        .collect();
    if !unaccounted.is_empty() {
        return DriverVerdict::Outcome(SyncOutcome::Failed {
            error: format!(
                "the incremental driver did not account for {}",
                unaccounted.join(", ")
            ),
        });
    }
    DriverVerdict::Outcome(SyncOutcome::Succeeded)
}

/// What every driver run's ending is judged by first: `Err` with the
/// verdict when it did not end with an `ok` result line on exit 0 (a
/// fallback on exit 3, a failure, a timeout, …), else `Ok` with that line.
fn ended_ok<'a>(
    result: Option<&'a DriverResult>,
    facts: &SyncRunFacts,
) -> Result<&'a DriverResult, DriverVerdict> {
    let exited_ok = facts.exit_code == Some(0);
    if !facts.cancelled
        && !facts.timed_out
        && !facts.lock_error
        && facts.exit_code == Some(DRIVER_EXIT_UNSUPPORTED)
    {
        let reason = result
            .and_then(|r| r.error.clone())
            .unwrap_or_else(|| "the incremental driver cannot apply these changes".into());
        return Err(DriverVerdict::Fallback { reason });
    }
    let generic = classify_sync_exit(&SyncStrategy::Incremental, facts);
    if !matches!(generic, SyncOutcome::Succeeded) || !exited_ok {
        // The driver's own reason (a failed self-check names the file and
        // the counts) says more than its exit code.
        return Err(DriverVerdict::Outcome(
            match (generic, result.and_then(|r| r.error.as_deref())) {
                (SyncOutcome::Failed { error }, Some(reason)) => SyncOutcome::Failed {
                    error: format!("{error}: {reason}"),
                },
                (outcome, _) => outcome,
            },
        ));
    }
    let Some(result) = result else {
        return Err(DriverVerdict::Outcome(SyncOutcome::Failed {
            error: "the incremental driver exited 0 without its result line".into(),
        }));
    };
    if !result.ok {
        return Err(DriverVerdict::Outcome(SyncOutcome::Failed {
            error: format!(
                "the incremental driver reported failure: {}",
                result.error.as_deref().unwrap_or("no reason given")
            ),
        }));
    }
    Ok(result)
}

/// The driver lists each path's outcome in its result line for a batch of
/// at most this many paths; a larger batch's line carries the digest of
/// the paths it accounted for instead (a line of bounded length: the
/// service cuts a child's line at 8 KiB).
pub const DRIVER_PATHS_LISTED: usize = 100;

/// The SHA-256 (lowercase hex) of `sorted_paths` joined by `\n`: what the
/// driver's result line carries for a batch larger than
/// `DRIVER_PATHS_LISTED` (`paths_digest` in the driver's `protocol.py`).
pub fn paths_digest(sorted_paths: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(sorted_paths.join("\n").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The argv (after the executable) for one sync: global flags first, since
/// CGC's `--db`/`--db-path`/`--context` are root options.
pub fn sync_argv(strategy: &SyncStrategy, global_args: &[String]) -> Vec<String> {
    let mut argv = global_args.to_vec();
    match strategy {
        // The driver is not a `cgc` subcommand: whoever runs a command for
        // `incremental` runs its fallback, the reconcile.
        SyncStrategy::Incremental | SyncStrategy::Reconcile => {
            argv.extend(["watch", "--sync-on-start", "."].map(String::from))
        }
        SyncStrategy::Update => argv.extend(["update", ".", "--quiet"].map(String::from)),
        SyncStrategy::Index => argv.extend(["index", "."].map(String::from)),
        SyncStrategy::Custom(args) => argv.extend(args.iter().cloned()),
    }
    argv
}

/// The driver's arguments for a command sync it readies the backend for
/// and then becomes: the script, CGC's root options, `reconcile --`, the
/// `cgc` to run and its arguments (`sync_argv`).
pub fn reconcile_argv(
    script: &str,
    global_args: &[String],
    cgc: &str,
    cgc_argv: &[String],
) -> Vec<String> {
    // The reconcile patches nothing: no opt-in to pass.
    let options = DriverOptions {
        global_args,
        allow_unproven_cgc: false,
    };
    let mut argv = driver_options(script, &options, None);
    argv.extend(["reconcile".to_string(), "--".to_string(), cgc.to_string()]);
    argv.extend(cgc_argv.iter().cloned());
    argv
}

/// The argv that lists indexed repositories (the consent check).
pub fn list_argv(global_args: &[String]) -> Vec<String> {
    let mut argv = global_args.to_vec();
    argv.push("list".into());
    argv
}

/// Whether `cgc list` output names `workspace` as an indexed repository.
/// The listing is a table; a row holds the path as a whole cell.
pub fn listing_mentions_workspace<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    workspace: &str,
) -> bool {
    let workspace = workspace.trim_end_matches('/');
    lines.into_iter().any(|line| {
        line.split(['│', '|', '┃'])
            .map(str::trim)
            .any(|cell| cell.trim_end_matches('/') == workspace)
    })
}

/// True for CGC's "already indexed … Skipping." line of `cgc index`.
pub fn is_index_skip_line(line: &str) -> bool {
    crate::cgc_seam::INDEX_SKIP_MARKERS
        .iter()
        .all(|marker| line.contains(marker))
}

/// What the shell observed about one sync run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncRunFacts {
    /// Exit code, when it exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// `watch` printed its ready line.
    pub saw_ready: bool,
    /// `watch` printed that it is stopping (it took the SIGINT).
    pub saw_stopping: bool,
    /// `index` said it skipped an indexed repository.
    pub skipped_indexed: bool,
    /// The output carried CGC's embedded-database lock error.
    pub lock_error: bool,
    /// The output said CGC went on with another backend than the graph's
    /// (it falls back when the configured one does not start in time):
    /// what it wrote is not the person's graph.
    pub backend_fell_back: bool,
    /// The time budget ran out and the group was stopped.
    pub timed_out: bool,
    /// The run was cancelled (its session ended).
    pub cancelled: bool,
    /// Who holds the database lock, if a probe after the failure found one.
    pub lock_holder: Option<String>,
    /// The last lines of output, for the record.
    pub output_tail: String,
    /// The time budget, for the message.
    pub timeout_ms: u64,
}

/// Turns an ended run into the outcome the freshness machine judges.
/// Only a run that did what the strategy promises is `Succeeded`.
pub fn classify_sync_exit(strategy: &SyncStrategy, facts: &SyncRunFacts) -> SyncOutcome {
    let how = describe_exit(facts);
    let with_tail = |head: String| {
        let tail = facts.output_tail.trim();
        if tail.is_empty() {
            head
        } else {
            format!("{head}; output ends: {tail}")
        }
    };
    if facts.cancelled {
        return SyncOutcome::Cancelled;
    }
    if facts.timed_out {
        return SyncOutcome::TimedOut {
            error: with_tail(format!(
                "no result within {} ms; stopped ({how})",
                facts.timeout_ms
            )),
        };
    }
    if facts.lock_error {
        let holder = facts
            .lock_holder
            .clone()
            .unwrap_or_else(|| "another CGC process (CGC reported the database lock)".into());
        return SyncOutcome::Busy { holder };
    }
    if facts.backend_fell_back {
        return SyncOutcome::Failed {
            error: with_tail(format!(
                "cgc went on with another database backend than the graph's (the configured one \
                 did not start in time), so the graph was not synced ({how})"
            )),
        };
    }
    let exited_ok = facts.exit_code == Some(0);
    match strategy {
        SyncStrategy::Incremental if !exited_ok => SyncOutcome::Failed {
            error: with_tail(format!("the incremental driver {how}")),
        },
        SyncStrategy::Reconcile if exited_ok && facts.saw_ready => SyncOutcome::Succeeded,
        SyncStrategy::Reconcile if exited_ok => SyncOutcome::Failed {
            error: with_tail(
                "cgc watch --sync-on-start exited before it reported the graph synchronised".into(),
            ),
        },
        SyncStrategy::Index if exited_ok && facts.skipped_indexed => SyncOutcome::NotApplied {
            detail: "cgc index skipped the already indexed repository: edits were not applied \
                     (use the reconcile or update strategy)"
                .into(),
        },
        _ if exited_ok => SyncOutcome::Succeeded,
        _ => SyncOutcome::Failed {
            error: with_tail(format!("cgc {how}")),
        },
    }
}

fn describe_exit(facts: &SyncRunFacts) -> String {
    match (facts.exit_code, facts.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_odd_timings_is_still_an_answer() {
        let line = r#"CGC_FRESH_RESULT {"protocol": 1, "ok": true, "serial": 4, "exit": 0, "timings": {"total_s": 1.5, "batched_writes_refused": "a reason", "n": 3}}"#;
        let result = parse_driver_result(line).expect("the answer is read");
        assert_eq!((result.serial, result.exit), (Some(4), Some(0)));
        assert_eq!(result.timings.get("total_s"), Some(&1.5));
        assert_eq!(result.timings.get("n"), Some(&3.0));
        assert!(!result.timings.contains_key("batched_writes_refused"));
        let odd = r#"CGC_FRESH_RESULT {"protocol": 1, "ok": true, "serial": 5, "exit": 0, "timings": "none"}"#;
        assert_eq!(parse_driver_result(odd).and_then(|r| r.serial), Some(5));
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn global_args_go_before_the_subcommand() {
        let global = args(&["--db", "kuzudb"]);
        assert_eq!(
            sync_argv(&SyncStrategy::Reconcile, &global),
            args(&["--db", "kuzudb", "watch", "--sync-on-start", "."])
        );
        assert_eq!(
            sync_argv(&SyncStrategy::Update, &global),
            args(&["--db", "kuzudb", "update", ".", "--quiet"])
        );
        assert_eq!(sync_argv(&SyncStrategy::Index, &[]), args(&["index", "."]));
        assert_eq!(
            sync_argv(
                &SyncStrategy::Custom(args(&["index", ".", "--force"])),
                &global
            ),
            args(&["--db", "kuzudb", "index", ".", "--force"])
        );
        assert_eq!(list_argv(&global), args(&["--db", "kuzudb", "list"]));
    }

    #[test]
    fn a_run_that_fell_back_to_another_backend_never_succeeds() {
        for strategy in [
            SyncStrategy::Reconcile,
            SyncStrategy::Update,
            SyncStrategy::Index,
            SyncStrategy::Incremental,
        ] {
            let fell_back = SyncRunFacts {
                exit_code: Some(0),
                saw_ready: true,
                backend_fell_back: true,
                ..Default::default()
            };
            match classify_sync_exit(&strategy, &fell_back) {
                SyncOutcome::Failed { error } => assert!(
                    error.contains("another database backend") && error.contains("not synced"),
                    "{error}"
                ),
                other => panic!("{strategy}: {other:?}"),
            }
        }
    }

    #[test]
    fn reconcile_succeeds_only_after_the_ready_line_and_exit_0() {
        let ok = SyncRunFacts {
            exit_code: Some(0),
            saw_ready: true,
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Reconcile, &ok),
            SyncOutcome::Succeeded
        );
        let early = SyncRunFacts {
            exit_code: Some(0),
            saw_ready: false,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Reconcile, &early),
            SyncOutcome::Failed { .. }
        ));
        let failed = SyncRunFacts {
            exit_code: Some(1),
            saw_ready: true,
            output_tail: "boom".into(),
            ..Default::default()
        };
        match classify_sync_exit(&SyncStrategy::Reconcile, &failed) {
            SyncOutcome::Failed { error } => assert!(
                error.contains("code 1") && error.contains("boom"),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn index_that_skipped_is_not_applied_never_success() {
        let skipped = SyncRunFacts {
            exit_code: Some(0),
            skipped_indexed: true,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Index, &skipped),
            SyncOutcome::NotApplied { .. }
        ));
        let ran = SyncRunFacts {
            exit_code: Some(0),
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Index, &ran),
            SyncOutcome::Succeeded
        );
    }

    #[test]
    fn lock_error_is_busy_not_failure_and_timeout_and_cancel_win() {
        let busy = SyncRunFacts {
            exit_code: Some(1),
            lock_error: true,
            lock_holder: Some("pid 9: cgc watch .".into()),
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Update, &busy),
            SyncOutcome::Busy {
                holder: "pid 9: cgc watch .".into()
            }
        );
        let timed = SyncRunFacts {
            signal: Some(2),
            timed_out: true,
            timeout_ms: 5,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Update, &timed),
            SyncOutcome::TimedOut { .. }
        ));
        let cancelled = SyncRunFacts {
            cancelled: true,
            timed_out: true,
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Update, &cancelled),
            SyncOutcome::Cancelled
        );
        let killed = SyncRunFacts {
            signal: Some(9),
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Update, &killed),
            SyncOutcome::Failed { .. }
        ));
    }

    fn paths(list: &[&str]) -> Vec<String> {
        args(list)
    }

    #[test]
    fn incremental_plans_the_driver_for_a_list_of_files_of_any_size() {
        let changed = paths(&["pkg/a.py", "pkg/b.py"]);
        assert_eq!(
            plan_sync(&SyncStrategy::Incremental, Some(&changed), None),
            SyncRun::Incremental {
                paths: changed.clone()
            }
        );
        // A run that may have left the graph partial reconciles, whatever
        // the paths.
        for given in [None, Some(&[][..]), Some(&changed[..])] {
            match plan_sync(
                &SyncStrategy::Incremental,
                given,
                Some("the last incremental sync failed"),
            ) {
                SyncRun::Command {
                    strategy: SyncStrategy::Reconcile,
                    fallback_reason: Some(_),
                } => {}
                other => panic!("{other:?}"),
            }
        }
        // A batch of any size is applied: a branch switch is not a reason
        // to reconcile the repository.
        let many: Vec<String> = (0..5_000).map(|i| format!("m{i}.py")).collect();
        assert_eq!(
            plan_sync(&SyncStrategy::Incremental, Some(&many), None),
            SyncRun::Incremental {
                paths: many.clone()
            }
        );
        assert_eq!(
            plan_sync(&SyncStrategy::Update, Some(&changed), None),
            SyncRun::Command {
                strategy: SyncStrategy::Update,
                fallback_reason: None
            }
        );
    }

    #[test]
    fn changes_not_known_file_by_file_are_found_by_comparing_the_graph_not_by_a_reconcile() {
        for given in [None, Some(&[][..])] {
            match plan_sync(&SyncStrategy::Incremental, given, None) {
                SyncRun::Baseline { reason } => assert!(!reason.is_empty()),
                other => panic!("{given:?}: {other:?}"),
            }
        }
        // Only the incremental strategy has a driver to ask.
        assert!(matches!(
            plan_sync(&SyncStrategy::Reconcile, None, None),
            SyncRun::Command {
                strategy: SyncStrategy::Reconcile,
                fallback_reason: None
            }
        ));
    }

    #[test]
    fn a_baseline_request_says_so_and_an_ordinary_one_does_not() {
        let plain: serde_json::Value =
            serde_json::from_str(&worker_request(3, &paths(&["a.py"]), false)).unwrap();
        assert_eq!(plain, serde_json::json!({"serial": 3, "paths": ["a.py"]}));
        let baseline: serde_json::Value =
            serde_json::from_str(&worker_request(4, &[], true)).unwrap();
        assert_eq!(
            baseline,
            serde_json::json!({"serial": 4, "paths": [], "baseline": true})
        );
    }

    #[test]
    fn a_baseline_succeeds_only_when_the_driver_says_it_compared_the_graph() {
        let ok = SyncRunFacts {
            exit_code: Some(0),
            ..SyncRunFacts::default()
        };
        let compared = DriverResult {
            ok: true,
            baseline: true,
            ..DriverResult::default()
        };
        assert_eq!(
            classify_baseline_exit(Some(&compared), &ok),
            DriverVerdict::Outcome(SyncOutcome::Succeeded)
        );
        // An ordinary apply's answer (an old driver that ignored the
        // request's baseline) is not a baseline.
        let not_compared = DriverResult {
            ok: true,
            ..DriverResult::default()
        };
        assert!(matches!(
            classify_baseline_exit(Some(&not_compared), &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
        assert!(matches!(
            classify_baseline_exit(None, &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
        // Exit 3: nothing written, the reconcile runs.
        let unsupported = SyncRunFacts {
            exit_code: Some(DRIVER_EXIT_UNSUPPORTED),
            ..SyncRunFacts::default()
        };
        assert!(matches!(
            classify_baseline_exit(Some(&not_compared), &unsupported),
            DriverVerdict::Fallback { .. }
        ));
        let failed = SyncRunFacts {
            exit_code: Some(1),
            ..SyncRunFacts::default()
        };
        assert!(matches!(
            classify_baseline_exit(Some(&compared), &failed),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
    }

    /// The script, root options and cache every driver mode starts with.
    const DRIVER_WITH_CACHE: &[&str] = &["/s/d.py", "--db", "kuzudb", "--parse-cache", "/s/c.json"];

    #[test]
    fn driver_argv_puts_root_options_before_the_mode() {
        let global = args(&["--db", "kuzudb"]);
        let global = DriverOptions {
            global_args: &global,
            allow_unproven_cgc: false,
        };
        assert_eq!(
            driver_argv("/s/d.py", &global, None, None),
            args(&["/s/d.py", "--db", "kuzudb", "--probe"])
        );
        assert_eq!(
            driver_argv(
                "/s/d.py",
                &global,
                Some("/s/c.json"),
                Some(&paths(&["-odd.py", "a b.py"]))
            ),
            args(&[DRIVER_WITH_CACHE, &["apply", "--", "-odd.py", "a b.py"]].concat())
        );
    }

    #[test]
    fn the_opt_in_to_an_unproven_cgc_reaches_the_probe_and_the_worker_not_the_reconcile() {
        let global = args(&["--db", "kuzudb"]);
        let options = DriverOptions {
            global_args: &global,
            allow_unproven_cgc: true,
        };
        assert_eq!(
            driver_argv("/s/d.py", &options, None, None),
            args(&[
                "/s/d.py",
                "--db",
                "kuzudb",
                ALLOW_UNPROVEN_CGC_FLAG,
                "--probe"
            ])
        );
        let worker = worker_argv(
            "/s/d.py",
            &options,
            "/s/c.json",
            std::time::Duration::from_secs(600),
        );
        assert_eq!(
            worker[..4],
            args(&["/s/d.py", "--db", "kuzudb", ALLOW_UNPROVEN_CGC_FLAG])[..]
        );
        assert!(
            !reconcile_argv("/s/d.py", &global, "cgc", &args(&["index", "."]))
                .contains(&ALLOW_UNPROVEN_CGC_FLAG.to_string())
        );
    }

    #[test]
    fn a_worker_that_ended_on_its_own_before_reading_the_request_is_replaced_once() {
        use UnansweredWorkerExit::*;
        assert_eq!(unanswered_worker_exit(Some(0), false, false, false), Retry);
        // Once only: a second clean exit without an answer ends the run.
        assert_eq!(unanswered_worker_exit(Some(0), false, false, true), End);
        // A run being cancelled or out of time ends as it is.
        assert_eq!(unanswered_worker_exit(Some(0), true, false, false), End);
        assert_eq!(unanswered_worker_exit(Some(0), false, true, false), End);
    }

    #[test]
    fn a_worker_that_died_without_answering_ends_the_run() {
        use UnansweredWorkerExit::*;
        // Killed, crashed or failed: it may have been mid-apply.
        assert_eq!(unanswered_worker_exit(None, false, false, false), End);
        assert_eq!(unanswered_worker_exit(Some(1), false, false, false), End);
        assert_eq!(unanswered_worker_exit(Some(137), false, false, false), End);
    }

    #[test]
    fn a_worker_serves_after_its_root_options_and_reads_one_request_a_line() {
        let global = args(&["--db", "kuzudb"]);
        let global = DriverOptions {
            global_args: &global,
            allow_unproven_cgc: false,
        };
        assert_eq!(
            worker_argv(
                "/s/d.py",
                &global,
                "/s/c.json",
                std::time::Duration::from_millis(1500)
            ),
            args(&[DRIVER_WITH_CACHE, &["--idle-exit", "1", "serve"]].concat())
        );
        let probe: serde_json::Value = serde_json::from_str(worker_probe(4).trim_end()).unwrap();
        assert_eq!(probe, serde_json::json!({"serial": 4, "probe": true}));
        let line = worker_request(7, &paths(&["a\nb.py", "c \"d\".py"]), false);
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        let back: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(back["serial"], 7);
        assert_eq!(back["paths"][0], "a\nb.py");
        assert_eq!(back["paths"][1], "c \"d\".py");
    }

    #[test]
    fn a_workers_answer_carries_its_request_and_exit_code() {
        let answer = parse_driver_result(
            r#"CGC_FRESH_RESULT {"ok": true, "mode": "apply", "serial": 3, "exit": 0, "paths": {"a.py": "modified"}}"#,
        )
        .unwrap();
        assert_eq!((answer.serial, answer.exit), (Some(3), Some(0)));
        let one_shot = parse_driver_result(r#"CGC_FRESH_RESULT {"ok": true}"#).unwrap();
        assert_eq!((one_shot.serial, one_shot.exit), (None, None));
    }

    #[test]
    fn shebangs_name_the_interpreter() {
        assert_eq!(
            interpreter_from_shebang("#!/venv/bin/python"),
            Some(("/venv/bin/python".into(), vec![]))
        );
        assert_eq!(
            interpreter_from_shebang("#!/usr/bin/env python3"),
            Some(("python3".into(), vec![]))
        );
        assert_eq!(
            interpreter_from_shebang("#! /usr/bin/python3 -s"),
            Some(("/usr/bin/python3".into(), vec!["-s".into()]))
        );
        assert_eq!(interpreter_from_shebang("\x7fELF"), None);
        assert_eq!(interpreter_from_shebang("#!/usr/bin/env -S python3"), None);
    }

    fn result(line: &str) -> DriverResult {
        parse_driver_result(line).expect("a result line")
    }

    #[test]
    fn the_paths_digest_is_the_drivers() {
        // The same value `protocol.py`'s `paths_digest` gives (its unit
        // test holds it too): UTF-8 bytes, newline-joined, SHA-256 hex.
        assert_eq!(
            paths_digest(&["a.py", "pkg/é.py"]),
            "f56a82439211a8dd6f32d7203fc806b3b65963b465cfd388a6701212021f2505"
        );
    }

    #[test]
    fn a_large_batch_is_accounted_for_by_its_digest() {
        let requested: Vec<String> = (0..300).rev().map(|i| format!("pkg/m{i}.py")).collect();
        let mut sorted: Vec<&str> = requested.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        let ok = SyncRunFacts {
            exit_code: Some(0),
            ..Default::default()
        };
        let line = |digest: &str, count: usize| {
            result(&format!(
                r#"CGC_FRESH_RESULT {{"ok": true, "paths_digest": "{digest}", "paths_accounted": {count}}}"#
            ))
        };
        let exact = line(&paths_digest(&sorted), 300);
        assert_eq!(
            classify_driver_exit(&requested, Some(&exact), &ok),
            DriverVerdict::Outcome(SyncOutcome::Succeeded)
        );
        // One path short, or another set of the same size: not applied.
        let short = line(&paths_digest(&sorted[1..]), 299);
        let mut other = sorted.clone();
        other[0] = "pkg/elsewhere.py";
        other.sort_unstable();
        let other = line(&paths_digest(&other), 300);
        for wrong in [short, other] {
            assert!(matches!(
                classify_driver_exit(&requested, Some(&wrong), &ok),
                DriverVerdict::Outcome(SyncOutcome::Failed { .. })
            ));
        }
    }

    #[test]
    fn driver_success_needs_exit_0_ok_and_every_path_accounted_for() {
        let requested = paths(&["a.py", "b.py"]);
        let ok = SyncRunFacts {
            exit_code: Some(0),
            ..Default::default()
        };
        let full = result(
            r#"CGC_FRESH_RESULT {"ok": true, "paths": {"a.py": "modified", "b.py": "deleted"}}"#,
        );
        assert_eq!(
            classify_driver_exit(&requested, Some(&full), &ok),
            DriverVerdict::Outcome(SyncOutcome::Succeeded)
        );
        let partial = result(r#"CGC_FRESH_RESULT {"ok": true, "paths": {"a.py": "modified"}}"#);
        assert!(matches!(
            classify_driver_exit(&requested, Some(&partial), &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { error }) if error.contains("b.py")
        ));
        assert!(matches!(
            classify_driver_exit(&requested, None, &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
        let said_no = result(r#"CGC_FRESH_RESULT {"ok": false, "error": "boom"}"#);
        assert!(matches!(
            classify_driver_exit(&requested, Some(&said_no), &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { error }) if error.contains("boom")
        ));
        let crashed = SyncRunFacts {
            exit_code: Some(1),
            ..Default::default()
        };
        assert!(matches!(
            classify_driver_exit(&requested, Some(&full), &crashed),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
        // A failing driver's own reason (its self-check names the file)
        // is part of the error.
        let checked = result(
            r#"CGC_FRESH_RESULT {"ok": false, "error": "SelfCheckFailed: /ws/a.py: 4 Function node(s) in the graph, 3 written"}"#,
        );
        assert!(matches!(
            classify_driver_exit(&requested, Some(&checked), &crashed),
            DriverVerdict::Outcome(SyncOutcome::Failed { error })
                if error.contains("code 1") && error.contains("/ws/a.py: 4 Function")
        ));
        let unsupported = SyncRunFacts {
            exit_code: Some(DRIVER_EXIT_UNSUPPORTED),
            ..Default::default()
        };
        let why = result(
            r#"CGC_FRESH_RESULT {"ok": false, "unsupported": true, "error": "not indexed"}"#,
        );
        assert_eq!(
            classify_driver_exit(&requested, Some(&why), &unsupported),
            DriverVerdict::Fallback {
                reason: "not indexed".into()
            }
        );
        let busy = SyncRunFacts {
            exit_code: Some(1),
            lock_error: true,
            ..Default::default()
        };
        assert!(matches!(
            classify_driver_exit(&requested, None, &busy),
            DriverVerdict::Outcome(SyncOutcome::Busy { .. })
        ));
        assert!(parse_driver_result("Loaded configuration from: x").is_none());
    }

    #[test]
    fn a_command_sync_through_the_driver_becomes_the_same_cgc_command() {
        let argv = reconcile_argv(
            "/state/incremental-driver.py",
            &args(&["--db", "kuzudb"]),
            "/venv/bin/cgc",
            &sync_argv(&SyncStrategy::Reconcile, &args(&["--db", "kuzudb"])),
        );
        assert_eq!(
            argv,
            args(&[
                "/state/incremental-driver.py",
                "--db",
                "kuzudb",
                "reconcile",
                "--",
                "/venv/bin/cgc",
                "--db",
                "kuzudb",
                "watch",
                "--sync-on-start",
                "."
            ])
        );
    }

    #[test]
    fn listing_matches_whole_path_cells_only() {
        let table = [
            "┏━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┓",
            "│ ws   │ /tmp/lt/ws │ Project │",
        ];
        assert!(listing_mentions_workspace(table, "/tmp/lt/ws"));
        assert!(!listing_mentions_workspace(table, "/tmp/lt"));
        assert!(!listing_mentions_workspace(table, "/tmp/lt/ws2"));
    }

    #[test]
    fn index_skip_line_is_recognised() {
        assert!(is_index_skip_line(
            "Repository '.' is already indexed with 50 files. Skipping."
        ));
        assert!(!is_index_skip_line(
            "Repository '.' has only 50 of 51 files indexed. Continuing."
        ));
    }
}
