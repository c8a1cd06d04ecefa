//! The one declaration of every configuration key.
//!
//! Each key is written once, in `settings!` below: its `Key` variant, the
//! field of [`Settings`] it fills, its name in files, its type, its default,
//! the kind of value it accepts (a `Kind` in `value.rs`), its environment
//! variable and its documentation. From that one table the macro derives the
//! `Key` enum and `Key::ALL`, the key's names, the section structs and
//! [`Settings`] with its `Default`, the binding of a raw value into a field
//! (`Settings::assign`) and back out for rendering (`Settings::value_of`), and
//! [`defaults_file`], the text `config/default.toml` must equal (a test in the
//! binary crate, which embeds that file, holds the two together). Adding a
//! key is one entry here.

use serde_json::Value;

use super::settings::{SyncStrategy, WatchMode};
use super::value::{
    CommaList, Count, Flag, Kind, LineBytes, Millis, NonEmptyText, PositiveMillis, RawValue,
    Strategy, Watch, WordList,
};

/// Declares the keys. Per section: its doc, `[name] StructName { keys }`;
/// per key: its doc (the comment `config/default.toml` carries), then
/// `Variant: field = "fileName", Type, default EXPR, kind KIND, env "VAR"`
/// with an optional `note "..."` appended to the `# Env:` line.
macro_rules! settings {
    ($(
        $(#[doc = $section_doc:literal])*
        [$section:ident] $Section:ident {
            $(
                $(#[doc = $doc:literal])*
                $Key:ident: $field:ident = $name:literal, $ty:ty, default $default:expr,
                    kind $kind:ty, env $env:literal $(note $note:literal)?;
            )*
        }
    )*) => {
        $(
            $(#[doc = $section_doc])*
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct $Section {
                $(pub $field: $ty,)*
            }
        )*

        /// The whole effective configuration, one field per key, grouped by
        /// section. Its `Default` is the built-in defaults layer.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Settings {
            $(pub $section: $Section,)*
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings {
                    $($section: $Section {
                        $($field: $default,)*
                    },)*
                }
            }
        }

        /// One configuration key. The set is closed: a name that is not
        /// listed here is unknown and only produces a warning.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Key {
            $($($Key,)*)*
        }

        const KEY_COUNT: usize = [$($(stringify!($Key),)*)*].len();

        impl Key {
            /// Every key, in the order they are documented and rendered.
            pub const ALL: [Key; KEY_COUNT] = [$($(Key::$Key,)*)*];

            /// The dotted name used in files, e.g. `freshness.watcherLivenessMs`.
            pub fn name(self) -> &'static str {
                match self {
                    $($(Key::$Key => concat!(stringify!($section), ".", $name),)*)*
                }
            }

            /// The environment variable that sets this key: `CGC_` + section +
            /// key in SCREAMING_SNAKE, the `cgc.` section not repeated. The
            /// names of the keys the Pi extension already had are kept exactly.
            pub fn env_var(self) -> &'static str {
                match self {
                    $($(Key::$Key => $env,)*)*
                }
            }

            /// The key's documentation: the comment lines `config/default.toml`
            /// writes above it (without the `#`).
            pub fn doc(self) -> &'static [&'static str] {
                match self {
                    $($(Key::$Key => &[$($doc),*],)*)*
                }
            }

            /// What the `# Env:` line adds after the variable name (how a list
            /// is written there), or "".
            fn env_note(self) -> &'static str {
                match self {
                    $($(Key::$Key => concat!("" $(, $note)?),)*)*
                }
            }
        }

        impl Settings {
            /// Validates `raw` for `key` and stores it; on error nothing
            /// changes and the reason is returned.
            pub(crate) fn assign(&mut self, key: Key, raw: RawValue<'_>) -> Result<(), String> {
                match key {
                    $($(Key::$Key => self.$section.$field = <$kind as Kind>::parse(raw)?,)*)*
                }
                Ok(())
            }

            /// The effective value of `key` in the form a file would write it.
            pub fn value_of(&self, key: Key) -> Value {
                match key {
                    $($(Key::$Key => <$kind as Kind>::render(&self.$section.$field),)*)*
                }
            }
        }
    };
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

settings! {
    /// The `freshness.*` keys.
    [freshness] FreshnessSettings {
        /// Managed `cgc watch` child, a tri-state:
        ///   "off"  never spawns a watcher; edits are synced lazily (see autoSync).
        ///   "on"   spawns `cgc watch .` at session start on every backend, embedded
        ///          ones included (the user accepts that the watcher holds the
        ///          embedded database lock).
        ///   "auto" spawns it only when the backend is a server (neo4j,
        ///          falkordb-remote) and the workspace is already indexed.
        /// Boolean compatibility: true means "on" and false means "off", in files and in
        /// the environment. Only the text "auto" selects auto; a boolean never does.
        /// While a watcher runs, "fresh" waits for its log line that it applied each
        /// edited file. An edit its observer cannot see (made during its start-up
        /// reconcile, naming no path, or of .cgcignore/.gitignore) restarts it once
        /// the edits are written; after two restarts in a row that did not catch up,
        /// it is stopped and edits are synced lazily.
        FreshnessWatch: watch = "watch", WatchMode, default WatchMode::Off,
            kind Watch, env "CGC_FRESHNESS_WATCH";
        /// The liveness window (milliseconds, > 0) of a freshly spawned watcher. A watcher
        /// that exits within it is reported as not verified and lazy syncing resumes. It
        /// is verified — and "fresh" recorded on its behalf — only once it prints its
        /// ready line, which follows its start-up reconcile (bounded by
        /// cgc.maintenanceTimeoutMs); a watcher still reconciling when the window ends is
        /// logged as such and verified later, never early.
        FreshnessWatcherLivenessMs: watcher_liveness_ms = "watcherLivenessMs", u64, default 15_000,
            kind PositiveMillis, env "CGC_FRESHNESS_WATCHER_LIVENESS_MS";
        /// How long (milliseconds, > 0) an edit may wait for a verified watcher to apply
        /// it. Meanwhile the state is "syncing" — the watcher is applying it — with no
        /// stale episode and no notice; "fresh" follows its log line that it applied
        /// every edited file. An edit it has not applied within this bound makes the
        /// graph "possibly_stale" since that edit, with the one-time staleness notice.
        FreshnessWatcherApplyMs: watcher_apply_ms = "watcherApplyMs", u64, default 30_000,
            kind PositiveMillis, env "CGC_FRESHNESS_WATCHER_APPLY_MS";
        /// Run a background sync when the first edit of a stale episode is observed.
        /// false = only mark the graph possibly stale and wait for a manual sync.
        FreshnessAutoSync: auto_sync = "autoSync", bool, default true,
            kind Flag, env "CGC_FRESHNESS_AUTO_SYNC";
        /// Automatic whole-repository syncs allowed per agent session (>= 0): CGC's
        /// reconcile, or any sync whose work grows with the repository. A slot is used
        /// when a sync is spawned; a sync skipped because the database is busy uses none;
        /// a manual sync request is not counted. A new session gets a new budget.
        /// Incremental syncs (work that grows with the changed files) have their own
        /// allowance, maxIncrementalSyncsPerSession.
        FreshnessMaxSyncsPerSession: max_syncs_per_session = "maxSyncsPerSession", u32, default 2,
            kind Count, env "CGC_FRESHNESS_MAX_SYNCS_PER_SESSION";
        /// Automatic incremental syncs allowed per agent session (>= 0): syncs whose
        /// work grows with the files that changed, paced by minSyncGapMs. Counted like
        /// maxSyncsPerSession; at the 5 s gap, 500 are 40 minutes of syncs back to back.
        FreshnessMaxIncrementalSyncsPerSession: max_incremental_syncs_per_session = "maxIncrementalSyncsPerSession", u32, default 500,
            kind Count, env "CGC_FRESHNESS_MAX_INCREMENTAL_SYNCS_PER_SESSION";
        /// Batching window (milliseconds, >= 0) between the first edit of an episode and
        /// the sync it triggers, so a burst of edits costs one sync. Measured from the
        /// first edit; later edits do not push it back.
        FreshnessBatchMs: batch_ms = "batchMs", u64, default 500,
            kind Millis, env "CGC_FRESHNESS_BATCH_MS";
        /// An edit counts as written when its tool_result arrives. For harnesses that
        /// send no tool_result, an edit counts as settled this long (milliseconds, > 0)
        /// after its tool call.
        FreshnessSettleMs: settle_ms = "settleMs", u64, default 30_000,
            kind PositiveMillis, env "CGC_FRESHNESS_SETTLE_MS";
        /// The least time (milliseconds, >= 0) between the starts of two syncs,
        /// automatic or manual, follow-ups and retries included, so that a burst of
        /// edits or failures never runs `cgc` back to back.
        FreshnessMinSyncGapMs: min_sync_gap_ms = "minSyncGapMs", u64, default 5_000,
            kind Millis, env "CGC_FRESHNESS_MIN_SYNC_GAP_MS";
        /// Tool names whose calls modify files and so mark the graph possibly stale.
        /// A path CGC does not index (under a directory it skips, matched by its
        /// ignore patterns, .gitignore or .cgcignore, or with a suffix it does not
        /// read) is no edit of the graph.
        /// Shell tools belong in shellTools instead: listed here, every shell
        /// command, read-only ones included, would count as an edit of the named
        /// paths (usually none: the whole workspace).
        FreshnessModifyingTools: modifying_tools = "modifyingTools", Vec<String>, default strings(&["write", "edit", "remove_file", "rename_file", "ctx_patch"]),
            kind CommaList, env "CGC_FRESHNESS_MODIFYING_TOOLS" note ", comma-separated (write,edit,ctx_patch).";
        /// Tool names that run shell commands, which may change any file (sed -i,
        /// git checkout, mv, code generators, formatters). When such a tool's result
        /// arrives, the service compares the workspace's source files (size, mtime,
        /// ctime, inode; no content is read) with the manifest recorded at the last
        /// successful sync: a difference is an observed edit of the changed paths;
        /// no difference changes nothing. Without a manifest (no sync succeeded yet,
        /// or the tree has more files than the manifest holds) every shell command
        /// counts as an edit of the whole workspace. While a watcher runs, the
        /// comparison is with the tree as it was at the command's call instead, and
        /// the changed files wait for the watcher to apply them. An empty list turns
        /// this off.
        FreshnessShellTools: shell_tools = "shellTools", Vec<String>, default strings(&["bash"]),
            kind CommaList, env "CGC_FRESHNESS_SHELL_TOOLS" note ", comma-separated (bash,shell).";
    }
    /// The `cgc.*` keys.
    [cgc] CgcSettings {
        /// The CodeGraphContext CLI to run: a name looked up in PATH or a path.
        /// Non-empty.
        CgcExecutable: executable = "executable", String, default "cgc".to_owned(),
            kind NonEmptyText, env "CGC_EXECUTABLE";
        /// Time bound (milliseconds, > 0) for short `cgc` probes such as `cgc doctor`
        /// during backend detection. On expiry the probe is killed and the answer is
        /// the conservative one (embedded backend).
        CgcTimeoutMs: timeout_ms = "timeoutMs", u64, default 15_000,
            kind PositiveMillis, env "CGC_TIMEOUT_MS";
        /// Time bound (milliseconds, > 0) for maintenance runs: every sync, automatic or
        /// manual. On expiry the sync's process group is terminated.
        CgcMaintenanceTimeoutMs: maintenance_timeout_ms = "maintenanceTimeoutMs", u64, default 600_000,
            kind PositiveMillis, env "CGC_MAINTENANCE_TIMEOUT_MS";
        /// What a sync runs. The working directory is always the workspace root.
        ///   "incremental" CodeGraphContext's own incremental update, applied to exactly
        ///                the files the flight changed by a driver shipped in this
        ///                service (run with the interpreter of `cgc`, after a check that
        ///                the internal API it needs exists); the graph it leaves equals
        ///                a from-scratch index of the same tree (tested on Kùzu and on
        ///                a FalkorDB server, falkordb-remote). A sync of the whole
        ///                workspace (a shell edit), more than 256 changed files, a
        ///                failed API check, or a change the driver cannot apply runs
        ///                "reconcile" instead, and the status says so; after an
        ///                incremental sync that did not finish, the next one reconciles.
        ///                Parses of unchanged Python files are kept between syncs in
        ///                the workspace's state directory
        ///                (`incremental-parse-cache.json`). The driver stays running
        ///                between syncs (CodeGraphContext imported once) and opens the
        ///                database only while it applies one; it ends after 10 idle
        ///                minutes and with the service.
        ///   "reconcile"  `cgc watch --sync-on-start .`, stopped once it reports that it
        ///                is watching: applies edits, additions and deletions without
        ///                dropping the graph. It gets one SIGINT and then finishes on
        ///                its own; only maintenanceTimeoutMs bounds that exit (the
        ///                supervisor's stopGraceMs does not apply: a slow but clean exit
        ///                on a loaded machine is not a failure).
        ///   "update"     `cgc update . --quiet`: deletes and rebuilds the repository's
        ///                graph (partial while it runs).
        ///   "index"      `cgc index .`: only useful where `cgc index` is incremental;
        ///                when it reports that it skipped an already indexed
        ///                repository the sync does not count as applied.
        ///   custom       an array of arguments run after the executable and globalArgs,
        ///                e.g. ["index", ".", "--force"]; exit status 0 counts as
        ///                success, so the command must apply every edit. Written as a
        ///                string (in the environment, or in a file) it is the word
        ///                `custom:` followed by whitespace-separated arguments:
        ///                "custom: index . --force" (no quoting; an argument that
        ///                contains spaces needs the array form in a file).
        /// Names are matched case-insensitively.
        CgcSyncStrategy: sync_strategy = "syncStrategy", SyncStrategy, default SyncStrategy::Incremental,
            kind Strategy, env "CGC_SYNC_STRATEGY";
        /// Arguments placed between the executable and the subcommand of every `cgc`
        /// run, e.g. ["--db", "kuzudb"] (cgc's root options must come first).
        CgcGlobalArgs: global_args = "globalArgs", Vec<String>, default Vec::new(),
            kind WordList, env "CGC_GLOBAL_ARGS" note ", whitespace-separated (--db kuzudb); no quoting.";
        /// Run the incremental driver on a CodeGraphContext version it was not
        /// proven exact against. false: on any other version than the proven ones
        /// (the driver's `cgc_seam.py`; 0.6.13 today) the driver patches nothing and
        /// every sync is CGC's own reconcile, with a notice that says why. true: the
        /// driver runs anyway (it patches CGC's private functions, so a release that
        /// changed what they do could leave a wrong graph) and the sync's strategy
        /// note says so.
        CgcAllowUnprovenVersion: allow_unproven_version = "allowUnprovenVersion", bool, default false,
            kind Flag, env "CGC_ALLOW_UNPROVEN_VERSION";
    }
    /// The `lifecycle.*` keys.
    [lifecycle] LifecycleSettings {
        /// Consent to create an index. false: the service never indexes a workspace
        /// that has none (no `.codegraphcontext/` directory); it only keeps an existing
        /// index fresh. true: a sync may create the index.
        LifecycleAutoCreate: auto_create = "autoCreate", bool, default false,
            kind Flag, env "CGC_LIFECYCLE_AUTO_CREATE";
    }
    /// The `service.*` keys.
    [service] ServiceSettings {
        /// Exit this long (milliseconds, >= 0) after the last client disconnected.
        /// 0 = never exit for idleness (socket activation starts it again on demand
        /// either way).
        ServiceIdleExitMs: idle_exit_ms = "idleExitMs", u64, default 0,
            kind Millis, env "CGC_SERVICE_IDLE_EXIT_MS";
        /// Longest protocol line accepted from a client, in bytes (1024..=16777216).
        /// A longer line gets an error frame and the connection is closed.
        ServiceMaxLineBytes: max_line_bytes = "maxLineBytes", usize, default 65_536,
            kind LineBytes, env "CGC_SERVICE_MAX_LINE_BYTES";
    }
    /// The `mcp.*` keys.
    [mcp] McpSettings {
        /// Read-your-writes bound for `cgc-fresh mcp` (milliseconds, >= 0): a tool
        /// call that arrives while the workspace has edits the graph does not cover
        /// yet (unsettled, unsynced, or a sync under way) waits this long at most for
        /// the sync that covers them, then is answered from the graph as it is. The
        /// answer never says which; the wait is logged. 0 = never wait.
        McpReadYourWritesMs: read_your_writes_ms = "readYourWritesMs", u64, default 3_000,
            kind Millis, env "CGC_MCP_READ_YOUR_WRITES_MS";
        /// How long (milliseconds, >= 0) the worker keeps the database open after
        /// answering a `cgc-fresh mcp` tool call, for the next call to use as it is.
        /// 0 = closed after every call: no process holds an embedded database
        /// between requests. More makes a burst of calls several times faster, but
        /// the person's own `cgc` finds the database locked until the hold has
        /// passed (the service releases it before its own syncs). Ignored with
        /// `freshness.watch = "on"` (the watcher needs the database).
        McpHoldDatabaseMs: hold_database_ms = "holdDatabaseMs", u64, default 0,
            kind Millis, env "CGC_MCP_HOLD_DATABASE_MS";
    }
    /// The `supervisor.*` keys.
    [supervisor] SupervisorSettings {
        /// Grace (milliseconds, > 0) between the steps of stopping a child process
        /// group: SIGINT, then SIGTERM, then SIGKILL.
        SupervisorStopGraceMs: stop_grace_ms = "stopGraceMs", u64, default 2_000,
            kind PositiveMillis, env "CGC_SUPERVISOR_STOP_GRACE_MS";
    }
}

/// The top of `config/default.toml`, above the first section.
const DEFAULTS_FILE_HEADER: &str = r#"# cgc-fresh built-in defaults.
#
# This file is compiled into the binary and is the first configuration layer.
# Every key the service understands is listed here with its meaning, its
# default and the environment variable that overrides it. The keys are declared
# in crates/cgc-fresh-core/src/config/schema.rs; a test keeps this file
# identical to what those declarations say.
#
# Layers, later wins:
#   1. these defaults
#   2. user file       $PI_CODING_AGENT_DIR/cgc.json, else ~/.pi/agent/cgc.json
#   3. workspace file  <workspace>/.pi/cgc.json
#   4. --config FILE   (TOML if the name ends in .toml, JSON otherwise)
#   5. environment     the CGC_* variables named below
#
# The user and workspace files are the JSON files the Pi `cgc` extension
# already reads, so an existing setup carries over unchanged. In any file a key
# may be written nested ({"freshness": {"watch": "auto"}}, or a TOML table as
# below) or dotted ({"freshness.watch": "auto"}).
#
# Values:
#   - An invalid value is skipped with a warning naming the key, the value and
#     the layer; the value from the previous layer stands. Loading never fails.
#   - An unknown key is reported with a warning and otherwise ignored.
#   - A JSON `null`, or an environment variable that is empty (or only
#     whitespace), means "not set in this layer".
#   - Booleans: true/false in files; in files and the environment the strings
#     true, yes, 1 and false, no, 0 (any case, surrounding spaces ignored).
#   - Integers: a number in files; a string of decimal digits anywhere.
#     Millisecond values are at most 31536000000 (365 days).
"#;

/// The text of `config/default.toml`: the header, then every key with its
/// documentation, its environment variable and its default value, section by
/// section.
pub fn defaults_file() -> String {
    let defaults = Settings::default();
    let mut text = DEFAULTS_FILE_HEADER.to_owned();
    let mut current_section = "";
    for key in Key::ALL {
        let (section, name) = key.name().split_once('.').unwrap_or(("", key.name()));
        text.push('\n');
        if section != current_section {
            text.push_str(&format!("[{section}]\n"));
            current_section = section;
        }
        for line in key.doc() {
            text.push_str(&format!("#{line}\n"));
        }
        text.push_str(&format!("# Env: {}{}\n", key.env_var(), key.env_note()));
        text.push_str(&format!(
            "{name} = {}\n",
            toml_literal(&defaults.value_of(key))
        ));
    }
    text
}

/// A default value as TOML writes it. Defaults are strings, integers,
/// booleans and arrays of strings, whose JSON spelling is valid TOML.
fn toml_literal(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_literal).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing back what `value_of` reads must reproduce the same settings:
    /// the render is a valid configuration file.
    #[test]
    fn every_value_read_back_assigns_to_itself() {
        let defaults = Settings::default();
        let mut copy = Settings::default();
        copy.cgc.sync_strategy = SyncStrategy::Update;
        for key in Key::ALL {
            let value = defaults.value_of(key);
            copy.assign(key, RawValue::Tree(&value))
                .unwrap_or_else(|reason| panic!("{key}: {reason}"));
        }
        assert_eq!(copy, defaults);
    }

    #[test]
    fn every_key_is_documented_with_its_variable() {
        let file = defaults_file();
        for key in Key::ALL {
            assert!(!key.doc().is_empty(), "{key} has no documentation");
            let line = format!("# Env: {}", key.env_var());
            assert!(file.contains(&line), "{key}: {line:?}");
        }
    }
}
