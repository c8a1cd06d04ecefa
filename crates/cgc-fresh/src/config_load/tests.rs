use std::collections::HashMap;
use std::fs;

use cgc_fresh_core::config::WatchMode;
use serde_json::json;
use tempfile::TempDir;

use super::*;

/// A home directory, a workspace and an environment table, all private
/// to one test.
struct Fixture {
    root: TempDir,
    env: HashMap<String, String>,
}

impl Fixture {
    fn new() -> Fixture {
        let root = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(root.path().join("home")).expect("home");
        fs::create_dir_all(root.path().join("repo")).expect("repo");
        let mut env = HashMap::new();
        env.insert(
            "HOME".to_owned(),
            root.path().join("home").display().to_string(),
        );
        Fixture { root, env }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn workspace(&self) -> PathBuf {
        self.root.path().join("repo")
    }

    fn user_file(&self) -> PathBuf {
        self.home().join(".pi/agent/cgc.json")
    }

    fn workspace_file(&self) -> PathBuf {
        self.workspace().join(".pi/cgc.json")
    }

    fn write(&self, path: &Path, text: &str) {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }

    fn set_env(&mut self, name: &str, value: &str) {
        self.env.insert(name.to_owned(), value.to_owned());
    }

    fn load(&self, explicit_file: Option<&Path>) -> LoadedConfig {
        let env = |name: &str| self.env.get(name).cloned();
        load(&self.workspace(), explicit_file, &env)
    }
}

fn only_warning(loaded: &LoadedConfig) -> &ConfigWarning {
    match loaded.warnings() {
        [warning] => warning,
        other => panic!("expected exactly one warning, got {other:?}"),
    }
}

/// Every dotted key path that holds a non-table value in `tree`.
fn leaf_keys(prefix: &str, tree: &Value, out: &mut Vec<String>) {
    match tree {
        Value::Object(entries) => {
            for (name, value) in entries {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                leaf_keys(&path, value, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

// ---- The embedded defaults layer ----------------------------------------

#[test]
fn default_toml_is_exactly_the_built_in_defaults() {
    let tree =
        collect_tree(&Parsed::file(DEFAULTS_TOML, FileFormat::Toml)).expect("default.toml parses");
    let mut layers = LayeredConfig::new();
    layers.apply_tree(Layer::Defaults, &tree);
    assert!(layers.warnings().is_empty(), "{:?}", layers.warnings());
    assert_eq!(layers.settings(), &Settings::default());

    // Every key is written out (not merely defaulted), and nothing else.
    let mut written = Vec::new();
    leaf_keys("", &tree, &mut written);
    written.sort();
    let mut keys: Vec<String> = Key::ALL.iter().map(|key| key.name().to_owned()).collect();
    keys.sort();
    assert_eq!(written, keys);
}

/// The file is what the key declarations say, word for word: every key's
/// documentation, variable and default come from the one table.
#[test]
fn default_toml_is_generated_from_the_key_declarations() {
    let expected = cgc_fresh_core::config::defaults_file();
    if DEFAULTS_TOML != expected {
        let first_difference = DEFAULTS_TOML
            .lines()
            .zip(expected.lines())
            .position(|(written, declared)| written != declared);
        panic!(
            "config/default.toml differs from the key declarations \
             (first at line {first_difference:?}); it should read:\n{expected}"
        );
    }
}

#[test]
fn default_toml_names_every_environment_variable() {
    for key in Key::ALL {
        let line = format!("# Env: {}", key.env_var());
        assert!(DEFAULTS_TOML.contains(&line), "default.toml lacks {line:?}");
    }
    assert!(DEFAULTS_TOML.contains("Shell tools belong in shellTools instead"));
    assert!(DEFAULTS_TOML.contains("shellTools = [\"bash\"]"));
}

#[test]
fn with_no_files_and_no_variables_the_defaults_apply_silently() {
    let fixture = Fixture::new();
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings, Settings::default());
    assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
    assert!(loaded.files_read().is_empty());
    for key in Key::ALL {
        assert_eq!(loaded.origin(key), &Layer::Defaults);
    }
}

// ---- Tri-state watcher configuration, through real files ------------------

#[test]
fn default_stays_off() {
    let mut fixture = Fixture::new();
    fixture.write(
        &fixture.workspace_file(),
        r#"{"freshness": {"autoSync": false}}"#,
    );
    fixture.set_env("CGC_TIMEOUT_MS", "1000");
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.freshness.watch, WatchMode::Off);
    assert_eq!(loaded.origin(Key::FreshnessWatch), &Layer::Defaults);
    assert!(!loaded.settings.freshness.auto_sync);
}

#[test]
fn existing_boolean_config_keeps_its_meaning() {
    for (flag, mode) in [("true", WatchMode::On), ("false", WatchMode::Off)] {
        // JSON boolean in the workspace file, over "auto" in the user file.
        let fixture = Fixture::new();
        fixture.write(&fixture.user_file(), r#"{"freshness": {"watch": "auto"}}"#);
        let text = format!(r#"{{"freshness": {{"watch": {flag}}}}}"#);
        fixture.write(&fixture.workspace_file(), &text);
        let loaded = fixture.load(None);
        assert_eq!(loaded.settings.freshness.watch, mode, "JSON {flag}");
        assert!(loaded.warnings().is_empty());

        // TOML boolean in the --config file, over "auto" in the workspace.
        fixture.write(
            &fixture.workspace_file(),
            r#"{"freshness": {"watch": "auto"}}"#,
        );
        let explicit = fixture.root.path().join("explicit.toml");
        fixture.write(&explicit, &format!("[freshness]\nwatch = {flag}\n"));
        let loaded = fixture.load(Some(&explicit));
        assert_eq!(loaded.settings.freshness.watch, mode, "TOML {flag}");
        let expected = Layer::File { path: explicit };
        assert_eq!(loaded.origin(Key::FreshnessWatch), &expected);
    }
    for (text, mode) in [
        ("yes", WatchMode::On),
        ("1", WatchMode::On),
        ("no", WatchMode::Off),
    ] {
        let mut fixture = Fixture::new();
        fixture.write(
            &fixture.workspace_file(),
            r#"{"freshness": {"watch": "auto"}}"#,
        );
        fixture.set_env("CGC_FRESHNESS_WATCH", text);
        let loaded = fixture.load(None);
        assert_eq!(loaded.settings.freshness.watch, mode, "env {text}");
        assert_eq!(loaded.origin(Key::FreshnessWatch), &Layer::Env);
    }
}

#[test]
fn explicit_auto_enables_the_gated_mode() {
    let fixture = Fixture::new();
    fixture.write(&fixture.workspace_file(), r#"{"freshness.watch": "auto"}"#);
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.freshness.watch, WatchMode::Auto);
    let expected = Layer::Workspace {
        path: fixture.workspace_file(),
    };
    assert_eq!(loaded.origin(Key::FreshnessWatch), &expected);

    let mut fixture = Fixture::new();
    fixture.write(&fixture.user_file(), r#"{"freshness": {"watch": true}}"#);
    fixture.set_env("CGC_FRESHNESS_WATCH", "AUTO");
    assert_eq!(fixture.load(None).settings.freshness.watch, WatchMode::Auto);
}

#[test]
fn invalid_value_is_skipped_with_a_warning() {
    let mut fixture = Fixture::new();
    fixture.write(&fixture.user_file(), r#"{"freshness": {"watch": "on"}}"#);
    fixture.write(
        &fixture.workspace_file(),
        r#"{"freshness": {"watch": "sometimes"}}"#,
    );
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.freshness.watch, WatchMode::On);
    let text = only_warning(&loaded).to_string();
    let workspace_file = fixture.workspace_file().display().to_string();
    for part in ["freshness.watch", "\"sometimes\"", workspace_file.as_str()] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }

    fixture.set_env("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "soon");
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.freshness.watcher_liveness_ms, 15_000);
    let texts = loaded.warning_texts();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[1].contains("environment (CGC_FRESHNESS_WATCHER_LIVENESS_MS)"));
    assert!(texts[1].contains("\"soon\""));
}

// ---- Precedence across every layer, for every key -------------------------

/// For each key: values for the user file, the workspace file and the
/// `--config` file (as JSON), and the environment text with the value it
/// gives. Every column differs from the one before and from the default.
fn layer_values() -> Vec<(Key, [Value; 3], &'static str, Value)> {
    vec![
        (
            Key::FreshnessWatch,
            [json!("on"), json!("auto"), json!("on")],
            "off",
            json!("off"),
        ),
        (
            Key::FreshnessWatcherLivenessMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::FreshnessWatcherApplyMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::FreshnessAutoSync,
            [json!(false), json!(true), json!(false)],
            "yes",
            json!(true),
        ),
        (
            Key::FreshnessMaxSyncsPerSession,
            [json!(5), json!(6), json!(7)],
            "8",
            json!(8),
        ),
        (
            Key::FreshnessMaxIncrementalSyncsPerSession,
            [json!(5), json!(6), json!(7)],
            "8",
            json!(8),
        ),
        (
            Key::FreshnessBatchMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::FreshnessSettleMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::FreshnessMinSyncGapMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::FreshnessModifyingTools,
            [json!(["a"]), json!(["b"]), json!(["c"])],
            "d,e",
            json!(["d", "e"]),
        ),
        (
            Key::FreshnessShellTools,
            [json!(["a"]), json!(["b"]), json!(["c"])],
            "sh,zsh",
            json!(["sh", "zsh"]),
        ),
        (
            Key::CgcExecutable,
            [json!("u"), json!("w"), json!("f")],
            "e",
            json!("e"),
        ),
        (
            Key::CgcTimeoutMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::CgcMaintenanceTimeoutMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::CgcSyncStrategy,
            [json!("update"), json!("index"), json!(["index", "."])],
            "reconcile",
            json!("reconcile"),
        ),
        (
            Key::CgcGlobalArgs,
            [
                json!(["--db", "u"]),
                json!(["--db", "w"]),
                json!(["--db", "f"]),
            ],
            "--db e",
            json!(["--db", "e"]),
        ),
        (
            Key::CgcAllowUnprovenVersion,
            [json!(true), json!(false), json!(true)],
            "yes",
            json!(true),
        ),
        (
            Key::LifecycleAutoCreate,
            [json!(true), json!(false), json!(true)],
            "no",
            json!(false),
        ),
        (
            Key::ServiceIdleExitMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
        (
            Key::ServiceMaxLineBytes,
            [json!(2000), json!(3000), json!(4000)],
            "5000",
            json!(5000),
        ),
        (
            Key::McpReadYourWritesMs,
            [json!(0), json!(1000), json!(2000)],
            "3000",
            json!(3000),
        ),
        (
            Key::McpHoldDatabaseMs,
            [json!(500), json!(1000), json!(2000)],
            "3000",
            json!(3000),
        ),
        (
            Key::SupervisorStopGraceMs,
            [json!(1), json!(2), json!(3)],
            "4",
            json!(4),
        ),
    ]
}

fn file_setting_every_key(column: usize) -> String {
    let entries: serde_json::Map<String, Value> = layer_values()
        .into_iter()
        .map(|(key, values, _, _)| (key.name().to_owned(), values[column].clone()))
        .collect();
    Value::Object(entries).to_string()
}

#[test]
fn precedence_defaults_user_workspace_config_file_env_for_every_key() {
    let table = layer_values();
    assert_eq!(table.len(), Key::ALL.len());
    let mut fixture = Fixture::new();
    // The --config file is TOML with nested tables, to cover that path too.
    let explicit = fixture.root.path().join("cgc-fresh.toml");
    let mut toml_text = String::new();
    let mut current_section = "";
    for (key, values, _, _) in &table {
        let (section, name) = key.name().split_once('.').expect("dotted key");
        if section != current_section {
            toml_text.push_str(&format!("[{section}]\n"));
            current_section = section;
        }
        toml_text.push_str(&format!("{name} = {}\n", values[2]));
    }
    fixture.write(&explicit, &toml_text);
    fixture.write(&fixture.user_file(), &file_setting_every_key(0));
    fixture.write(&fixture.workspace_file(), &file_setting_every_key(1));
    for (key, _, env_text, _) in &table {
        fixture.set_env(key.env_var(), env_text);
    }

    let user = Layer::User {
        path: fixture.user_file(),
    };
    let workspace = Layer::Workspace {
        path: fixture.workspace_file(),
    };
    let file = Layer::File {
        path: explicit.clone(),
    };

    // All five layers present: the environment wins every key.
    let loaded = fixture.load(Some(&explicit));
    assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
    assert_eq!(
        loaded.files_read(),
        [
            fixture.user_file(),
            fixture.workspace_file(),
            explicit.clone()
        ]
    );
    for (key, _, _, env_value) in &table {
        assert_eq!(loaded.settings.value_of(*key), *env_value, "{key}");
        assert_eq!(loaded.origin(*key), &Layer::Env, "{key}");
    }

    // Peel the layers off from the top; the next one down wins each time.
    for (key, _, _, _) in &table {
        fixture.env.remove(key.env_var());
    }
    let steps = [(Some(explicit.as_path()), 2, file), (None, 1, workspace)];
    for (explicit_file, column, layer) in steps {
        let loaded = fixture.load(explicit_file);
        for (key, values, _, _) in &table {
            assert_eq!(
                loaded.settings.value_of(*key),
                values[column],
                "{key} from {layer}"
            );
            assert_eq!(loaded.origin(*key), &layer, "{key}");
        }
    }
    fs::remove_file(fixture.workspace_file()).expect("remove workspace file");
    let loaded = fixture.load(None);
    for (key, values, _, _) in &table {
        assert_eq!(loaded.settings.value_of(*key), values[0], "{key} from user");
        assert_eq!(loaded.origin(*key), &user, "{key}");
    }
    fs::remove_file(fixture.user_file()).expect("remove user file");
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings, Settings::default());
    assert!(Key::ALL
        .iter()
        .all(|key| loaded.origin(*key) == &Layer::Defaults));
}

// ---- Files that are missing, corrupt or unreadable -----------------------------

#[test]
fn missing_user_and_workspace_files_are_silent() {
    let mut fixture = Fixture::new();
    fixture.set_env("PI_CODING_AGENT_DIR", "/nonexistent/agent");
    let loaded = fixture.load(None);
    assert!(loaded.warnings().is_empty());
    assert!(loaded.files_read().is_empty());
}

#[test]
fn missing_explicit_config_file_is_a_warning() {
    let fixture = Fixture::new();
    let missing = fixture.root.path().join("nope.toml");
    let loaded = fixture.load(Some(&missing));
    assert_eq!(loaded.settings, Settings::default());
    let warning = only_warning(&loaded);
    assert_eq!(
        warning,
        &ConfigWarning::LayerSkipped {
            layer: Layer::File {
                path: missing.clone()
            },
            reason: "file not found".to_owned(),
        }
    );
    assert!(warning.to_string().contains(&missing.display().to_string()));
}

#[test]
fn corrupt_json_file_is_one_warning_and_other_layers_still_apply() {
    let mut fixture = Fixture::new();
    fixture.write(&fixture.user_file(), r#"{"freshness": {"watch": "on"}}"#);
    fixture.write(
        &fixture.workspace_file(),
        r#"{"freshness": {"watch": "auto",}"#,
    );
    fixture.set_env("CGC_TIMEOUT_MS", "1234");
    let loaded = fixture.load(None);

    assert_eq!(loaded.settings.freshness.watch, WatchMode::On);
    assert_eq!(loaded.settings.cgc.timeout_ms, 1234);
    assert_eq!(loaded.files_read(), [fixture.user_file()]);
    let warning = only_warning(&loaded);
    let workspace = Layer::Workspace {
        path: fixture.workspace_file(),
    };
    assert_eq!(warning.layer(), &workspace);
    let text = warning.to_string();
    assert!(
        text.contains(&fixture.workspace_file().display().to_string()),
        "{text}"
    );
    assert!(text.contains("not valid JSON"), "{text}");
}

#[test]
fn corrupt_toml_config_file_is_one_warning() {
    let fixture = Fixture::new();
    let explicit = fixture.root.path().join("bad.TOML");
    fixture.write(&explicit, "[freshness\nwatch = on\n");
    let loaded = fixture.load(Some(&explicit));
    assert_eq!(loaded.settings, Settings::default());
    let text = only_warning(&loaded).to_string();
    assert!(text.contains("not valid TOML at line 1 column"), "{text}");
    assert!(!text.contains('\n'), "one line: {text:?}");
}

#[test]
fn explicit_config_file_is_json_unless_named_toml() {
    let fixture = Fixture::new();
    let explicit = fixture.root.path().join("settings.conf");
    fixture.write(&explicit, r#"{"lifecycle": {"autoCreate": true}}"#);
    let loaded = fixture.load(Some(&explicit));
    assert!(loaded.settings.lifecycle.auto_create);
    assert!(loaded.warnings().is_empty());
}

#[test]
fn unreadable_file_is_one_warning() {
    let fixture = Fixture::new();
    // A directory where the file should be: it exists but cannot be read.
    fs::create_dir_all(fixture.workspace_file()).expect("mkdir");
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings, Settings::default());
    let text = only_warning(&loaded).to_string();
    assert!(text.contains("cannot read the file"), "{text}");
}

#[test]
fn oversized_file_is_refused_with_a_warning() {
    let fixture = Fixture::new();
    let padding = " ".repeat(MAX_CONFIG_FILE_BYTES as usize);
    fixture.write(&fixture.workspace_file(), &format!("{{{padding}}}"));
    let loaded = fixture.load(None);
    assert!(only_warning(&loaded).to_string().contains("larger than"));
}

// ---- Finding the user file -----------------------------------------------

#[test]
fn pi_coding_agent_dir_is_honoured() {
    let mut fixture = Fixture::new();
    let agent_dir = fixture.root.path().join("agent-dir");
    fixture.write(
        &agent_dir.join("cgc.json"),
        r#"{"cgc": {"executable": "/agent/cgc"}}"#,
    );
    // The default location must then be ignored.
    fixture.write(
        &fixture.user_file(),
        r#"{"cgc": {"executable": "/home/cgc"}}"#,
    );
    fixture.set_env("PI_CODING_AGENT_DIR", &agent_dir.display().to_string());
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.cgc.executable, "/agent/cgc");
    let expected = Layer::User {
        path: agent_dir.join("cgc.json"),
    };
    assert_eq!(loaded.origin(Key::CgcExecutable), &expected);
    assert_eq!(loaded.files_read(), [agent_dir.join("cgc.json")]);

    // A leading ~ is the home directory, as in Pi.
    let tilde_dir = fixture.home().join("custom-agent");
    fixture.write(
        &tilde_dir.join("cgc.json"),
        r#"{"cgc": {"executable": "/tilde/cgc"}}"#,
    );
    fixture.set_env("PI_CODING_AGENT_DIR", "~/custom-agent");
    assert_eq!(fixture.load(None).settings.cgc.executable, "/tilde/cgc");
}

#[test]
fn without_pi_coding_agent_dir_the_user_file_is_under_home() {
    let mut fixture = Fixture::new();
    fixture.write(
        &fixture.user_file(),
        r#"{"cgc": {"executable": "/home/cgc"}}"#,
    );
    fixture.set_env("PI_CODING_AGENT_DIR", "");
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings.cgc.executable, "/home/cgc");

    fixture.env.clear();
    let loaded = fixture.load(None);
    assert_eq!(
        loaded.settings,
        Settings::default(),
        "no HOME: no user layer"
    );
    assert!(loaded.warnings().is_empty());
}

// ---- Rendering -------------------------------------------------------------

#[test]
fn render_text_shows_values_files_and_warnings() {
    let mut fixture = Fixture::new();
    fixture.write(
        &fixture.workspace_file(),
        r#"{"freshness": {"watch": "auto", "typo": 1}}"#,
    );
    fixture.set_env("CGC_FRESHNESS_BATCH_MS", "-1");
    let loaded = fixture.load(None);
    let text = loaded.render_text();
    let workspace_file = fixture.workspace_file().display().to_string();
    assert!(text.lines().any(|line| line.starts_with("freshness.watch ")
        && line.contains(" auto ")
        && line.ends_with(&format!("workspace ({workspace_file})"))));
    assert!(
        text.contains(&format!("files read:\n  {workspace_file}\n")),
        "{text}"
    );
    assert!(
        text.contains("unknown configuration key freshness.typo"),
        "{text}"
    );
    assert!(text.contains("CGC_FRESHNESS_BATCH_MS"), "{text}");

    let rendered = loaded.render_json();
    assert_eq!(rendered["freshness.watch"]["value"], json!("auto"));
    assert_eq!(
        rendered["freshness.watch"]["layer"],
        json!(format!("workspace ({workspace_file})"))
    );
}

// ---- What config-rs is trusted with -------------------------------------

/// config-rs keeps file keys' case in both formats, nested or dotted.
#[test]
fn camel_case_keys_survive_config_rs() {
    let fixture = Fixture::new();
    let files = [
        ("a.json", r#"{"freshness": {"watcherLivenessMs": 4001}}"#),
        ("b.json", r#"{"freshness.watcherLivenessMs": 4001}"#),
        ("c.toml", "[freshness]\nwatcherLivenessMs = 4001\n"),
        ("d.toml", "freshness.watcherLivenessMs = 4001\n"),
        ("e.toml", "\"freshness.watcherLivenessMs\" = 4001\n"),
    ];
    for (name, text) in files {
        let path = fixture.root.path().join(name);
        fixture.write(&path, text);
        let loaded = fixture.load(Some(&path));
        assert!(
            loaded.warnings().is_empty(),
            "{name}: {:?}",
            loaded.warnings()
        );
        assert_eq!(
            loaded.settings.freshness.watcher_liveness_ms, 4001,
            "{name}"
        );
    }
}

/// config-rs's `Value::into_bool` reads "on"/"off" as booleans; the core
/// must see the text instead, so values reach it unconverted.
#[test]
fn on_and_off_reach_the_core_as_text() {
    assert_eq!(config::Value::from("off").into_bool().ok(), Some(false));
    let mut fixture = Fixture::new();
    fixture.write(&fixture.user_file(), r#"{"freshness": {"watch": "auto"}}"#);
    let explicit = fixture.root.path().join("explicit.toml");
    fixture.write(&explicit, "[freshness]\nwatch = \"on\"\n");
    let loaded = fixture.load(Some(&explicit));
    assert_eq!(loaded.settings.freshness.watch, WatchMode::On);
    fixture.set_env("CGC_FRESHNESS_WATCH", "off");
    let loaded = fixture.load(Some(&explicit));
    assert_eq!(loaded.settings.freshness.watch, WatchMode::Off);
    let tree = collect_tree(&Parsed::file(
        r#"{"freshness": {"watch": "on"}}"#,
        FileFormat::Json,
    ));
    assert_eq!(tree, Ok(json!({"freshness": {"watch": "on"}})));
}

/// The environment source reads exactly the documented names and tags
/// each value with its variable.
#[test]
fn the_environment_source_reads_exact_names_with_their_origin() {
    let table: HashMap<&str, &str> = [
        ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "700"),
        ("cgc_freshness_watch", "on"),
        ("CGC_FRESHNESS_WATCH_", "on"),
        ("CGC_RUNTIME_DB_TYPE", "neo4j"),
    ]
    .into_iter()
    .collect();
    let env = |name: &str| table.get(name).map(|value| (*value).to_owned());
    let collected = EnvironmentLayer::capture(&env)
        .collect()
        .expect("the environment collects");
    assert_eq!(collected.len(), 1, "{collected:?}");
    let value = &collected["freshness.watcherLivenessMs"];
    assert_eq!(value.origin(), Some("CGC_FRESHNESS_WATCHER_LIVENESS_MS"));
    assert_eq!(value.clone().into_string().ok().as_deref(), Some("700"));
}

#[test]
fn a_json_file_whose_top_level_is_not_an_object_is_one_warning() {
    let fixture = Fixture::new();
    fixture.write(&fixture.workspace_file(), r#"["freshness.watch", "on"]"#);
    let loaded = fixture.load(None);
    assert_eq!(loaded.settings, Settings::default());
    let text = only_warning(&loaded).to_string();
    assert!(text.contains("the top level must be an object"), "{text}");
    assert!(loaded.files_read().is_empty());
}
