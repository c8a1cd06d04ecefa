//! The workspaces `edit-to-fresh` measures: generated Python modules, or a
//! real code base — the source of a pinned `pip` release, fetched from PyPI
//! by the real CLI's own `pip` with its hash required, and unpacked (a
//! wheel: no build step runs code from the download).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use super::generated::{self, Language};
use crate::machine::load_average;
use crate::real_cgc::RealCgc;

/// The real code base: `pip` 24.0's wheel (495 Python files).
pub const PIP_PIN: &str = "pip==24.0";
/// Its SHA-256 as PyPI publishes it; `pip download --require-hashes`
/// refuses anything else.
pub const PIP_SHA256: &str = "ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codebase {
    /// `modules` generated modules of `language` (`generated.rs`).
    Generated { modules: usize, language: Language },
    /// The pinned `pip` source.
    Pip,
}

impl Codebase {
    pub fn label(&self) -> String {
        match self {
            Codebase::Generated {
                modules,
                language: Language::Python,
            } => format!("{modules} generated modules"),
            Codebase::Generated { modules, language } => {
                format!("{modules} generated {} modules", language.name())
            }
            Codebase::Pip => format!("real code base: {PIP_PIN}"),
        }
    }

    /// The issue's target for incremental p50 ÷ reconcile, in percent.
    pub fn share_target(&self) -> Option<u32> {
        match self {
            Codebase::Generated {
                modules: 400,
                language: Language::Python,
            } => Some(10),
            Codebase::Pip => Some(5),
            Codebase::Generated { .. } => None,
        }
    }
}

/// One file to edit and the top-level function whose definition is renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditTarget {
    pub rel: String,
    pub function: String,
}

/// Fills the (empty) workspace; returns a description for the report.
pub fn install(codebase: &Codebase, cgc: &RealCgc, ws: &Path) -> Result<String> {
    match codebase {
        Codebase::Generated { modules, language } => generated::write(ws, *modules, *language),
        Codebase::Pip => {
            let files = install_pip(cgc, ws)?;
            Ok(format!(
                "the `{PIP_PIN}` wheel from PyPI (sha256 `{PIP_SHA256}`, required by \
                 `pip download --require-hashes`), unpacked: {files} Python files"
            ))
        }
    }
}

/// A workspace filled and indexed by the real CLI, as a report describes it.
pub struct Indexed {
    /// What the workspace holds (`install`'s description).
    pub described: String,
    /// How long `cgc index .` took.
    pub index_time: Duration,
    /// The `File` nodes the index left.
    pub files: u64,
    /// The load average just before indexing.
    pub load_before: String,
}

/// Fills the (empty) workspace with `codebase` and indexes it with `cgc
/// index .`, timed; `bench` names the benchmark in progress lines.
pub fn install_and_index(
    codebase: &Codebase,
    cgc: &RealCgc,
    ws: &Path,
    bench: &str,
) -> Result<Indexed> {
    let described = install(codebase, cgc, ws)?;
    let load_before = load_average();
    eprintln!("cgc-fresh-bench: {bench}: indexing {described}");
    let started = Instant::now();
    cgc.index()?;
    let index_time = started.elapsed();
    let files = cgc
        .query("MATCH (f:File) RETURN count(f) AS n")?
        .first()
        .and_then(|row| row["n"].as_u64())
        .unwrap_or(0);
    Ok(Indexed {
        described,
        index_time,
        files,
        load_before,
    })
}

/// Files to edit, each with a top-level function defined nowhere else:
/// `count` spread over the tree first, then (for `pip`) the other
/// candidates, in case CodeGraphContext does not index some of the first
/// (it ignores directories such as `build/`; see `indexed_targets`).
pub fn edit_targets(codebase: &Codebase, ws: &Path, count: usize) -> Result<Vec<EditTarget>> {
    match codebase {
        Codebase::Generated { modules, language } => {
            if *modules < count + 1 {
                bail!("{modules} modules are too few for {count} edits");
            }
            Ok((0..count)
                .map(|i| {
                    let m = (i + 1) * modules / (count + 1);
                    EditTarget {
                        rel: language.module(m),
                        function: format!("m{m:03}_helper"),
                    }
                })
                .collect())
        }
        Codebase::Pip => {
            let mut files = python_files(ws)?;
            files.sort();
            let texts: Vec<(String, String)> = files
                .iter()
                .filter_map(|p| {
                    let rel = p.strip_prefix(ws).ok()?.to_string_lossy().into_owned();
                    Some((rel, fs::read_to_string(p).ok()?))
                })
                .collect();
            let mut defined: std::collections::HashMap<String, usize> = Default::default();
            for (_, text) in &texts {
                for name in definitions(text) {
                    *defined.entry(name).or_default() += 1;
                }
            }
            // Modules of pip's own code (not the vendored libraries), every
            // n-th, each with its first function defined nowhere else.
            let candidates: Vec<EditTarget> = texts
                .iter()
                .filter(|(rel, _)| rel.starts_with("pip/_internal/"))
                .filter_map(|(rel, text)| {
                    let function = top_level_functions(text)
                        .into_iter()
                        .find(|name| defined.get(name) == Some(&1))?;
                    Some(EditTarget {
                        rel: rel.clone(),
                        function,
                    })
                })
                .collect();
            if candidates.len() < count {
                bail!(
                    "only {} pip modules with a uniquely named function",
                    candidates.len()
                );
            }
            let step = candidates.len() / count;
            let picks: Vec<usize> = (0..count).map(|i| i * step).collect();
            let rest = (0..candidates.len()).filter(|i| !picks.contains(i));
            Ok(picks
                .iter()
                .copied()
                .chain(rest)
                .map(|i| candidates[i].clone())
                .collect())
        }
    }
}

/// How a top-level function's definition begins in each language the
/// benches generate (`generated.rs`) or install: `def NAME(` in Python,
/// `export function NAME(` in TypeScript and JavaScript, `func NAME(` in
/// Go, `pub fn NAME(` in Rust.
const DEFINITION_PREFIXES: &[&str] = &["def ", "export function ", "func ", "pub fn "];

/// `text` with the definition of `old` renamed to `new` (the first
/// top-level one: a line that begins with a definition of `old`).
pub fn rename_definition(text: &str, old: &str, new: &str) -> Option<String> {
    DEFINITION_PREFIXES.iter().find_map(|prefix| {
        let needle = format!("{prefix}{old}(");
        let at = text
            .match_indices(&needle)
            .map(|(i, _)| i)
            .find(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')?;
        Some(format!(
            "{}{prefix}{new}({}",
            &text[..at],
            &text[at + needle.len()..]
        ))
    })
}

/// Names of every `def`/`async def`, at any depth.
pub(super) fn definitions(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line
                .strip_prefix("def ")
                .or_else(|| line.strip_prefix("async def "))?;
            Some(rest.split('(').next()?.trim().to_string())
        })
        .collect()
}

/// Names of top-level `def NAME(` lines.
fn top_level_functions(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("def ")?;
            let name = rest.split('(').next()?.trim();
            (!name.is_empty() && rest.contains('(')).then(|| name.to_string())
        })
        .collect()
}

pub(super) fn python_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = regular_files(dir)?;
    files.retain(|path| path.extension().is_some_and(|e| e == "py"));
    Ok(files)
}

/// Every regular file under `dir`, in the order of a depth-first walk (a
/// symlink is neither followed nor listed).
pub(super) fn regular_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                out.push(path);
            }
        }
    }
    Ok(out)
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

fn install_pip(cgc: &RealCgc, ws: &Path) -> Result<usize> {
    let download = ws
        .parent()
        .context("the workspace has no parent")?
        .join("pip-download");
    let wheel = fetch_wheel(cgc, PIP_PIN, PIP_SHA256, &download)?;
    unpack_wheel(cgc, &wheel, ws)?;
    Ok(python_files(ws)?.len())
}

/// Downloads the wheel of `pin` into `download` (a directory of its own)
/// with the real CLI's own `pip`, which refuses any file whose SHA-256 is
/// not `sha256`; returns the wheel's path.
pub fn fetch_wheel(cgc: &RealCgc, pin: &str, sha256: &str, download: &Path) -> Result<PathBuf> {
    let python = cgc_python(cgc)?;
    fs::create_dir_all(download)?;
    let requirements = download.join("requirements.txt");
    fs::write(&requirements, format!("{pin} --hash=sha256:{sha256}\n"))?;
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
        ])
        .args(["--require-hashes", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .arg("--dest")
        .arg(download)
        .output()
        .with_context(|| format!("running {} -m pip download", python.display()))?;
    if !out.status.success() {
        bail!(
            "pip download {pin} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fs::read_dir(download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("pip download {pin} left no wheel"))
}

/// Unpacks `wheel` into `dest` with `python -m zipfile` (a wheel needs no
/// build step, so nothing from the download runs).
pub fn unpack_wheel(cgc: &RealCgc, wheel: &Path, dest: &Path) -> Result<()> {
    let python = cgc_python(cgc)?;
    let out = Command::new(&python)
        .args(["-m", "zipfile", "-e"])
        .arg(wheel)
        .arg(dest)
        .output()
        .context("unpacking the wheel")?;
    if !out.status.success() {
        bail!(
            "unpacking {} failed: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `modules` generated Python modules (`generated.rs`).
pub fn write_generated(ws: &Path, modules: usize) -> Result<()> {
    generated::write(ws, modules, Language::Python).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_top_level_definition_is_renamed() {
        let text = "class A:\n    def go(self):\n        pass\n\n\ndef go(x):\n    return go(x)\n";
        assert_eq!(
            rename_definition(text, "go", "went").as_deref(),
            Some("class A:\n    def go(self):\n        pass\n\n\ndef went(x):\n    return go(x)\n")
        );
        assert_eq!(rename_definition("x = 1\n", "go", "went"), None);
    }

    #[test]
    fn generated_targets_are_distinct_modules() {
        let targets = edit_targets(
            &Codebase::Generated {
                modules: 400,
                language: Language::Python,
            },
            Path::new("."),
            6,
        )
        .unwrap();
        let files: std::collections::BTreeSet<_> = targets.iter().map(|t| &t.rel).collect();
        assert_eq!(files.len(), 6);
        assert_eq!(targets[0].function, "m057_helper");
    }

    #[test]
    fn definitions_count_nested_and_async_ones() {
        let text = "def a():\n    def b():\n        pass\nasync def c():\n    pass\n";
        assert_eq!(definitions(text), ["a", "b", "c"]);
        assert_eq!(top_level_functions(text), ["a"]);
    }
}
