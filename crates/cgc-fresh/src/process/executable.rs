//! Finding the configured `cgc` the way a spawn will: a name is looked up
//! on `PATH`, a path containing `/` is taken relative to the workspace (the
//! children's working directory). Used to warn a person at start-up and on
//! every status request that syncs cannot run, instead of letting the first
//! edit discover it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Where `executable` resolves, or a sentence saying why it does not.
pub fn locate(
    executable: &str,
    search_path: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, String> {
    which::which_in(executable, search_path, cwd).map_err(|_| {
        if executable.contains('/') {
            format!(
                "the configured cgc ({executable}) is not an executable file; \
                 syncs will fail until cgc.executable names one"
            )
        } else {
            format!(
                "`{executable}` (cgc.executable) was not found on PATH; syncs will fail \
                 until CodeGraphContext is installed there or cgc.executable names it"
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_name_is_found_on_the_search_path_only_when_executable() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("cgc");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = dir.path().as_os_str();
        let missing = locate("cgc", Some(path), dir.path()).unwrap_err();
        assert!(missing.contains("not found on PATH"), "{missing}");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate("cgc", Some(path), dir.path()), Ok(tool));
    }

    #[test]
    fn a_path_is_taken_relative_to_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let tool = dir.path().join("bin/cgc");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let empty = tempfile::tempdir().unwrap();
        let found = locate("bin/cgc", Some(empty.path().as_os_str()), dir.path()).unwrap();
        assert_eq!(found.canonicalize().unwrap(), tool.canonicalize().unwrap());
        let error = locate("./nope/cgc", None, dir.path()).unwrap_err();
        assert!(error.contains("not an executable file"), "{error}");
    }
}
