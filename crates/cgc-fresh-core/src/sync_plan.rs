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
mod tests;
