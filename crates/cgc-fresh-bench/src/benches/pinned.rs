//! Published packages the benches install as real code, each pinned by
//! version and by the SHA-256 of the file its registry serves: fetched by
//! the registry's own client, the hash checked here whatever the client
//! checked, and unpacked by the real CLI's Python (`zipfile`, `tarfile`):
//! one path for every registry.
//!
//! - a PyPI wheel or source distribution: the real CLI's own `pip download
//!   --no-deps --require-hashes` (for a source distribution pip prepares
//!   its metadata, running its build backend; a wheel needs no build step);
//! - an npm tarball: `npm pack` (which checks the registry's integrity
//!   hash too; a package's scripts do not run);
//! - a crates.io `.crate`: cargo's download cache, filled by `cargo fetch`
//!   of a throw-away package that depends on exactly that version when the
//!   cache lacks it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::real_cgc::RealCgc;

/// Where a pinned package comes from, and so which client fetches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    PypiWheel,
    PypiSdist,
    Npm,
    Crates,
}

/// A published package pinned by version and by the SHA-256 of the file
/// its registry serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    pub registry: Registry,
    pub name: &'static str,
    pub version: &'static str,
    pub sha256: &'static str,
}

impl Package {
    /// The pin as the registry's client spells it: `pip==24.0`,
    /// `rxjs@7.8.2`, `tokio 1.54.1`.
    pub fn pin(&self) -> String {
        match self.registry {
            Registry::PypiWheel | Registry::PypiSdist => format!("{}=={}", self.name, self.version),
            Registry::Npm => format!("{}@{}", self.name, self.version),
            Registry::Crates => format!("{} {}", self.name, self.version),
        }
    }

    /// What was fetched, for a report: `the PyPI wheel`, `the npm tarball`, …
    pub fn served(&self) -> &'static str {
        match self.registry {
            Registry::PypiWheel => "the PyPI wheel",
            Registry::PypiSdist => "the PyPI source distribution",
            Registry::Npm => "the npm tarball",
            Registry::Crates => "the crates.io `.crate`",
        }
    }

    /// How the download was made, for a report.
    pub fn fetched_by(&self) -> &'static str {
        match self.registry {
            Registry::PypiWheel | Registry::PypiSdist => {
                "fetched by the real CLI's own `pip download --require-hashes`"
            }
            Registry::Npm => "fetched by `npm pack`",
            Registry::Crates => {
                "taken from cargo's download cache (`cargo fetch` fills it when absent)"
            }
        }
    }
}

/// Downloads `package` into `download` (a directory of its own) with its
/// registry's client and checks its SHA-256; returns the file's path.
pub fn fetch(cgc: &RealCgc, package: &Package, download: &Path) -> Result<PathBuf> {
    fs::create_dir_all(download)?;
    let file = match package.registry {
        Registry::PypiWheel | Registry::PypiSdist => fetch_pypi(cgc, package, download)?,
        Registry::Npm => fetch_npm(package, download)?,
        Registry::Crates => fetch_crate(package, download)?,
    };
    let got = sha256_of(cgc, &file)?;
    if got != package.sha256 {
        bail!(
            "{}: SHA-256 {got}, pinned {}",
            file.display(),
            package.sha256
        );
    }
    Ok(file)
}

/// Unpacks `archive` (a wheel: zip; anything else: a gzipped tar) into
/// `dest` with the real CLI's Python; nothing from the archive runs.
pub fn unpack(cgc: &RealCgc, archive: &Path, dest: &Path) -> Result<()> {
    let python = cgc_python(cgc)?;
    fs::create_dir_all(dest)?;
    let is_zip = archive
        .extension()
        .is_some_and(|e| e == "whl" || e == "zip");
    let mut cmd = Command::new(&python);
    if is_zip {
        cmd.args(["-m", "zipfile", "-e"]).arg(archive).arg(dest);
    } else {
        // Members that would land outside `dest` (absolute, `..`, links
        // out) are refused by the `data` filter where this Python has it.
        cmd.args([
            "-c",
            "import sys, tarfile\n\
             with tarfile.open(sys.argv[1]) as t:\n\
             \x20   kw = {'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}\n\
             \x20   t.extractall(sys.argv[2], **kw)\n",
        ])
        .arg(archive)
        .arg(dest);
    }
    let out = cmd
        .output()
        .with_context(|| format!("unpacking {}", archive.display()))?;
    if !out.status.success() {
        bail!(
            "unpacking {} failed: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The interpreter of the real `cgc` (its `#!` line).
fn cgc_python(cgc: &RealCgc) -> Result<PathBuf> {
    let text = fs::read_to_string(cgc.program())
        .with_context(|| format!("reading {}", cgc.program().display()))?;
    let first = text.lines().next().unwrap_or_default();
    match first.strip_prefix("#!") {
        Some(python) if !python.trim().contains(' ') => Ok(PathBuf::from(python.trim())),
        _ => bail!(
            "{} does not name its Python on its #! line",
            cgc.program().display()
        ),
    }
}

/// The file's SHA-256, in hex, by the real CLI's Python.
fn sha256_of(cgc: &RealCgc, file: &Path) -> Result<String> {
    let python = cgc_python(cgc)?;
    let out = Command::new(&python)
        .args([
            "-c",
            "import hashlib, sys\n\
             h = hashlib.sha256()\n\
             with open(sys.argv[1], 'rb') as f:\n\
             \x20   for block in iter(lambda: f.read(1 << 20), b''):\n\
             \x20       h.update(block)\n\
             print(h.hexdigest())\n",
        ])
        .arg(file)
        .output()
        .with_context(|| format!("hashing {}", file.display()))?;
    if !out.status.success() {
        bail!(
            "hashing {} failed: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The only file in `dir` whose name ends with `suffix`.
fn the_file(dir: &Path, suffix: &str, what: &str) -> Result<PathBuf> {
    let found: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("{what} left no *{suffix} in {}", dir.display()),
        _ => bail!("{what} left {} *{suffix} in {}", found.len(), dir.display()),
    }
}

fn run(mut cmd: Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

fn fetch_pypi(cgc: &RealCgc, package: &Package, download: &Path) -> Result<PathBuf> {
    let python = cgc_python(cgc)?;
    let pin = package.pin();
    let requirements = download.join("requirements.txt");
    fs::write(
        &requirements,
        format!("{pin} --hash=sha256:{}\n", package.sha256),
    )?;
    let (only, suffix) = match package.registry {
        Registry::PypiWheel => ("--only-binary", ".whl"),
        _ => ("--no-binary", ".tar.gz"),
    };
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "pip", "download", "--no-deps", only, ":all:"])
        .args(["--require-hashes", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .arg("--dest")
        .arg(download);
    run(cmd, &format!("pip download {pin}"))?;
    the_file(download, suffix, &format!("pip download {pin}"))
}

fn fetch_npm(package: &Package, download: &Path) -> Result<PathBuf> {
    let pin = package.pin();
    let mut cmd = Command::new("npm");
    cmd.current_dir(download)
        .args(["pack", "--silent", "--ignore-scripts", &pin]);
    run(cmd, &format!("npm pack {pin}"))?;
    the_file(download, ".tgz", &format!("npm pack {pin}"))
}

/// The `.crate` from cargo's download cache (every registry directory of
/// `$CARGO_HOME/registry/cache`), copied into `download`.
fn fetch_crate(package: &Package, download: &Path) -> Result<PathBuf> {
    let name = format!("{}-{}.crate", package.name, package.version);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let cache = cargo_home.join("registry").join("cache");
    let cached = || -> Option<PathBuf> {
        fs::read_dir(&cache)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join(&name)))
            .find(|p| p.is_file())
    };
    let source = match cached() {
        Some(path) => path,
        None => {
            // A package that depends on exactly this version: `cargo fetch`
            // downloads it (and its dependencies) into the cache.
            let dir = download.join("fetch-crate");
            fs::create_dir_all(dir.join("src"))?;
            fs::write(
                dir.join("Cargo.toml"),
                format!(
                    "[package]\nname = \"cgc-fresh-bench-fetch\"\nversion = \"0.0.0\"\n\
                     edition = \"2021\"\n\n[dependencies]\n{} = \"={}\"\n",
                    package.name, package.version
                ),
            )?;
            fs::write(dir.join("src").join("lib.rs"), "")?;
            let mut cmd = Command::new("cargo");
            cmd.arg("fetch")
                .arg("--manifest-path")
                .arg(dir.join("Cargo.toml"));
            run(cmd, &format!("cargo fetch ({})", package.pin()))?;
            cached().with_context(|| format!("cargo fetch left no {name} in its cache"))?
        }
    };
    let dest = download.join(&name);
    fs::copy(&source, &dest).with_context(|| format!("copying {}", source.display()))?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_spelled_as_each_client_spells_them() {
        let package = |registry| Package {
            registry,
            name: "x",
            version: "1.2.3",
            sha256: "",
        };
        assert_eq!(package(Registry::PypiWheel).pin(), "x==1.2.3");
        assert_eq!(package(Registry::PypiSdist).pin(), "x==1.2.3");
        assert_eq!(package(Registry::Npm).pin(), "x@1.2.3");
        assert_eq!(package(Registry::Crates).pin(), "x 1.2.3");
    }

    #[test]
    fn the_one_file_of_a_suffix_is_found_and_two_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.tgz"), "").unwrap();
        fs::write(dir.path().join("requirements.txt"), "").unwrap();
        assert_eq!(
            the_file(dir.path(), ".tgz", "t").unwrap(),
            dir.path().join("a.tgz")
        );
        fs::write(dir.path().join("b.tgz"), "").unwrap();
        assert!(the_file(dir.path(), ".tgz", "t").is_err());
        assert!(the_file(dir.path(), ".whl", "t").is_err());
    }
}
