//! The graph backends the real-CLI tests run against — Kùzu and LadybugDB
//! (embedded: a database file under HOME), FalkorDB Lite (CGC's default on
//! Python 3.12: an embedded FalkorDB saved to a file under HOME, through the
//! second pinned `cgc`) and a FalkorDB server on loopback — and one handle
//! per graph to drive the real `cgc` at it, ask it Cypher and dump it for
//! comparison.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Where CodeGraphContext keeps the graph.
pub enum GraphBackend {
    /// `--db kuzudb`: one database per HOME.
    Kuzu,
    /// `--db ladybugdb`: one database per HOME.
    Ladybug,
    /// No backend named at all: the Python 3.12 `cgc`
    /// (`CGC_FRESH_REAL_CGC_LITE`) picks FalkorDB Lite by itself, one
    /// saved graph per HOME.
    FalkorLite,
    /// `DEFAULT_DATABASE=falkordb-remote`: graphs by name on this server.
    FalkorDb(FalkorServer),
}

impl GraphBackend {
    /// A FalkorDB server of the test's own, or `None` (and a note) when the
    /// server script is not configured — a failure instead when
    /// `CGC_FRESH_REQUIRE_REAL_CGC` is set.
    pub fn falkordb() -> Option<GraphBackend> {
        FalkorServer::start().map(GraphBackend::FalkorDb)
    }

    /// A FalkorDB server for a real-CLI test: `None` when there is no real
    /// `cgc` to run against it (the test is skipped) or no server script.
    pub fn falkordb_with_real_cgc() -> Option<GraphBackend> {
        crate::support::real_cgc()?;
        GraphBackend::falkordb()
    }

    /// The `cgc` for this backend, or `None` (the test is skipped) when it
    /// is not installed: the pinned one, or for FalkorDB Lite its Python
    /// 3.12 twin (a failure instead when `CGC_FRESH_REQUIRE_REAL_CGC` is set).
    pub fn real_cgc(&self) -> Option<PathBuf> {
        match self {
            GraphBackend::FalkorLite => crate::support::real_cgc_lite(),
            _ => crate::support::real_cgc(),
        }
    }

    /// CGC's root options for every call (the service's `cgc.globalArgs`).
    pub fn global_args(&self) -> Vec<String> {
        match self {
            GraphBackend::Kuzu => vec!["--db".into(), "kuzudb".into()],
            GraphBackend::Ladybug => vec!["--db".into(), "ladybugdb".into()],
            // No `--db`: CGC picks FalkorDB Lite itself, the server from
            // the environment.
            GraphBackend::FalkorLite | GraphBackend::FalkorDb(_) => Vec::new(),
        }
    }

    /// Whether this is the embedded Kùzu (the worker's stored-edge memo and
    /// direct reads apply).
    pub fn is_kuzu(&self) -> bool {
        matches!(self, GraphBackend::Kuzu)
    }

    /// Whether CGC talks to it through its embedded Kùzu-dialect session
    /// (Kùzu and LadybugDB: the worker's session patches apply).
    pub fn has_embedded_session(&self) -> bool {
        matches!(self, GraphBackend::Kuzu | GraphBackend::Ladybug)
    }

    /// The environment that points CGC at the graph named `graph` (on
    /// Kùzu the graph is HOME's database and the name is not used).
    pub fn env(&self, graph: &str) -> Vec<(String, String)> {
        match self {
            GraphBackend::Kuzu | GraphBackend::Ladybug | GraphBackend::FalkorLite => Vec::new(),
            GraphBackend::FalkorDb(server) => {
                let mut env = server.env();
                env.push(("FALKORDB_GRAPH_NAME".into(), graph.into()));
                env
            }
        }
    }

    /// The real `cgc` working on `ws` with `home` as HOME, at the graph
    /// named `graph` (see `env`).
    pub fn cli(&self, cgc: &Path, ws: &Path, home: &Path, graph: &str) -> GraphCli {
        let dump_args = match self {
            GraphBackend::Kuzu => vec![
                "kuzu".to_string(),
                home.join(".codegraphcontext/global/db/kuzudb")
                    .display()
                    .to_string(),
            ],
            GraphBackend::Ladybug => vec![
                "ladybug".to_string(),
                home.join(".codegraphcontext/global/db/ladybugdb")
                    .display()
                    .to_string(),
            ],
            GraphBackend::FalkorLite => vec![
                "falkordb-lite".to_string(),
                home.join(".codegraphcontext/global/db/falkordb")
                    .display()
                    .to_string(),
                "codegraph".to_string(),
            ],
            GraphBackend::FalkorDb(server) => vec![
                "falkordb".to_string(),
                "127.0.0.1".to_string(),
                server.port.to_string(),
                graph.to_string(),
            ],
        };
        GraphCli {
            cgc: cgc.to_path_buf(),
            ws: ws.to_path_buf(),
            home: home.to_path_buf(),
            env: self.env(graph),
            global: self.global_args(),
            dump_args,
        }
    }
}

/// The real `cgc` bound to one workspace and one graph.
pub struct GraphCli {
    cgc: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    /// The backend's environment, passed to the service too.
    pub env: Vec<(String, String)>,
    /// The backend's root options, the service's `cgc.globalArgs` too.
    pub global: Vec<String>,
    dump_args: Vec<String>,
}

/// Every node and relationship of a graph, canonical (see `graph_dump.py`).
#[derive(Debug, PartialEq, Eq)]
pub struct GraphDump {
    pub nodes: BTreeSet<String>,
    pub relationships: BTreeSet<String>,
}

impl GraphCli {
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cgc);
        cmd.current_dir(&self.ws)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("COLUMNS", "1000")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(&self.global)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// `cgc index .` from scratch (the graph must not hold the workspace yet).
    pub fn index(&self) {
        let out = self.command(&["index", "."]).output().unwrap();
        assert!(
            out.status.success(),
            "cgc index failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    /// Rows of a Cypher query, as JSON objects.
    pub fn query(&self, cypher: &str) -> Vec<Value> {
        query_rows(&self.command(&["query", cypher]).output().unwrap())
    }

    /// The interpreter of the `cgc` (its `#!` line), which has the
    /// backend's client library.
    fn python(&self) -> String {
        python_of(&self.cgc)
    }

    /// Runs one Cypher statement on a Kùzu graph with Kùzu's own client, as
    /// another program on the machine could: `cgc query` refuses writes.
    pub fn write_kuzu(&self, cypher: &str) {
        assert_eq!(self.dump_args[0], "kuzu", "a Kùzu graph");
        let out = Command::new(self.python())
            .args([
                "-c",
                "import kuzu, sys\n\
                 db = kuzu.Database(sys.argv[1])\n\
                 kuzu.Connection(db).execute(sys.argv[2])\n\
                 db.close()\n",
            ])
            .arg(&self.dump_args[1])
            .arg(cypher)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kuzu write failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The graph's canonical dump, read with the interpreter of the `cgc`
    /// (its `#!` line), which has the backend's client library.
    pub fn dump(&self) -> GraphDump {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/e2e/graph_dump.py");
        let out = Command::new(self.python())
            .arg(script)
            .args(&self.dump_args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "graph dump failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        let set = |key: &str| {
            value[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect::<BTreeSet<String>>()
        };
        GraphDump {
            nodes: set("nodes"),
            relationships: set("relationships"),
        }
    }
}

/// A FalkorDB server on loopback for the duration of a test
/// (`scripts/falkordb-server.sh`; `CGC_FRESH_FALKORDB_SERVER_SCRIPT`).
pub struct FalkorServer {
    script: PathBuf,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl FalkorServer {
    pub fn start() -> Option<FalkorServer> {
        let script = match std::env::var_os("CGC_FRESH_FALKORDB_SERVER_SCRIPT") {
            Some(path) => PathBuf::from(path),
            None if std::env::var_os("CGC_FRESH_REQUIRE_REAL_CGC").is_some() => {
                panic!("CGC_FRESH_FALKORDB_SERVER_SCRIPT is not set")
            }
            None => {
                eprintln!("no FalkorDB server script: skipping");
                return None;
            }
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(&script)
            .arg("start")
            .arg(port.to_string())
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "falkordb start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(FalkorServer { script, port, dir })
    }

    /// The environment that makes CGC use this server (its default graph).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "DEFAULT_DATABASE".to_string(),
                "falkordb-remote".to_string(),
            ),
            ("FALKORDB_HOST".to_string(), "127.0.0.1".to_string()),
            ("FALKORDB_PORT".to_string(), self.port.to_string()),
        ]
    }
}

impl Drop for FalkorServer {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("stop")
            .arg(self.port.to_string())
            .arg(self.dir.path())
            .output();
    }
}

/// The rows of a `cgc query` run, as JSON objects: the CLI prints a banner
/// before the JSON array.
pub fn query_rows(out: &std::process::Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cgc query failed: {stdout}");
    let start = stdout
        .find('[')
        .unwrap_or_else(|| panic!("no JSON in query output: {stdout}"));
    serde_json::from_str::<Vec<Value>>(stdout[start..].trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The interpreter of a `cgc` script (its `#!` line).
pub fn python_of(cgc: &Path) -> String {
    let text = fs::read_to_string(cgc).unwrap();
    text.lines()
        .next()
        .unwrap()
        .trim_start_matches("#!")
        .trim()
        .to_string()
}
