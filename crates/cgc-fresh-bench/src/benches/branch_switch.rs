//! `branch-switch`: what a `git checkout` costs the graph — a shell command
//! that rewrites `switched` of the generated modules (each one's export
//! renamed, and the call and import of it in the next module), or, with
//! `--real-code`, checks the `pip` 24.0 tree out as `pip` 22.3.1
//! (`release_branch`: 330 Python files differ) — then the switch back,
//! each timed from the command's `tool_call` to the settled sync, against
//! `cgc index .` of the same tree. Real CLI, Kùzu.
//!
//! Order: `cgc index`; the manifest recorded by a no-op sync (as `mcp`
//! does); one incremental service takes an untimed one-file edit (the
//! agent's session is under way: the worker runs, the parse cache is
//! warm), then the switch there and the switch back.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::codebase::{self, Codebase, Indexed};
use super::edit_to_fresh::record_manifest;
use super::edit_to_fresh::{
    driver_timings, parse_cache_cell, real_service_env, strategies_ran, timing_cell,
};
use super::generated::Language;
use super::release_branch::{self, ReleaseBranches};
use super::strategies::{await_settled_sync, yes_no};
use super::Tools;
use crate::conn::Conn;
use crate::machine::load_average;
use crate::real_cgc::RealCgc;
use crate::report::{self, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration};

/// The target: a branch switch settles within this share of a
/// from-scratch `cgc index .` of the same tree.
const TARGET_SHARE: f64 = 0.15;

pub struct BranchSwitchOptions {
    pub modules: usize,
    /// Modules whose export the switch renames.
    pub switched: usize,
    /// Switch between two `pip` releases instead of generated modules.
    pub real_code: bool,
}

/// What a switch does to the workspace.
enum Branches {
    /// Renames in the generated modules (`rewrites`).
    Generated {
        plan: Vec<(usize, Vec<usize>)>,
        switched: usize,
    },
    /// A checkout of another `pip` release and back.
    Release(ReleaseBranches),
}

impl Branches {
    /// Rewrites the workspace for the switch `there` (or back); returns
    /// the Python files it touched and two names that tell the branches
    /// apart (present after the switch, absent after it).
    fn switch(&self, ws: &Path, there: bool) -> Result<(usize, String, String)> {
        match self {
            Branches::Generated { plan, switched } => {
                for (j, names) in plan {
                    let path = ws.join(format!("pkg/mod_{j:03}.py"));
                    let text = fs::read_to_string(&path)?;
                    fs::write(&path, rewrite(&text, names, there))?;
                }
                let probe = switched / 2;
                let (renamed, original) = (
                    format!("m{probe:03}_exported"),
                    format!("m{probe:03}_export"),
                );
                Ok(if there {
                    (plan.len(), renamed, original)
                } else {
                    (plan.len(), original, renamed)
                })
            }
            Branches::Release(branches) => {
                let (from, to) = (branches.target(!there), branches.target(there));
                let (present, absent) = release_branch::telltales(from, to)?;
                Ok((release_branch::checkout(ws, to)?, present, absent))
            }
        }
    }
}

/// Where the database's held time goes: the driver's timings from the
/// open to the close (`incremental_applied`), with the titles shown.
const HELD_PHASES: &[(&str, &str)] = &[
    ("db_open_s", "open"),
    ("read_s", "read"),
    ("deletes_s", "deletes"),
    ("nodes_s", "nodes (deletes + adds)"),
    ("links_s", "links"),
    ("links_calls_s", "of which calls"),
    ("post_s", "post"),
    ("self_check_s", "self-check"),
    ("db_close_s", "close"),
    ("db_held_s", "held"),
];

/// One direction of the switch.
struct Switch {
    name: &'static str,
    files: usize,
    settled: Option<Duration>,
    ran: String,
    reported: String,
    right: bool,
    graph: String,
    timings: Option<Value>,
}

/// The files a switch of the first `switched` modules rewrites, each with
/// the names renamed in it (`forward`: `_export` → `_exported`; back: the
/// inverse, exactly, since only the forward switch made `_exported`).
fn rewrites(modules: usize, switched: usize) -> Vec<(usize, Vec<usize>)> {
    (0..=switched.min(modules.saturating_sub(1)))
        .map(|j| {
            let mut names = Vec::new();
            if j >= 1 && j - 1 < switched {
                names.push(j - 1);
            }
            if j < switched {
                names.push(j);
            }
            (j, names)
        })
        .filter(|(_, names)| !names.is_empty())
        .collect()
}

fn rewrite(text: &str, names: &[usize], forward: bool) -> String {
    names.iter().fold(text.to_string(), |text, n| {
        let old = format!("m{n:03}_export");
        let new = format!("m{n:03}_exported");
        if forward {
            text.replace(&old, &new)
        } else {
            text.replace(&new, &old)
        }
    })
}

pub fn run(tools: &Tools, opts: &BranchSwitchOptions) -> Result<()> {
    let codebase = if opts.real_code {
        Codebase::Real(Language::Python)
    } else {
        if opts.switched == 0 || opts.switched > opts.modules {
            bail!("--switched must be between 1 and --modules");
        }
        Codebase::Generated {
            modules: opts.modules,
            language: Language::Python,
        }
    };
    report::section(
        &if opts.real_code {
            format!(
                "branch-switch: the `{}` tree checked out as `{}` by one shell command, and back",
                codebase::PIP.pin(),
                release_branch::OTHER.pin()
            )
        } else {
            format!(
                "branch-switch: {} of {} generated modules rewritten by one shell command, and back",
                opts.switched, opts.modules
            )
        },
        &tools.command_line,
    );
    let sandbox = Sandbox::new(&tools.scratch)?;
    let cgc = RealCgc::new(&tools.real_cgc, &sandbox)?;
    let ws = sandbox.workspace();
    let Indexed {
        described,
        index_time,
        files,
        load_before,
    } = codebase::install_and_index(&codebase, &cgc, &ws, "branch-switch")?;
    let branches = if opts.real_code {
        Branches::Release(ReleaseBranches::fetch(&cgc, sandbox.root())?)
    } else {
        Branches::Generated {
            plan: rewrites(opts.modules, opts.switched),
            switched: opts.switched,
        }
    };
    let state_home = sandbox.root().join("state-shared");
    eprintln!("cgc-fresh-bench: branch-switch: recording the manifest");
    record_manifest(tools, &sandbox, &cgc, &state_home)?;

    let log = sandbox.root().join("serve-incremental.log");
    let env = real_service_env(&cgc, "incremental", &state_home);
    let mut service = Service::start(&tools.service_bin, &sandbox, &env, Log::File(log.clone()))?;
    let mut harness = Conn::harness(&service.socket, "s1")?;

    // The session under way: one untimed edit starts the worker and
    // leaves the parse cache warm.
    let warm = match codebase {
        // The last module: outside the switched ones.
        Codebase::Generated { modules, .. } => codebase::EditTarget {
            rel: format!("pkg/mod_{:03}.py", modules - 1),
            function: format!("m{:03}_helper", modules - 1),
        },
        Codebase::Real(_) => codebase::edit_targets(&codebase, &ws, 1)?
            .into_iter()
            .next()
            .context("no file for the warm-up edit")?,
    };
    harness.send(
        &json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": [warm.rel]}),
    )?;
    let path = ws.join(&warm.rel);
    let text = fs::read_to_string(&path)?;
    let warmed = codebase::rename_definition(&text, &warm.function, "cgc_fresh_bench_warm")
        .context("no function to rename for the warm-up edit")?;
    fs::write(&path, warmed)?;
    harness.send(&json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}))?;
    let (outcome, reported) = await_settled_sync(&mut harness, Duration::from_secs(60 * 60));
    outcome.with_context(|| format!("the warm-up edit did not settle: {reported}"))?;

    let mut switches = Vec::new();
    for (name, there) in [("there", true), ("back", false)] {
        eprintln!("cgc-fresh-bench: branch-switch: {name}");
        let started = Instant::now();
        harness
            .send(&json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}))?;
        let (touched, present, absent) = branches.switch(&ws, there)?;
        harness
            .send(&json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}))?;
        let (outcome, reported) = await_settled_sync(&mut harness, Duration::from_secs(60 * 60));
        let settled = started.elapsed();
        // Idle now: the graph answers the person's own query.
        let (present_count, absent_count) = (
            cgc.functions_named(&present)?,
            cgc.functions_named(&absent)?,
        );
        let ran = strategies_ran(&log);
        let all_incremental = ran.iter().all(|r| r == "incremental");
        switches.push(Switch {
            name,
            files: touched,
            settled: outcome.is_ok().then_some(settled),
            ran: ran.last().cloned().unwrap_or_else(|| "?".into()),
            reported,
            right: present_count == 1 && absent_count == 0,
            graph: format!("`{present}` ×{present_count}, `{absent}` ×{absent_count}"),
            timings: if all_incremental {
                driver_timings(&log).last().cloned()
            } else {
                None
            },
        });
    }
    service.stop(Duration::from_secs(30))?;
    let load_after = load_average();

    let mut table = Table::new(&[
        "switch",
        "files",
        "ran",
        "command → sync settled",
        "÷ `cgc index .`",
        "parse cache",
        "written in batches",
        "database held",
        "driver total",
        "service reported",
        "graph right",
    ]);
    let t = |s: &Switch, key: &str| timing_cell(s.timings.as_ref(), key);
    // How many files' nodes the batched writes wrote (`batched_writes.py`),
    // or that they were refused (then every file was written by itself).
    let batched = |s: &Switch| match s.timings.as_ref() {
        Some(t) if t["batched_refused"].as_f64() == Some(1.0) => "refused".to_string(),
        Some(t) => t["batched_files"]
            .as_f64()
            .map(|n| format!("{n:.0} files"))
            .unwrap_or_else(|| "—".into()),
        None => "—".into(),
    };
    for s in &switches {
        let cache = s.timings.as_ref().map(parse_cache_cell);
        table.row(vec![
            s.name.to_string(),
            fmt_count(s.files as u64),
            s.ran.clone(),
            s.settled
                .map(fmt_duration)
                .unwrap_or_else(|| "—".to_string()),
            s.settled
                .map(|d| format!("{:.3}", share(d, index_time)))
                .unwrap_or_else(|| "—".to_string()),
            cache.unwrap_or_else(|| "—".into()),
            batched(s),
            t(s, "db_held_s"),
            t(s, "total_s"),
            s.reported.clone(),
            format!("{} ({})", yes_no(s.right), s.graph),
        ]);
    }
    report::print_table(&table);
    let mut phases = Table::new(
        &["switch"]
            .into_iter()
            .chain(HELD_PHASES.iter().map(|(_, title)| *title))
            .collect::<Vec<_>>(),
    );
    for s in &switches {
        let mut row = vec![s.name.to_string()];
        row.extend(HELD_PHASES.iter().map(|(key, _)| t(s, key)));
        phases.row(row);
    }
    report::print_table(&phases);
    // How many call rows the link phase sent (`link_call_rows`), and the
    // other link kinds that took time (`links_<kind>_s`, `link_<kind>_rows`).
    for s in &switches {
        let Some(t) = s.timings.as_ref() else {
            continue;
        };
        if let Some(rows) = t["link_call_rows"].as_f64() {
            println!("Switch {}: {rows:.0} call rows written.", s.name);
        }
        let kinds: Vec<String> = t
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| {
                let kind = key.strip_prefix("links_")?.strip_suffix("_s")?;
                let secs = value.as_f64().filter(|&v| v >= 0.05 && kind != "calls")?;
                let rows = t[format!("link_{kind}_rows")].as_f64().unwrap_or(0.0);
                Some(format!("{kind} {secs:.2} s ({rows:.0} rows)"))
            })
            .collect();
        if !kinds.is_empty() {
            println!("Switch {}: other link kinds: {}.", s.name, kinds.join(", "));
        }
    }
    println!();
    let mut summary = Table::new(&["figure", "value", "target", "verdict"]);
    for s in &switches {
        if let Some(settled) = s.settled {
            let ratio = share(settled, index_time);
            summary.row(vec![
                format!("switch {} ÷ `cgc index .`", s.name),
                format!(
                    "{ratio:.3} ({} / {})",
                    fmt_duration(settled),
                    fmt_duration(index_time)
                ),
                format!("≤ {TARGET_SHARE}"),
                report::verdict(ratio <= TARGET_SHARE),
            ]);
        }
    }
    report::print_table(&summary);
    report::note(&format!(
        "Workspace: {described}; `cgc --db kuzudb index .` took {} and found {} files. Load \
         average (1/5/15 min) before indexing: {load_before}; after the last switch: \
         {load_after}. The manifest was recorded by a no-op sync right after the index \
         (`CGC_SYNC_STRATEGY='custom: --version'`). The service: `CGC_SYNC_STRATEGY=incremental`, \
         `CGC_GLOBAL_ARGS=--db kuzudb`, `CGC_FRESHNESS_MIN_SYNC_GAP_MS=0`, other settings \
         default. One untimed one-file edit first (the worker started, the parse cache warm). A \
         switch: a `bash` `tool_call`, the files rewritten ({how}), the `bash` `tool_result`; \
         the service finds the changed files by comparing the tree with its manifest; timed \
         from the `tool_call` until a pushed state with `syncing: false` after one with \
         `syncing: true`; files: the Python files the switch touched. Graph right: `cgc query` \
         finds a function defined only on the branch switched to once and one defined only on \
         the branch left nowhere.",
        fmt_duration(index_time),
        fmt_count(files),
        how = if opts.real_code {
            format!(
                "the workspace made to hold exactly the `{}` wheel's files (sha256 `{}`, \
                 unpacked outside the workspace), and back to `{}`'s",
                release_branch::OTHER.pin(),
                release_branch::OTHER.sha256,
                codebase::PIP.pin()
            )
        } else {
            "module j's export renamed, and in module j+1 the import and call of it".to_string()
        },
    ));
    Ok(())
}

fn share(part: Duration, whole: Duration) -> f64 {
    part.as_secs_f64() / whole.as_secs_f64().max(f64::EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_rewrites_each_renamed_export_and_its_caller_downstream() {
        let plan = rewrites(5, 3);
        assert_eq!(
            plan,
            vec![(0, vec![0]), (1, vec![0, 1]), (2, vec![1, 2]), (3, vec![2])]
        );
        // All of them: the last module has no caller downstream.
        assert_eq!(rewrites(3, 3).last(), Some(&(2, vec![1, 2])));
    }

    #[test]
    fn the_switch_back_restores_the_text_exactly() {
        let text = "from pkg.mod_001 import m001_export\n\n\ndef m002_export(x):\n    return m001_export(x)\n";
        let there = rewrite(text, &[1, 2], true);
        assert!(there.contains("m001_exported(x)") && there.contains("def m002_exported("));
        assert_eq!(rewrite(&there, &[1, 2], false), text);
    }
}
