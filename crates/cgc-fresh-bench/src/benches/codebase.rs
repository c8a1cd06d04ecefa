//! The workspaces the real-CLI benches measure: generated modules in one
//! language, or a real code base — a published package of that language,
//! pinned by version and by the SHA-256 of what its registry serves,
//! fetched and unpacked by `pinned.rs` (`RealTree`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use super::generated::{self, Language};
use super::pinned::{self, Package, Registry};
use crate::machine::load_average;
use crate::real_cgc::RealCgc;

/// The real Python code base: `pip` 24.0's wheel (495 Python files).
pub const PIP: Package = Package {
    registry: Registry::PypiWheel,
    name: "pip",
    version: "24.0",
    // Its SHA-256 as PyPI publishes it; `pip download --require-hashes`
    // refuses anything else.
    sha256: "ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc",
};

/// A published tree of one language: which package, which of its files
/// the workspace takes, and where the edits are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealTree {
    pub language: Language,
    pub package: Package,
    /// The tree's top in the unpacked download (`""`: the archive's top).
    top: &'static str,
    /// Every file of the package (as published), or only the language's
    /// source files (`is_source`) and `manifests`.
    every_file: bool,
    /// The directories under the top whose source files are taken (none:
    /// all of them).
    dirs: &'static [&'static str],
    /// Files at the top taken as well (`go.mod`, `Cargo.toml`).
    manifests: &'static [&'static str],
    /// The directory (relative to the workspace) whose files are edited.
    edited_under: &'static str,
    /// Why this tree, for the report.
    pub about: &'static str,
}

impl RealTree {
    /// The tree `--real-code` installs for `language`.
    pub fn of(language: Language) -> RealTree {
        match language {
            Language::Python => RealTree {
                language,
                package: PIP,
                top: "",
                every_file: true,
                dirs: &[],
                manifests: &[],
                edited_under: "pip/_internal/",
                about: "the wheel as published; the edited files are pip's own \
                        modules (`pip/_internal/`), not the vendored libraries",
            },
            Language::TypeScript => RealTree {
                language,
                package: Package {
                    registry: Registry::Npm,
                    name: "rxjs",
                    version: "7.8.2",
                    sha256: "2312f8ffd9726ffd7bd53ea12c5f13663d09a3dc3326f448c70b88f5ef6fac82",
                },
                top: "package",
                every_file: false,
                dirs: &["src"],
                manifests: &[],
                edited_under: "src/internal/",
                about: "the TypeScript sources the package ships (`src/`, no `.d.ts`), \
                        not its compiled `dist/`",
            },
            Language::JavaScript => RealTree {
                language,
                package: Package {
                    registry: Registry::Npm,
                    name: "eslint",
                    version: "8.57.1",
                    sha256: "d1b7839d38cd5738b2242eab4e00771c212e71cc2580468b97934f0fc2f2de3b",
                },
                top: "package",
                every_file: false,
                dirs: &[],
                manifests: &[],
                edited_under: "lib/",
                about: "every `.js` file of the package (CommonJS, `lib/` with its \
                        rules, `bin/`, `conf/`, `messages/`)",
            },
            Language::Go => RealTree {
                language,
                package: Package {
                    registry: Registry::PypiSdist,
                    name: "gojsonnet",
                    version: "0.22.0",
                    sha256: "b00f09e019d403fc5fb0e691e043115dd84548e055c018638e22b6b7e9829d09",
                },
                top: "gojsonnet-0.22.0",
                every_file: false,
                dirs: &[],
                manifests: &["go.mod"],
                edited_under: "",
                about: "go-jsonnet's Go sources, which the source distribution of its \
                        Python binding ships: `go.mod` and every non-test `.go` file \
                        (a Go tree from a registry the bench reaches; the Go module \
                        proxy is not used)",
            },
            Language::Rust => RealTree {
                language,
                package: Package {
                    registry: Registry::Crates,
                    name: "tokio",
                    version: "1.54.1",
                    // The checksum this workspace's Cargo.lock records.
                    sha256: "b52fd3255258d26fac7264ab5a76b53c13367136dc011d3d6ad4f8ed070396a3",
                },
                top: "tokio-1.54.1",
                every_file: false,
                dirs: &["src"],
                manifests: &["Cargo.toml"],
                edited_under: "src/",
                about: "the library's sources (`Cargo.toml` and `src/`), the version \
                        and checksum this workspace's `Cargo.lock` pins",
            },
        }
    }

    /// Whether the workspace takes the file at `rel` (relative to the top).
    fn takes(&self, rel: &str) -> bool {
        if self.every_file || self.manifests.contains(&rel) {
            return true;
        }
        let under = self.dirs.is_empty()
            || self
                .dirs
                .iter()
                .any(|d| rel.strip_prefix(d).is_some_and(|r| r.starts_with('/')));
        under && is_source(self.language, rel)
    }
}

/// Whether `rel` is a source file of `language` (not a declaration file,
/// not a Go test).
pub fn is_source(language: Language, rel: &str) -> bool {
    match language {
        Language::Python => rel.ends_with(".py"),
        Language::TypeScript => rel.ends_with(".ts") && !rel.ends_with(".d.ts"),
        Language::JavaScript => rel.ends_with(".js"),
        Language::Go => rel.ends_with(".go") && !rel.ends_with("_test.go"),
        Language::Rust => rel.ends_with(".rs"),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codebase {
    /// `modules` generated modules of `language` (`generated.rs`).
    Generated { modules: usize, language: Language },
    /// The published tree of that language (`RealTree::of`).
    Real(Language),
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
            Codebase::Real(language) => format!(
                "real code base: {} ({})",
                RealTree::of(*language).package.pin(),
                language.name()
            ),
        }
    }

    pub fn language(&self) -> Language {
        match self {
            Codebase::Generated { language, .. } | Codebase::Real(language) => *language,
        }
    }

    /// The target for incremental p50 ÷ reconcile, in percent.
    pub fn share_target(&self) -> Option<u32> {
        match self {
            Codebase::Generated {
                modules: 400,
                language: Language::Python,
            } => Some(10),
            Codebase::Real(Language::Python) => Some(5),
            _ => None,
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
        Codebase::Real(language) => {
            let tree = RealTree::of(*language);
            let files = install_real(&tree, cgc, ws)?;
            let package = tree.package;
            Ok(format!(
                "`{}`, {} (sha256 `{}`, {}, then checked by the bench), unpacked \
                 outside the workspace; the workspace holds {}: {files} {} files",
                package.pin(),
                package.served(),
                package.sha256,
                package.fetched_by(),
                tree.about,
                language.name()
            ))
        }
    }
}

/// Fetches and unpacks `tree`'s package next to the workspace and copies
/// the files the tree takes into it; returns how many source files of the
/// tree's language it holds.
fn install_real(tree: &RealTree, cgc: &RealCgc, ws: &Path) -> Result<usize> {
    let beside = ws.parent().context("the workspace has no parent")?;
    let name = tree.package.name;
    let archive = pinned::fetch(cgc, &tree.package, &beside.join(format!("{name}-download")))?;
    let unpacked = beside.join(format!("{name}-unpacked"));
    pinned::unpack(cgc, &archive, &unpacked)?;
    let top = unpacked.join(tree.top);
    let mut sources = 0;
    for path in regular_files(&top)? {
        let rel = path
            .strip_prefix(&top)
            .context("a file outside its tree")?
            .to_string_lossy()
            .into_owned();
        if !tree.takes(&rel) {
            continue;
        }
        let dest = ws.join(&rel);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(&path, &dest).with_context(|| format!("copying {rel}"))?;
        sources += usize::from(is_source(tree.language, &rel));
    }
    if sources == 0 {
        bail!(
            "{} holds no {} file",
            tree.package.pin(),
            tree.language.name()
        );
    }
    Ok(sources)
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
/// `count` spread over the tree first, then (for a real tree) the other
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
        Codebase::Real(language) => {
            let tree = RealTree::of(*language);
            let mut files = source_files(ws, *language)?;
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
                for name in definitions(text, *language) {
                    *defined.entry(name).or_default() += 1;
                }
            }
            // Files under the tree's edited directory, every n-th, each
            // with its first top-level function defined nowhere else.
            let candidates: Vec<EditTarget> = texts
                .iter()
                .filter(|(rel, _)| rel.starts_with(tree.edited_under))
                .filter_map(|(rel, text)| {
                    let function = top_level_functions(text, *language)
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
                    "only {} {} files with a uniquely named top-level function",
                    candidates.len(),
                    tree.package.pin()
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

/// How a top-level function's definition begins in each language, at the
/// start of a line: `def NAME(` in Python; `function NAME(` in
/// TypeScript and JavaScript, exported or not, async or not; `func NAME(`
/// in Go; `fn NAME(` in Rust, public, crate-public or private, async or
/// not. A name is followed by `(`, or by `<` or `[` (type parameters).
const DEFINITION_PREFIXES: &[&str] = &[
    "def ",
    "export function ",
    "export async function ",
    "function ",
    "async function ",
    "func ",
    "pub fn ",
    "pub async fn ",
    "pub(crate) fn ",
    "pub(crate) async fn ",
    "fn ",
    "async fn ",
];

/// The prefixes of `DEFINITION_PREFIXES` that begin a top-level function
/// of `language`.
fn prefixes(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &DEFINITION_PREFIXES[..1],
        Language::TypeScript | Language::JavaScript => &DEFINITION_PREFIXES[1..5],
        Language::Go => &DEFINITION_PREFIXES[5..6],
        Language::Rust => &DEFINITION_PREFIXES[6..],
    }
}

/// The identifier `rest` begins with, if a definition's bracket follows it.
fn defined_name(rest: &str) -> Option<&str> {
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let (name, after) = rest.split_at(end);
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    (starts_well && after.starts_with(['(', '<', '['])).then_some(name)
}

/// `text` with the definition of `old` renamed to `new` (the first
/// top-level one: a line that begins with a definition of `old`).
pub fn rename_definition(text: &str, old: &str, new: &str) -> Option<String> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        for prefix in DEFINITION_PREFIXES {
            if let Some(rest) = line.strip_prefix(prefix) {
                if defined_name(rest) == Some(old) {
                    let name_at = at + prefix.len();
                    return Some(format!(
                        "{}{new}{}",
                        &text[..name_at],
                        &text[name_at + old.len()..]
                    ));
                }
            }
        }
        at += line.len();
    }
    None
}

/// Names of every function definition of `language` in `text`, at any
/// depth (methods too, where a line shows them: Go's receivers, Rust's
/// `fn` in an `impl`).
pub(super) fn definitions(text: &str, language: Language) -> Vec<String> {
    text.lines()
        .filter_map(|line| definition_in(line.trim_start(), language))
        .map(str::to_string)
        .collect()
}

fn definition_in(line: &str, language: Language) -> Option<&str> {
    match language {
        Language::Python => {
            let rest = line
                .strip_prefix("def ")
                .or_else(|| line.strip_prefix("async def "))?;
            let name = rest.split('(').next()?.trim();
            (!name.is_empty()).then_some(name)
        }
        Language::TypeScript | Language::JavaScript => {
            let mut rest = line;
            for word in ["export ", "default ", "declare ", "async "] {
                rest = rest.strip_prefix(word).unwrap_or(rest);
            }
            let rest = rest.strip_prefix("function")?;
            let rest = rest.strip_prefix('*').unwrap_or(rest).trim_start();
            defined_name(rest)
        }
        Language::Go => {
            let mut rest = line.strip_prefix("func ")?;
            if rest.starts_with('(') {
                // A method: skip the receiver.
                rest = rest[rest.find(')')? + 1..].trim_start();
            }
            defined_name(rest)
        }
        Language::Rust => {
            let mut rest = line;
            if let Some(after) = rest.strip_prefix("pub") {
                rest = match after.strip_prefix('(') {
                    Some(scope) => &scope[scope.find(')')? + 1..],
                    None => after,
                };
                rest = rest.trim_start();
            }
            for word in ["const ", "async ", "unsafe ", "extern \"C\" "] {
                rest = rest.strip_prefix(word).unwrap_or(rest);
            }
            defined_name(rest.strip_prefix("fn ")?)
        }
    }
}

/// Names of top-level functions of `language` (a line that begins with
/// one of its definition prefixes), in order.
fn top_level_functions(text: &str, language: Language) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            prefixes(language)
                .iter()
                .find_map(|prefix| defined_name(line.strip_prefix(prefix)?))
        })
        .map(str::to_string)
        .collect()
}

pub(super) fn python_files(dir: &Path) -> Result<Vec<PathBuf>> {
    source_files(dir, Language::Python)
}

/// Every source file of `language` under `dir` (`is_source`).
pub(super) fn source_files(dir: &Path, language: Language) -> Result<Vec<PathBuf>> {
    let mut files = regular_files(dir)?;
    files.retain(|path| is_source(language, &path.to_string_lossy()));
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
        assert_eq!(definitions(text, Language::Python), ["a", "b", "c"]);
        assert_eq!(top_level_functions(text, Language::Python), ["a"]);
    }

    #[test]
    fn definitions_and_top_level_functions_in_each_real_trees_language() {
        let ts = "export function map<T, R>(p: (v: T) => R): R;\n\
                  export function map(p: any): any {\n  function inner() {}\n}\n\
                  export async function load(): Promise<void> {}\n\
                  class C {\n  run(): void {}\n}\n";
        assert_eq!(
            definitions(ts, Language::TypeScript),
            ["map", "map", "inner", "load"]
        );
        assert_eq!(
            top_level_functions(ts, Language::TypeScript),
            ["map", "map", "load"]
        );
        let js = "function isX(node) {\n  function* gen() {}\n}\nmodule.exports = {};\n";
        assert_eq!(definitions(js, Language::JavaScript), ["isX", "gen"]);
        assert_eq!(top_level_functions(js, Language::JavaScript), ["isX"]);
        let go = "package p\n\nfunc New[T any](x T) *T {\n\treturn &x\n}\n\n\
                  func (p *Parser) parse(s string) error {\n\treturn nil\n}\n";
        assert_eq!(definitions(go, Language::Go), ["New", "parse"]);
        assert_eq!(top_level_functions(go, Language::Go), ["New"]);
        let rs = "pub(crate) fn spawn<F>(f: F) {}\n\
                  impl X {\n    pub const fn new() -> X { X }\n    async fn run(&self) {}\n}\n\
                  fn helper() {}\nunsafe fn raw() {}\n";
        assert_eq!(
            definitions(rs, Language::Rust),
            ["spawn", "new", "run", "helper", "raw"]
        );
        assert_eq!(top_level_functions(rs, Language::Rust), ["spawn", "helper"]);
    }

    #[test]
    fn a_definition_with_type_parameters_is_renamed_and_a_call_is_not() {
        let rs = "fn helper_two() {}\npub(crate) fn helper<T>(x: T) {\n    helper_two();\n}\n";
        assert_eq!(
            rename_definition(rs, "helper", "renamed").as_deref(),
            Some("fn helper_two() {}\npub(crate) fn renamed<T>(x: T) {\n    helper_two();\n}\n")
        );
        let go = "func Parse(s string) {}\nfunc ParseAll() { Parse(\"\") }\n";
        assert_eq!(
            rename_definition(go, "ParseAll", "Whole").as_deref(),
            Some("func Parse(s string) {}\nfunc Whole() { Parse(\"\") }\n")
        );
        assert_eq!(rename_definition("  fn nested() {}\n", "nested", "x"), None);
    }

    #[test]
    fn a_real_tree_takes_its_sources_and_manifests_only() {
        let ts = RealTree::of(Language::TypeScript);
        assert!(ts.takes("src/internal/Observable.ts"));
        assert!(!ts.takes("src/internal/types.d.ts"));
        assert!(!ts.takes("dist/cjs/index.js"));
        assert!(!ts.takes("srcx/a.ts"));
        let go = RealTree::of(Language::Go);
        assert!(go.takes("go.mod"));
        assert!(go.takes("ast/ast.go"));
        assert!(!go.takes("ast/ast_test.go"));
        assert!(!go.takes("setup.py"));
        let rust = RealTree::of(Language::Rust);
        assert!(rust.takes("Cargo.toml"));
        assert!(rust.takes("src/lib.rs"));
        assert!(!rust.takes("tests/io.rs"));
        assert!(RealTree::of(Language::Python).takes("pip-24.0.dist-info/METADATA"));
    }
}
