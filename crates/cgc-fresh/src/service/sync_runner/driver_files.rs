//! The driver's files: the Python modules shipped inside the binary, written
//! next to each other in the workspace's private state directory before a
//! worker starts, and the command that runs them with `cgc`'s interpreter.

use super::*;

/// The driver, shipped inside the binary.
pub const INCREMENTAL_DRIVER: &str = include_str!("../../../driver/incremental.py");

/// Its file name in the state directory.
pub const DRIVER_FILE: &str = "incremental-driver.py";

/// The driver's parse cache module, shipped inside the binary and written
/// next to the driver, which loads it by this name.
pub const PARSE_CACHE_MODULE: &str = include_str!("../../../driver/parse_cache.py");

pub const PARSE_CACHE_MODULE_FILE: &str = "incremental-parse-cache.py";

/// The resolution memo the driver's worker keeps between requests
/// (`driver/resolution_memo.py`), installed next to the driver.
pub const RESOLUTION_MEMO_MODULE: &str = include_str!("../../../driver/resolution_memo.py");

pub const RESOLUTION_MEMO_MODULE_FILE: &str = "incremental-resolution-memo.py";

/// The stored-edge memo the driver's worker keeps between requests
/// (`driver/stored_edges.py`), installed next to the driver.
pub const STORED_EDGES_MODULE: &str = include_str!("../../../driver/stored_edges.py");

pub const STORED_EDGES_MODULE_FILE: &str = "incremental-stored-edges.py";

/// The repair of FalkorDB's range index that CGC's writes depend on
/// (`driver/falkordb_index.py`), installed next to the driver.
pub const FALKORDB_INDEX_MODULE: &str = include_str!("../../../driver/falkordb_index.py");

pub const FALKORDB_INDEX_MODULE_FILE: &str = "incremental-falkordb-index.py";

/// The check that the graph holds what a request wrote
/// (`driver/self_check.py`), installed next to the driver.
pub const SELF_CHECK_MODULE: &str = include_str!("../../../driver/self_check.py");

pub const SELF_CHECK_MODULE_FILE: &str = "incremental-self-check.py";

/// What the worker does when no request comes (the digest, the collection,
/// a held database's close), installed next to the driver.
pub const WORKER_PAUSES_MODULE: &str = include_str!("../../../driver/worker_pauses.py");

pub const WORKER_PAUSES_MODULE_FILE: &str = "incremental-worker-pauses.py";

/// The driver's seam with CGC (`driver/cgc_seam.py`): the CGC versions it
/// was proven against, and the gate that patches nothing on any other
/// unless `cgc.allowUnprovenVersion` is set; installed next to the driver.
pub const CGC_SEAM_MODULE: &str = include_str!("../../../driver/cgc_seam.py");

pub const CGC_SEAM_MODULE_FILE: &str = "incremental-cgc-seam.py";

/// The backend pin (`driver/backend_pin.py`): CGC's configured backend,
/// FalkorDB Lite's start-up patience, and the refusal to write to another
/// backend CGC fell back to; installed next to the driver.
pub const BACKEND_PIN_MODULE: &str = include_str!("../../../driver/backend_pin.py");

pub const BACKEND_PIN_MODULE_FILE: &str = "incremental-backend-pin.py";

/// The comparison of the graph with the tree (`driver/graph_baseline.py`)
/// that finds the changed files when nothing else names them; installed
/// next to the driver.
pub const GRAPH_BASELINE_MODULE: &str = include_str!("../../../driver/graph_baseline.py");

pub const GRAPH_BASELINE_MODULE_FILE: &str = "incremental-graph-baseline.py";

/// The driver's progress lines (`driver/progress.py`), written next to it.
pub const PROGRESS_MODULE: &str = include_str!("../../../driver/progress.py");

pub const PROGRESS_MODULE_FILE: &str = "incremental-progress.py";

/// The changed files' nodes written with few statements for many files
/// (`driver/batched_writes.py`), written next to the driver.
pub const BATCHED_WRITES_MODULE: &str = include_str!("../../../driver/batched_writes.py");

pub const BATCHED_WRITES_MODULE_FILE: &str = "incremental-batched-writes.py";

/// Every file of the driver, written next to each other before it starts:
/// (file name, text).
pub(super) const DRIVER_MODULES: [(&str, &str); 13] = [
    (DRIVER_FILE, INCREMENTAL_DRIVER),
    (PARSE_CACHE_MODULE_FILE, PARSE_CACHE_MODULE),
    (RESOLUTION_MEMO_MODULE_FILE, RESOLUTION_MEMO_MODULE),
    (STORED_EDGES_MODULE_FILE, STORED_EDGES_MODULE),
    (FALKORDB_INDEX_MODULE_FILE, FALKORDB_INDEX_MODULE),
    (SELF_CHECK_MODULE_FILE, SELF_CHECK_MODULE),
    (BACKEND_PIN_MODULE_FILE, BACKEND_PIN_MODULE),
    (MCP_TOOLS_MODULE_FILE, MCP_TOOLS_MODULE),
    (WORKER_PAUSES_MODULE_FILE, WORKER_PAUSES_MODULE),
    (CGC_SEAM_MODULE_FILE, CGC_SEAM_MODULE),
    (GRAPH_BASELINE_MODULE_FILE, GRAPH_BASELINE_MODULE),
    (PROGRESS_MODULE_FILE, PROGRESS_MODULE),
    (BATCHED_WRITES_MODULE_FILE, BATCHED_WRITES_MODULE),
];

/// The parse cache itself (CGC's per-file parse results between syncs),
/// in the same private state directory; the driver writes it.
pub const PARSE_CACHE_FILE: &str = "incremental-parse-cache.json";

/// Overrides the interpreter the driver runs with (otherwise `cgc`'s own,
/// read from its `#!` line).
pub const DRIVER_PYTHON_ENV: &str = "CGC_FRESH_DRIVER_PYTHON";

/// `name` as the spawner finds it: a path when it has a slash, else the
/// first match on `PATH`.
pub(super) fn resolve_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether `path` is a regular file with an execute bit.
pub(super) fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The first line of a file (at most 512 bytes of it).
pub(super) fn first_line(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut head = [0u8; 512];
    let mut file = std::fs::File::open(path)?;
    let n = file.read(&mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

impl SyncRunner {
    /// CGC's root options and the person's opt-in to an unproven CGC, as
    /// the driver's probe and worker take them.
    pub(super) fn driver_options(&self) -> DriverOptions<'_> {
        DriverOptions {
            global_args: &self.settings.cgc.global_args,
            allow_unproven_cgc: self.settings.cgc.allow_unproven_version,
        }
    }

    /// The interpreter of the configured `cgc` (or the override), and the
    /// driver written to the private state directory.
    pub(super) fn driver_command(&self) -> Result<(PathBuf, Vec<String>), String> {
        let (program, mut args) = match std::env::var(DRIVER_PYTHON_ENV) {
            Ok(python) if !python.is_empty() => (python, Vec::new()),
            _ => {
                let cgc = resolve_program(&self.settings.cgc.executable)
                    .ok_or_else(|| format!("{} not found", self.settings.cgc.executable))?;
                let first = first_line(&cgc)
                    .map_err(|error| format!("cannot read {}: {error}", cgc.display()))?;
                interpreter_from_shebang(&first).ok_or_else(|| {
                    format!(
                        "{} is not a script with a #! line naming its Python",
                        cgc.display()
                    )
                })?
            }
        };
        crate::paths::ensure_private_dir(self.driver_path.parent().unwrap_or(Path::new(".")))
            .map_err(|error| format!("state directory: {error}"))?;
        for (file, text) in DRIVER_MODULES {
            let path = self.driver_path.with_file_name(file);
            crate::atomic_file::write_atomically(&path, text.as_bytes()).map_err(|error| {
                format!("cannot write the driver to {}: {error}", path.display())
            })?;
        }
        args.push(self.driver_path.display().to_string());
        Ok((PathBuf::from(program), args))
    }
}
