//! `cgc-fresh config`: the effective configuration as a person sees it,
//! with every layer of DESIGN §8 in play.

use std::fs;

use crate::support::Sandbox;

fn config_json(sandbox: &Sandbox, env: &[(&str, &str)], extra: &[&str]) -> serde_json::Value {
    let mut cmd = sandbox.command();
    cmd.args(["config", "--json"]).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_layer_applies_in_order_and_reports_its_origin() {
    let sandbox = Sandbox::new();
    let user_dir = sandbox.home().join(".pi/agent");
    fs::create_dir_all(&user_dir).unwrap();
    fs::write(
        user_dir.join("cgc.json"),
        r#"{"freshness":{"watch":true,"maxSyncsPerSession":5,"batchMs":700}}"#,
    )
    .unwrap();
    let ws_dir = sandbox.workspace().join(".pi");
    fs::create_dir_all(&ws_dir).unwrap();
    fs::write(
        ws_dir.join("cgc.json"),
        r#"{"freshness":{"watch":"auto","maxSyncsPerSession":4}}"#,
    )
    .unwrap();
    let extra = sandbox.root.path().join("extra.toml");
    fs::write(&extra, "[freshness]\nmaxSyncsPerSession = 3\n").unwrap();
    let doc = config_json(
        &sandbox,
        &[("CGC_FRESHNESS_WATCH", "off")],
        &["--config", extra.to_str().unwrap()],
    );
    let values = &doc["values"];
    assert_eq!(values["freshness.watch"]["value"], "off", "env wins: {doc}");
    assert!(
        values["freshness.watch"]["layer"]
            .as_str()
            .unwrap()
            .starts_with("env"),
        "{doc}"
    );
    assert_eq!(
        values["freshness.maxSyncsPerSession"]["value"], 3,
        "--config beats the workspace file"
    );
    assert_eq!(
        values["freshness.batchMs"]["value"], 700,
        "the user file beats defaults"
    );
    assert!(
        values["freshness.batchMs"]["layer"]
            .as_str()
            .unwrap()
            .starts_with("user"),
        "{doc}"
    );
    assert_eq!(values["freshness.settleMs"]["layer"], "defaults", "{doc}");
}

#[test]
fn an_invalid_value_warns_names_key_value_and_layer_and_loading_goes_on() {
    let sandbox = Sandbox::new();
    let doc = config_json(
        &sandbox,
        &[
            ("CGC_FRESHNESS_WATCH", "sometimes"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "-5"),
        ],
        &[],
    );
    assert_eq!(doc["values"]["freshness.watch"]["value"], "off");
    assert_eq!(doc["values"]["freshness.watcherLivenessMs"]["value"], 15000);
    let warnings: Vec<String> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("freshness.watch")
            && w.contains("sometimes")
            && w.contains("CGC_FRESHNESS_WATCH")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("freshness.watcherLivenessMs") && w.contains("-5")),
        "{warnings:?}"
    );
}

#[test]
fn a_corrupt_workspace_file_is_one_warning_not_a_failure() {
    let sandbox = Sandbox::new();
    let ws_dir = sandbox.workspace().join(".pi");
    fs::create_dir_all(&ws_dir).unwrap();
    fs::write(ws_dir.join("cgc.json"), "{ this is not json").unwrap();
    let doc = config_json(&sandbox, &[("CGC_FRESHNESS_AUTO_SYNC", "no")], &[]);
    assert_eq!(
        doc["values"]["freshness.autoSync"]["value"], false,
        "other layers still apply"
    );
    let warnings = doc["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].as_str().unwrap().contains("cgc.json"));
}
