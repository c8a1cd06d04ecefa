//! The scriptable fake `cgc` as the service's executable: its scenario
//! file and the invocation log it appends to.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use crate::service::Sandbox;

/// One sandbox's fake `cgc` set-up.
pub struct FakeCgc {
    program: PathBuf,
    scenario: Option<PathBuf>,
    log: PathBuf,
}

impl FakeCgc {
    /// The fake with the built-in behaviours (no scenario) or `scenario`.
    pub fn new(program: &Path, sandbox: &Sandbox, scenario: Option<&Value>) -> Result<FakeCgc> {
        let scenario = match scenario {
            Some(value) => {
                let path = sandbox.root().join("scenario.json");
                fs::write(&path, serde_json::to_vec(value)?)?;
                Some(path)
            }
            None => None,
        };
        Ok(FakeCgc {
            program: program.to_path_buf(),
            scenario,
            log: sandbox.root().join("fake-cgc.log"),
        })
    }

    /// Environment for `serve` that makes it run this fake.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "CGC_EXECUTABLE".to_string(),
                self.program.display().to_string(),
            ),
            ("FAKE_CGC_LOG".to_string(), self.log.display().to_string()),
        ];
        if let Some(scenario) = &self.scenario {
            env.push((
                "FAKE_CGC_SCENARIO".to_string(),
                scenario.display().to_string(),
            ));
        }
        env
    }

    /// Every record of the invocation log so far.
    pub fn records(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// One `start` record per process the service spawned.
    pub fn invocations(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["event"] == "start")
            .collect()
    }

    /// Whether a `spawn_daemon` grandchild has written its record.
    pub fn has_daemon(&self) -> bool {
        self.records().iter().any(|r| r["event"] == "daemon")
    }

    /// Every pid the log names: invocations and daemons.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .records()
            .iter()
            .filter_map(|r| r["pid"].as_i64())
            .filter_map(|p| i32::try_from(p).ok())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}
