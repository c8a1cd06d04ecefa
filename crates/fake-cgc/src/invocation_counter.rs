//! Counts invocations per subcommand for scenario sequences, in a JSON file
//! next to the scenario (`<scenario>.counts`, e.g. `{"watch": 2}`), under an
//! exclusive `flock` so that concurrent fakes each get their own number.
//! Delete the file to start counting afresh.

use nix::fcntl::{Flock, FlockArg};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The counter file that belongs to `scenario`.
pub fn counter_path(scenario: &Path) -> PathBuf {
    let mut name = scenario.as_os_str().to_owned();
    name.push(".counts");
    PathBuf::from(name)
}

/// Holds `flock(LOCK_EX)` on a file until dropped.
/// An exclusive `flock` on a second handle of the counter file, released
/// when dropped.
struct ExclusiveFlock {
    _held: Flock<File>,
}

impl ExclusiveFlock {
    fn acquire(file: &File) -> io::Result<Self> {
        let mut handle = file.try_clone()?;
        loop {
            match Flock::lock(handle, FlockArg::LockExclusive) {
                Ok(lock) => return Ok(ExclusiveFlock { _held: lock }),
                Err((returned, nix::errno::Errno::EINTR)) => handle = returned,
                Err((_, errno)) => return Err(errno.into()),
            }
        }
    }
}

/// Returns how many earlier invocations of `key` were counted in `path`
/// and counts this one.
pub fn count_invocation(path: &Path, key: &str) -> io::Result<u64> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let _lock = ExclusiveFlock::acquire(&file)?;
    // `&File` does the I/O so that the guard's shared borrow can stay.
    let mut io = &file;
    let mut text = String::new();
    io.read_to_string(&mut text)?;
    let mut counts: BTreeMap<String, u64> = if text.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(&text).map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("counter file {}: {error}", path.display()),
            )
        })?
    };
    let slot = counts.entry(key.to_owned()).or_insert(0);
    let earlier = *slot;
    *slot += 1;
    let updated = serde_json::to_vec(&counts).map_err(io::Error::other)?;
    file.set_len(0)?;
    io.seek(SeekFrom::Start(0))?;
    io.write_all(&updated)?;
    Ok(earlier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_key() {
        let dir = std::env::temp_dir().join(format!("fake-cgc-counter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = counter_path(&dir.join("scenario.json"));
        let _ = std::fs::remove_file(&path);
        assert_eq!(count_invocation(&path, "watch").unwrap(), 0);
        assert_eq!(count_invocation(&path, "watch").unwrap(), 1);
        assert_eq!(count_invocation(&path, "index").unwrap(), 0);
        assert_eq!(count_invocation(&path, "watch").unwrap(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
