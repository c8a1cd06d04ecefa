//! The real CodeGraphContext CLI, run the way the service runs it: Kùzu
//! backend (`--db kuzudb`, a root option), the sandbox's HOME (so the graph
//! lives in `$HOME/.codegraphcontext/global/db/kuzudb`), `COLUMNS=1000`,
//! working directory = the workspace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{bail, Context as _, Result};
use serde_json::Value;

use crate::service::Sandbox;

pub struct RealCgc {
    program: PathBuf,
    home: PathBuf,
    workspace: PathBuf,
}

impl RealCgc {
    pub fn new(program: &Path, sandbox: &Sandbox) -> Result<RealCgc> {
        if !program.is_file() {
            bail!(
                "the real cgc is not at {} (run scripts/install-cgc.sh, or pass --real-cgc)",
                program.display()
            );
        }
        Ok(RealCgc {
            program: program.to_path_buf(),
            home: sandbox.home(),
            workspace: sandbox.workspace(),
        })
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The Kùzu database file the CLI locks in global mode.
    pub fn db_file(&self) -> PathBuf {
        self.home
            .join(".codegraphcontext")
            .join("global")
            .join("db")
            .join("kuzudb")
    }

    /// `cgc --db kuzudb ARGS` in the workspace, stdin closed.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("COLUMNS", "1000")
            .args(["--db", "kuzudb"])
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `cgc --db kuzudb ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Result<Output> {
        self.command(args)
            .output()
            .with_context(|| format!("running {} {}", self.program.display(), args.join(" ")))
    }

    /// What `cgc --version` says (`CodeGraphContext 0.6.13`), on stderr.
    pub fn version(&self) -> Result<String> {
        let out = self.run(&["--version"])?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        text.lines()
            .map(str::trim)
            .find(|line| line.starts_with("CodeGraphContext"))
            .map(str::to_string)
            .with_context(|| format!("no version in the output of --version: {text}"))
    }

    /// `cgc index .`, failing unless it succeeds.
    pub fn index(&self) -> Result<()> {
        let out = self.run(&["index", "."])?;
        if !out.status.success() {
            bail!(
                "cgc index failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Ok(())
    }

    /// Rows of a Cypher query (the JSON array on stdout after status lines).
    pub fn query(&self, cypher: &str) -> Result<Vec<Value>> {
        let out = self.run(&["query", cypher])?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!("cgc query failed ({}): {stdout}", out.status);
        }
        let start = stdout
            .find('[')
            .with_context(|| format!("no JSON in the query output: {stdout}"))?;
        serde_json::from_str(stdout[start..].trim())
            .with_context(|| format!("query output is not a JSON array: {stdout}"))
    }

    /// How many `Function` nodes have exactly this name.
    pub fn functions_named(&self, name: &str) -> Result<usize> {
        let cypher = format!("MATCH (f:Function) WHERE f.name = '{name}' RETURN f.name AS name");
        Ok(self.query(&cypher)?.len())
    }
}
