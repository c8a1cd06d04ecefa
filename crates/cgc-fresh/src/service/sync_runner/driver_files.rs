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

/// The contract with the service (`driver/protocol.py`): the result and
/// progress line prefixes, the exit codes; written next to the driver.
pub const PROTOCOL_MODULE: &str = include_str!("../../../driver/protocol.py");

pub const PROTOCOL_MODULE_FILE: &str = "incremental-protocol.py";

/// The state a driver process keeps between requests (`driver/worker.py`),
/// written next to the driver.
pub const WORKER_MODULE: &str = include_str!("../../../driver/worker.py");

pub const WORKER_MODULE_FILE: &str = "incremental-worker.py";

/// A request, a prepare and the worker's loop (`driver/serve.py`), written
/// next to the driver.
pub const SERVE_MODULE: &str = include_str!("../../../driver/serve.py");

pub const SERVE_MODULE_FILE: &str = "incremental-serve.py";

/// CGC's API probe, configuration, backend and database open and close
/// (`driver/cgc_setup.py`), written next to the driver.
pub const CGC_SETUP_MODULE: &str = include_str!("../../../driver/cgc_setup.py");

pub const CGC_SETUP_MODULE_FILE: &str = "incremental-cgc-setup.py";

/// Step 1 and a request's recipe (`driver/apply.py`), written next to the
/// driver.
pub const APPLY_MODULE: &str = include_str!("../../../driver/apply.py");

pub const APPLY_MODULE_FILE: &str = "incremental-apply.py";

/// Steps 2 to 4 of a request on the open database
/// (`driver/database_apply.py`), written next to the driver.
pub const DATABASE_APPLY_MODULE: &str = include_str!("../../../driver/database_apply.py");

pub const DATABASE_APPLY_MODULE_FILE: &str = "incremental-database-apply.py";

/// The signatures of resolved rows and stored edges the driver compares
/// (`driver/signatures.py`), written next to the driver.
pub const SIGNATURES_MODULE: &str = include_str!("../../../driver/signatures.py");

pub const SIGNATURES_MODULE_FILE: &str = "incremental-signatures.py";

/// The read of the graph's rows (`driver/kuzu_reader.py`), written next to
/// the driver.
pub const KUZU_READER_MODULE: &str = include_str!("../../../driver/kuzu_reader.py");

pub const KUZU_READER_MODULE_FILE: &str = "incremental-kuzu-reader.py";

/// The patches of CGC for the length of a request
/// (`driver/session_patches.py`), written next to the driver.
pub const SESSION_PATCHES_MODULE: &str = include_str!("../../../driver/session_patches.py");

pub const SESSION_PATCHES_MODULE_FILE: &str = "incremental-session-patches.py";

/// The tree prepared ahead of a request (`driver/prepared_tree.py`),
/// written next to the driver.
pub const PREPARED_TREE_MODULE: &str = include_str!("../../../driver/prepared_tree.py");

pub const PREPARED_TREE_MODULE_FILE: &str = "incremental-prepared-tree.py";

/// Every file of the driver, written next to each other before it starts:
/// (file name, text). The driver imports `cgc_fresh_<name>` from
/// `incremental-<name>.py` (underscores as hyphens: its `CompanionFinder`),
/// so each file name is `incremental-` and its source's name so spelled.
pub(super) const DRIVER_MODULES: [(&str, &str); 23] = [
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
    (PROTOCOL_MODULE_FILE, PROTOCOL_MODULE),
    (WORKER_MODULE_FILE, WORKER_MODULE),
    (SERVE_MODULE_FILE, SERVE_MODULE),
    (CGC_SETUP_MODULE_FILE, CGC_SETUP_MODULE),
    (APPLY_MODULE_FILE, APPLY_MODULE),
    (DATABASE_APPLY_MODULE_FILE, DATABASE_APPLY_MODULE),
    (SIGNATURES_MODULE_FILE, SIGNATURES_MODULE),
    (KUZU_READER_MODULE_FILE, KUZU_READER_MODULE),
    (SESSION_PATCHES_MODULE_FILE, SESSION_PATCHES_MODULE),
    (PREPARED_TREE_MODULE_FILE, PREPARED_TREE_MODULE),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module of the driver's source folder is shipped, under the
    /// name the driver's `CompanionFinder` imports it by, with its text.
    #[test]
    fn every_driver_module_is_shipped_under_the_name_the_driver_imports() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("driver");
        let mut sources: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".py"))
            .collect();
        sources.sort();
        let mut shipped: Vec<(&str, &str)> = DRIVER_MODULES.to_vec();
        shipped.sort();
        let mut expected: Vec<(String, String)> = sources
            .iter()
            .map(|source| {
                let stem = source.trim_end_matches(".py");
                let file = if stem == "incremental" {
                    DRIVER_FILE.to_string()
                } else {
                    format!("incremental-{}.py", stem.replace('_', "-"))
                };
                (file, std::fs::read_to_string(dir.join(source)).unwrap())
            })
            .collect();
        expected.sort();
        let shipped: Vec<(String, String)> = shipped
            .into_iter()
            .map(|(file, text)| (file.to_string(), text.to_string()))
            .collect();
        let names =
            |list: &[(String, String)]| list.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>();
        assert_eq!(names(&shipped), names(&expected));
        assert!(
            shipped == expected,
            "a shipped module's text differs from its source"
        );
    }
}
