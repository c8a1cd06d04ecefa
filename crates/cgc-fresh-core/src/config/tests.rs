//! Scenario tests for the layered configuration. Test names quote the spec's
//! scenarios ("Tri-state watcher configuration") where they prove one.

use serde_json::{json, Value};

use super::*;

fn user() -> Layer {
    Layer::User {
        path: "/home/u/.pi/agent/cgc.json".into(),
    }
}

fn workspace() -> Layer {
    Layer::Workspace {
        path: "/repo/.pi/cgc.json".into(),
    }
}

fn explicit_file() -> Layer {
    Layer::File {
        path: "/etc/cgc-fresh.toml".into(),
    }
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// A file layer that sets one key, written with its dotted name.
fn dotted(key: Key, value: Value) -> Value {
    let mut object = serde_json::Map::new();
    object.insert(key.name().to_owned(), value);
    Value::Object(object)
}

fn only_warning(config: &LayeredConfig) -> &ConfigWarning {
    match config.warnings() {
        [warning] => warning,
        other => panic!("expected exactly one warning, got {other:?}"),
    }
}

// ---- Scenario: Default stays off ------------------------------------------

#[test]
fn default_stays_off() {
    let mut config = LayeredConfig::new();
    assert_eq!(config.settings().freshness.watch, WatchMode::Off);
    assert_eq!(config.origin(Key::FreshnessWatch), &Layer::Defaults);

    // Layers that set other keys leave it off.
    config.apply_tree(user(), &json!({"freshness": {"autoSync": false}}));
    config.apply_tree(workspace(), &json!({"cgc.executable": "/opt/cgc"}));
    config.apply_env(env(&[("CGC_TIMEOUT_MS", "100"), ("PATH", "/bin")]));
    assert_eq!(config.settings().freshness.watch, WatchMode::Off);
    assert_eq!(config.origin(Key::FreshnessWatch), &Layer::Defaults);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

// ---- Scenario: Existing boolean config keeps its meaning -------------------

#[test]
fn existing_boolean_config_keeps_its_meaning() {
    for (flag, mode) in [(true, WatchMode::On), (false, WatchMode::Off)] {
        let mut config = LayeredConfig::new();
        // Start from "auto" so `false` visibly changes something.
        config.apply_tree(user(), &json!({"freshness": {"watch": "auto"}}));
        config.apply_tree(workspace(), &json!({"freshness": {"watch": flag}}));
        assert_eq!(
            config.settings().freshness.watch,
            mode,
            "file boolean {flag}"
        );
        assert_eq!(config.origin(Key::FreshnessWatch), &workspace());
        assert!(config.warnings().is_empty());
    }

    let spellings = [
        ("true", WatchMode::On),
        ("TRUE", WatchMode::On),
        ("yes", WatchMode::On),
        (" Yes ", WatchMode::On),
        ("1", WatchMode::On),
        ("false", WatchMode::Off),
        ("no", WatchMode::Off),
        ("NO", WatchMode::Off),
        ("0", WatchMode::Off),
    ];
    for (text, mode) in spellings {
        for layer_value in [json!("auto"), json!(text)] {
            // The same text is accepted in a file layer and in the environment.
            let mut config = LayeredConfig::new();
            config.apply_tree(workspace(), &json!({"freshness.watch": layer_value}));
            config.apply_env(env(&[("CGC_FRESHNESS_WATCH", text)]));
            assert_eq!(config.settings().freshness.watch, mode, "env {text:?}");
            assert_eq!(config.origin(Key::FreshnessWatch), &Layer::Env);
            assert!(config.warnings().is_empty());
        }
        let mut config = LayeredConfig::new();
        config.apply_tree(workspace(), &json!({"freshness": {"watch": text}}));
        assert_eq!(
            config.settings().freshness.watch,
            mode,
            "file text {text:?}"
        );
    }
}

// ---- Scenario: Explicit auto enables the gated mode ------------------------

#[test]
fn explicit_auto_enables_the_gated_mode() {
    for text in ["auto", "AUTO", " Auto "] {
        let mut config = LayeredConfig::new();
        config.apply_tree(workspace(), &json!({"freshness": {"watch": text}}));
        assert_eq!(
            config.settings().freshness.watch,
            WatchMode::Auto,
            "file {text:?}"
        );
        assert_eq!(config.origin(Key::FreshnessWatch), &workspace());

        let mut config = LayeredConfig::new();
        config.apply_tree(workspace(), &json!({"freshness": {"watch": true}}));
        config.apply_env(env(&[("CGC_FRESHNESS_WATCH", text)]));
        assert_eq!(
            config.settings().freshness.watch,
            WatchMode::Auto,
            "env {text:?}"
        );
        assert_eq!(config.origin(Key::FreshnessWatch), &Layer::Env);
        assert!(config.warnings().is_empty());
    }
}

// ---- Scenario: Invalid value is skipped with a warning ---------------------

#[test]
fn invalid_value_is_skipped_with_a_warning() {
    // File layer: the user file's value stands.
    let mut config = LayeredConfig::new();
    config.apply_tree(user(), &json!({"freshness": {"watch": "on"}}));
    config.apply_tree(workspace(), &json!({"freshness": {"watch": "sometimes"}}));
    assert_eq!(config.settings().freshness.watch, WatchMode::On);
    assert_eq!(config.origin(Key::FreshnessWatch), &user());
    let warning = only_warning(&config);
    assert_eq!(
        warning,
        &ConfigWarning::InvalidValue {
            key: Key::FreshnessWatch,
            value: "\"sometimes\"".to_owned(),
            layer: workspace(),
            reason: "expected \"off\", \"on\", \"auto\" or a boolean".to_owned(),
        }
    );
    let text = warning.to_string();
    for part in [
        "freshness.watch",
        "\"sometimes\"",
        "workspace (/repo/.pi/cgc.json)",
    ] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }

    // Environment layer: the workspace file's value stands.
    let mut config = LayeredConfig::new();
    config.apply_tree(workspace(), &json!({"freshness": {"watch": "auto"}}));
    config.apply_env(env(&[("CGC_FRESHNESS_WATCH", "maybe")]));
    assert_eq!(config.settings().freshness.watch, WatchMode::Auto);
    assert_eq!(config.origin(Key::FreshnessWatch), &workspace());
    let warning = only_warning(&config);
    assert_eq!(warning.key_name(), Some("freshness.watch"));
    assert_eq!(warning.value(), Some("\"maybe\""));
    assert_eq!(warning.layer(), &Layer::Env);
    let text = warning.to_string();
    for part in [
        "freshness.watch",
        "\"maybe\"",
        "environment (CGC_FRESHNESS_WATCH)",
    ] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }

    // Values of the wrong JSON type are invalid too, and the default stands.
    for bad in [json!(1), json!(["on"]), json!({"mode": "on"}), json!("")] {
        let mut config = LayeredConfig::new();
        config.apply_tree(workspace(), &json!({"freshness": {"watch": bad}}));
        assert_eq!(config.settings().freshness.watch, WatchMode::Off, "{bad}");
        assert_eq!(config.origin(Key::FreshnessWatch), &Layer::Defaults);
        assert_eq!(only_warning(&config).key_name(), Some("freshness.watch"));
    }
}

// ---- freshness.watcherLivenessMs: a positive integer, default 15000 ---------

#[test]
fn watcher_liveness_ms_must_be_a_positive_integer() {
    assert_eq!(
        LayeredConfig::new()
            .settings()
            .freshness
            .watcher_liveness_ms,
        15_000
    );

    let bad_file_values = [
        json!(0),
        json!(-1),
        json!(1.5),
        json!("abc"),
        json!(true),
        json!(""),
    ];
    for bad in bad_file_values {
        let mut config = LayeredConfig::new();
        config.apply_tree(user(), &json!({"freshness": {"watcherLivenessMs": 4000}}));
        config.apply_tree(
            workspace(),
            &json!({"freshness": {"watcherLivenessMs": bad}}),
        );
        assert_eq!(
            config.settings().freshness.watcher_liveness_ms,
            4000,
            "{bad}"
        );
        assert_eq!(config.origin(Key::FreshnessWatcherLivenessMs), &user());
        let warning = only_warning(&config);
        assert_eq!(warning.key_name(), Some("freshness.watcherLivenessMs"));
        assert_eq!(warning.layer(), &workspace());
    }
    for bad in ["0", "-3", "1.5", "abc", "15s", "1e4"] {
        let mut config = LayeredConfig::new();
        config.apply_env(env(&[("CGC_FRESHNESS_WATCHER_LIVENESS_MS", bad)]));
        assert_eq!(
            config.settings().freshness.watcher_liveness_ms,
            15_000,
            "{bad}"
        );
        assert_eq!(only_warning(&config).layer(), &Layer::Env);
    }

    let mut config = LayeredConfig::new();
    config.apply_tree(
        workspace(),
        &json!({"freshness": {"watcherLivenessMs": "25000"}}),
    );
    assert_eq!(config.settings().freshness.watcher_liveness_ms, 25_000);
    config.apply_env(env(&[("CGC_FRESHNESS_WATCHER_LIVENESS_MS", " 20000 ")]));
    assert_eq!(config.settings().freshness.watcher_liveness_ms, 20_000);
    assert!(config.warnings().is_empty());
}

#[test]
fn zero_is_allowed_only_where_it_has_a_meaning() {
    let zero_ok = [
        Key::FreshnessMaxSyncsPerSession,
        Key::FreshnessBatchMs,
        Key::ServiceIdleExitMs,
    ];
    let zero_invalid = [
        Key::FreshnessWatcherLivenessMs,
        Key::FreshnessSettleMs,
        Key::CgcTimeoutMs,
        Key::CgcMaintenanceTimeoutMs,
        Key::ServiceMaxLineBytes,
        Key::SupervisorStopGraceMs,
    ];
    for key in zero_ok {
        let mut config = LayeredConfig::new();
        config.apply_env(env(&[(key.env_var(), "0")]));
        assert_eq!(config.settings().value_of(key), json!(0), "{key}");
        assert!(config.warnings().is_empty(), "{key}");
    }
    for key in zero_invalid {
        let mut config = LayeredConfig::new();
        config.apply_env(env(&[(key.env_var(), "0")]));
        assert_eq!(config.origin(key), &Layer::Defaults, "{key}");
        assert_eq!(only_warning(&config).key_name(), Some(key.name()));
    }
}

#[test]
fn bounded_values_reject_what_would_break_the_service() {
    let mut config = LayeredConfig::new();
    let too_long = (MAX_MILLIS + 1).to_string();
    config.apply_env(env(&[
        ("CGC_MAINTENANCE_TIMEOUT_MS", too_long.as_str()),
        ("CGC_SERVICE_MAX_LINE_BYTES", "100"),
        ("CGC_EXECUTABLE", " \t"),
    ]));
    // The blank executable is "unset", the other two are invalid.
    assert_eq!(config.settings(), &Settings::default());
    assert_eq!(config.warnings().len(), 2, "{:?}", config.warnings());

    let mut config = LayeredConfig::new();
    config.apply_tree(workspace(), &json!({"cgc": {"executable": "  "}}));
    assert_eq!(config.settings().cgc.executable, "cgc");
    assert_eq!(only_warning(&config).key_name(), Some("cgc.executable"));
}

// ---- Precedence: defaults < user < workspace < --config < environment ------

/// Applies `file_values` through the user, workspace and `--config` layers
/// and then `env_text` through the environment, checking after each step
/// that the newest layer's value is effective and recorded as the origin,
/// and that no other key moved.
fn check_precedence(key: Key, file_values: [Value; 3], env_text: &str, env_expected: Value) {
    let mut config = LayeredConfig::new();
    assert_eq!(config.origin(key), &Layer::Defaults);
    let mut previous = config.settings().value_of(key);
    for (layer, value) in [user(), workspace(), explicit_file()]
        .into_iter()
        .zip(file_values)
    {
        assert_ne!(
            value, previous,
            "{key}: pick a value that differs from the last layer's"
        );
        config.apply_tree(layer.clone(), &dotted(key, value.clone()));
        assert_eq!(config.settings().value_of(key), value, "{key} from {layer}");
        assert_eq!(config.origin(key), &layer, "{key}");
        previous = value;
    }
    assert_ne!(
        env_expected, previous,
        "{key}: pick an env value that differs"
    );
    config.apply_env(env(&[(key.env_var(), env_text)]));
    assert_eq!(
        config.settings().value_of(key),
        env_expected,
        "{key} from env"
    );
    assert_eq!(config.origin(key), &Layer::Env, "{key}");
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    for other in Key::ALL.into_iter().filter(|other| *other != key) {
        assert_eq!(config.origin(other), &Layer::Defaults, "{other} moved");
        assert_eq!(
            config.settings().value_of(other),
            Settings::default().value_of(other)
        );
    }
}

macro_rules! precedence_tests {
    ($($name:ident: $key:expr, [$user:expr, $workspace:expr, $file:expr], $env:expr => $env_expected:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check_precedence($key, [json!($user), json!($workspace), json!($file)], $env, json!($env_expected));
            }
        )*

        /// The keys the tests above cover, in the order they are written.
        const PRECEDENCE_TESTED: &[Key] = &[$($key),*];
    };
}

precedence_tests! {
    precedence_freshness_watch: Key::FreshnessWatch, ["on", "auto", "off"], "true" => "on";
    precedence_freshness_watcher_liveness_ms: Key::FreshnessWatcherLivenessMs, [1000, 2000, 3000], "4000" => 4000;
    precedence_freshness_watcher_apply_ms: Key::FreshnessWatcherApplyMs, [1000, 2000, 3000], "4000" => 4000;
    precedence_freshness_auto_sync: Key::FreshnessAutoSync, [false, true, false], "yes" => true;
    precedence_freshness_max_syncs_per_session: Key::FreshnessMaxSyncsPerSession, [3, 0, 5], "7" => 7;
    precedence_freshness_max_incremental_syncs_per_session: Key::FreshnessMaxIncrementalSyncsPerSession, [3, 0, 5], "7" => 7;
    precedence_freshness_batch_ms: Key::FreshnessBatchMs, [0, 100, 200], "300" => 300;
    precedence_freshness_settle_ms: Key::FreshnessSettleMs, [1000, 2000, 3000], "4000" => 4000;
    precedence_freshness_min_sync_gap_ms: Key::FreshnessMinSyncGapMs, [0, 1000, 2000], "3000" => 3000;
    precedence_freshness_modifying_tools: Key::FreshnessModifyingTools,
        [["write"], ["write", "bash"], ["edit"]], "write, edit,bash" => ["write", "edit", "bash"];
    precedence_freshness_shell_tools: Key::FreshnessShellTools,
        [["sh"], ["bash", "shell"], ["bash"]], "zsh, bash" => ["zsh", "bash"];
    precedence_cgc_executable: Key::CgcExecutable, ["/usr/bin/cgc", "cgc2", "./cgc"], "/opt/cgc" => "/opt/cgc";
    precedence_cgc_timeout_ms: Key::CgcTimeoutMs, [1000, 2000, 3000], "4000" => 4000;
    precedence_cgc_maintenance_timeout_ms: Key::CgcMaintenanceTimeoutMs, [1000, 2000, 3000], "4000" => 4000;
    precedence_cgc_sync_strategy: Key::CgcSyncStrategy,
        ["update", "index", ["index", ".", "--force"]], "custom: update . --quiet" => ["update", ".", "--quiet"];
    precedence_cgc_global_args: Key::CgcGlobalArgs,
        [["--db", "kuzudb"], ["--db", "neo4j"], ["--db-path", "/tmp/db dir"]], "--db falkordb" => ["--db", "falkordb"];
    precedence_cgc_allow_unproven_version: Key::CgcAllowUnprovenVersion, [true, false, true], "0" => false;
    precedence_lifecycle_auto_create: Key::LifecycleAutoCreate, [true, false, true], "0" => false;
    precedence_service_idle_exit_ms: Key::ServiceIdleExitMs, [1000, 2000, 3000], "0" => 0;
    precedence_service_max_line_bytes: Key::ServiceMaxLineBytes, [2048, 4096, 8192], "16384" => 16384;
    precedence_mcp_read_your_writes_ms: Key::McpReadYourWritesMs, [0, 1000, 2000], "3000" => 3000;
    precedence_mcp_hold_database_ms: Key::McpHoldDatabaseMs, [500, 1000, 2000], "3000" => 3000;
    precedence_supervisor_stop_grace_ms: Key::SupervisorStopGraceMs, [1000, 2000, 3000], "4000" => 4000;
}

#[test]
fn precedence_covers_every_key() {
    // One precedence test above per key, in the documented order.
    assert_eq!(PRECEDENCE_TESTED, Key::ALL);
}

// ---- The exact environment variable names ----------------------------------

#[test]
fn env_var_names_set_exactly_their_keys() {
    // Written out literally: these names are a public interface (several are
    // shared with the Pi extension), so a rename must fail this test.
    let table = [
        ("CGC_FRESHNESS_WATCH", "freshness.watch", "on", json!("on")),
        (
            "CGC_FRESHNESS_WATCHER_LIVENESS_MS",
            "freshness.watcherLivenessMs",
            "999",
            json!(999),
        ),
        (
            "CGC_FRESHNESS_WATCHER_APPLY_MS",
            "freshness.watcherApplyMs",
            "998",
            json!(998),
        ),
        (
            "CGC_FRESHNESS_AUTO_SYNC",
            "freshness.autoSync",
            "false",
            json!(false),
        ),
        (
            "CGC_FRESHNESS_MAX_SYNCS_PER_SESSION",
            "freshness.maxSyncsPerSession",
            "9",
            json!(9),
        ),
        (
            "CGC_FRESHNESS_MAX_INCREMENTAL_SYNCS_PER_SESSION",
            "freshness.maxIncrementalSyncsPerSession",
            "9",
            json!(9),
        ),
        ("CGC_FRESHNESS_BATCH_MS", "freshness.batchMs", "9", json!(9)),
        (
            "CGC_FRESHNESS_SETTLE_MS",
            "freshness.settleMs",
            "9",
            json!(9),
        ),
        (
            "CGC_FRESHNESS_MODIFYING_TOOLS",
            "freshness.modifyingTools",
            "bash",
            json!(["bash"]),
        ),
        (
            "CGC_FRESHNESS_SHELL_TOOLS",
            "freshness.shellTools",
            "bash,sh",
            json!(["bash", "sh"]),
        ),
        (
            "CGC_EXECUTABLE",
            "cgc.executable",
            "/x/cgc",
            json!("/x/cgc"),
        ),
        ("CGC_TIMEOUT_MS", "cgc.timeoutMs", "9", json!(9)),
        (
            "CGC_MAINTENANCE_TIMEOUT_MS",
            "cgc.maintenanceTimeoutMs",
            "9",
            json!(9),
        ),
        (
            "CGC_SYNC_STRATEGY",
            "cgc.syncStrategy",
            "update",
            json!("update"),
        ),
        (
            "CGC_GLOBAL_ARGS",
            "cgc.globalArgs",
            "--db kuzudb",
            json!(["--db", "kuzudb"]),
        ),
        (
            "CGC_ALLOW_UNPROVEN_VERSION",
            "cgc.allowUnprovenVersion",
            "true",
            json!(true),
        ),
        (
            "CGC_LIFECYCLE_AUTO_CREATE",
            "lifecycle.autoCreate",
            "yes",
            json!(true),
        ),
        (
            "CGC_FRESHNESS_MIN_SYNC_GAP_MS",
            "freshness.minSyncGapMs",
            "9",
            json!(9),
        ),
        (
            "CGC_SERVICE_IDLE_EXIT_MS",
            "service.idleExitMs",
            "9",
            json!(9),
        ),
        (
            "CGC_SERVICE_MAX_LINE_BYTES",
            "service.maxLineBytes",
            "2048",
            json!(2048),
        ),
        (
            "CGC_MCP_READ_YOUR_WRITES_MS",
            "mcp.readYourWritesMs",
            "9",
            json!(9),
        ),
        (
            "CGC_MCP_HOLD_DATABASE_MS",
            "mcp.holdDatabaseMs",
            "9",
            json!(9),
        ),
        (
            "CGC_SUPERVISOR_STOP_GRACE_MS",
            "supervisor.stopGraceMs",
            "9",
            json!(9),
        ),
    ];
    assert_eq!(table.len(), Key::ALL.len());
    for (var, name, text, expected) in table {
        let key = Key::from_name(name).unwrap_or_else(|| panic!("{name} is not a key"));
        assert_eq!(key.env_var(), var);
        let mut config = LayeredConfig::new();
        config.apply_env(env(&[(var, text)]));
        assert_eq!(config.settings().value_of(key), expected, "{var}");
        for other in Key::ALL {
            let expected_origin = if other == key {
                Layer::Env
            } else {
                Layer::Defaults
            };
            assert_eq!(config.origin(other), &expected_origin, "{var} vs {other}");
        }
    }
}

#[test]
fn other_environment_variables_are_ignored() {
    let mut config = LayeredConfig::new();
    config.apply_env(env(&[
        ("cgc_freshness_watch", "on"),
        ("CGC_FRESHNESS_WATCH_", "on"),
        ("CGC_RUNTIME_DB_TYPE", "neo4j"),
        ("FRESHNESS_WATCH", "on"),
    ]));
    assert_eq!(config, LayeredConfig::new());
}

#[test]
fn empty_env_var_and_json_null_leave_the_key_unset() {
    let mut config = LayeredConfig::new();
    config.apply_tree(user(), &json!({"freshness": {"watch": "on"}}));
    config.apply_tree(workspace(), &json!({"freshness": {"watch": null}}));
    config.apply_env(env(&[
        ("CGC_FRESHNESS_WATCH", ""),
        ("CGC_GLOBAL_ARGS", "  "),
    ]));
    assert_eq!(config.settings().freshness.watch, WatchMode::On);
    assert_eq!(config.origin(Key::FreshnessWatch), &user());
    assert_eq!(config.origin(Key::CgcGlobalArgs), &Layer::Defaults);
    assert!(config.warnings().is_empty());
}

/// The loader hands the environment layer over like a file layer, keyed by
/// dotted names; its strings are still read as variables' text.
#[test]
fn an_environment_tree_reads_its_strings_as_variable_text() {
    let mut config = LayeredConfig::new();
    config.apply_tree(workspace(), &json!({"freshness": {"watch": "on"}}));
    config.apply_tree(
        Layer::Env,
        &json!({
            "freshness.watch": "",
            "freshness.modifyingTools": "write, bash",
            "cgc.globalArgs": "--db  kuzudb",
        }),
    );
    assert_eq!(config.settings().freshness.watch, WatchMode::On);
    assert_eq!(config.origin(Key::FreshnessWatch), &workspace());
    assert_eq!(
        config.settings().value_of(Key::FreshnessModifyingTools),
        json!(["write", "bash"])
    );
    assert_eq!(config.origin(Key::CgcGlobalArgs), &Layer::Env);
    assert_eq!(config.settings().cgc.global_args, ["--db", "kuzudb"]);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());

    let mut from_vars = LayeredConfig::new();
    from_vars.apply_tree(workspace(), &json!({"freshness": {"watch": "on"}}));
    from_vars.apply_env(env(&[
        ("CGC_FRESHNESS_WATCH", ""),
        ("CGC_FRESHNESS_MODIFYING_TOOLS", "write, bash"),
        ("CGC_GLOBAL_ARGS", "--db  kuzudb"),
    ]));
    assert_eq!(from_vars, config);
}

// ---- Key spelling in files ----------------------------------------------------

#[test]
fn dotted_and_nested_keys_are_equivalent() {
    let nested = json!({
        "freshness": {"watch": "auto", "watcherLivenessMs": 5000},
        "cgc": {"globalArgs": ["--db", "neo4j"]},
    });
    let dotted_form = json!({
        "freshness.watch": "auto",
        "freshness.watcherLivenessMs": 5000,
        "cgc.globalArgs": ["--db", "neo4j"],
    });
    let mixed = json!({
        "freshness": {"watch": "auto"},
        "freshness.watcherLivenessMs": 5000,
        "cgc": {"globalArgs": ["--db", "neo4j"]},
    });
    let mut results = Vec::new();
    for tree in [nested, dotted_form, mixed] {
        let mut config = LayeredConfig::new();
        config.apply_tree(workspace(), &tree);
        assert!(
            config.warnings().is_empty(),
            "{tree}: {:?}",
            config.warnings()
        );
        assert_eq!(config.settings().freshness.watch, WatchMode::Auto);
        assert_eq!(config.origin(Key::FreshnessWatcherLivenessMs), &workspace());
        results.push(config);
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[1], results[2]);
}

#[test]
fn a_key_written_twice_in_one_file_keeps_one_value_and_warns() {
    let mut config = LayeredConfig::new();
    config.apply_tree(
        workspace(),
        &json!({"freshness": {"watch": "on"}, "freshness.watch": "auto"}),
    );
    let watch = config.settings().freshness.watch;
    assert!(watch == WatchMode::On || watch == WatchMode::Auto);
    assert!(matches!(
        only_warning(&config),
        ConfigWarning::DuplicateKey {
            key: Key::FreshnessWatch,
            ..
        }
    ));
}

#[test]
fn unknown_keys_warn_and_known_keys_still_apply() {
    let mut config = LayeredConfig::new();
    config.apply_tree(
        workspace(),
        &json!({
            "freshness": {"watch": "on", "bogus": 1},
            "telemetry": {"enabled": true},
            "freshness.watcherlivenessms": 5000,
        }),
    );
    assert_eq!(config.settings().freshness.watch, WatchMode::On);
    assert_eq!(config.settings().freshness.watcher_liveness_ms, 15_000);
    let mut unknown: Vec<(String, Option<Key>)> = config
        .warnings()
        .iter()
        .map(|warning| match warning {
            ConfigWarning::UnknownKey {
                key,
                suggestion,
                layer,
                ..
            } => {
                assert_eq!(layer, &workspace());
                (key.clone(), *suggestion)
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    unknown.sort();
    assert_eq!(
        unknown,
        vec![
            ("freshness.bogus".to_owned(), None),
            (
                "freshness.watcherlivenessms".to_owned(),
                Some(Key::FreshnessWatcherLivenessMs)
            ),
            ("telemetry".to_owned(), None),
        ]
    );
    let suggestion = config
        .warnings()
        .iter()
        .map(ToString::to_string)
        .find(|text| text.contains("watcherlivenessms"))
        .unwrap_or_default();
    assert!(
        suggestion.contains("did you mean freshness.watcherLivenessMs?"),
        "{suggestion}"
    );
}

#[test]
fn a_top_level_that_is_not_an_object_skips_the_layer() {
    let mut config = LayeredConfig::new();
    config.apply_tree(workspace(), &json!(["freshness.watch", "on"]));
    assert_eq!(config.settings(), &Settings::default());
    assert!(matches!(
        only_warning(&config),
        ConfigWarning::LayerSkipped { layer, .. } if layer == &workspace()
    ));
}

// ---- Rendering ----------------------------------------------------------------

#[test]
fn render_json_names_every_value_and_the_layer_that_set_it() {
    let mut config = LayeredConfig::new();
    config.apply_tree(workspace(), &json!({"freshness": {"watch": "auto"}}));
    config.apply_env(env(&[("CGC_SYNC_STRATEGY", "custom: index . --force")]));
    let rendered = config.render_json();
    let entries = rendered.as_object().map(|map| map.len());
    assert_eq!(entries, Some(Key::ALL.len()));
    assert_eq!(
        rendered["freshness.watch"],
        json!({"value": "auto", "layer": "workspace (/repo/.pi/cgc.json)"})
    );
    assert_eq!(
        rendered["cgc.syncStrategy"],
        json!({"value": ["index", ".", "--force"], "layer": "environment (CGC_SYNC_STRATEGY)"})
    );
    assert_eq!(
        rendered["freshness.batchMs"],
        json!({"value": 500, "layer": "defaults"})
    );

    // The rendered values are themselves a valid configuration file.
    let values: serde_json::Map<String, Value> = rendered
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, entry)| (key.clone(), entry["value"].clone()))
        .collect();
    let mut reloaded = LayeredConfig::new();
    reloaded.apply_tree(explicit_file(), &Value::Object(values));
    assert!(reloaded.warnings().is_empty());
    assert_eq!(reloaded.settings(), config.settings());
}

#[test]
fn render_table_has_a_row_per_key_with_its_layer() {
    let mut config = LayeredConfig::new();
    config.apply_tree(user(), &json!({"cgc": {"globalArgs": ["--db", "kuzudb"]}}));
    let table = config.render_table();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), Key::ALL.len() + 1);
    assert!(lines[0].starts_with("KEY"));
    let row = lines
        .iter()
        .find(|line| line.starts_with("cgc.globalArgs "))
        .unwrap_or_else(|| panic!("no globalArgs row in\n{table}"));
    assert!(row.contains(r#"["--db","kuzudb"]"#), "{row}");
    assert!(row.ends_with("user (/home/u/.pi/agent/cgc.json)"), "{row}");
    let watch_row = lines
        .iter()
        .find(|line| line.starts_with("freshness.watch "));
    assert!(watch_row.is_some_and(|row| row.contains(" off ") && row.ends_with("defaults")));
}
