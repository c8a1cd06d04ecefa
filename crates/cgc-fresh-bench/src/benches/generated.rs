//! Generated workspaces in each language the incremental driver caches
//! parses for (`cgc_seam.FILE_ALONE_SUFFIXES`): `modules` modules, each
//! with a helper, a compute that calls it and the previous module's
//! export, an export, and a class (a struct with a method in Go and Rust).
//! Every language's module `i` defines the same names (`m{i:03}_helper`,
//! `m{i:03}_compute`, `m{i:03}_export`, `Widget{i:03}`), so the benches
//! edit and check them the same way.

use std::fs;
use std::path::Path;

use anyhow::{Context as _, Result};

/// The language of a generated workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Python,
    #[value(name = "ts")]
    TypeScript,
    #[value(name = "js")]
    JavaScript,
    Go,
    Rust,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::TypeScript => "TypeScript",
            Language::JavaScript => "JavaScript",
            Language::Go => "Go",
            Language::Rust => "Rust",
        }
    }

    /// Module `i`'s path, relative to the workspace.
    pub fn module(self, i: usize) -> String {
        match self {
            Language::Python => format!("pkg/mod_{i:03}.py"),
            Language::TypeScript => format!("src/mod_{i:03}.ts"),
            Language::JavaScript => format!("lib/mod_{i:03}.js"),
            Language::Go => format!("pkg/mod_{i:03}.go"),
            Language::Rust => format!("src/mod_{i:03}.rs"),
        }
    }

    /// What the workspace holds besides the modules, for the report.
    fn layout(self, modules: usize) -> String {
        let first = self.module(0);
        let extra = match self {
            Language::Python => " + `pkg/__init__.py`",
            Language::TypeScript | Language::JavaScript => "",
            Language::Go => " + `go.mod` (one package)",
            Language::Rust => " + `Cargo.toml` and `src/lib.rs` declaring every module",
        };
        format!(
            "{modules} generated {} modules (`{}`, 3 functions and a class each, calling \
             into the previous module){extra}",
            self.name(),
            first.replace("000", "NNN")
        )
    }

    /// Module `i`'s source.
    fn source(self, i: usize) -> String {
        let previous = i.checked_sub(1);
        match self {
            Language::Python => {
                let (import, upstream) = match previous {
                    Some(p) => (
                        format!("from pkg.mod_{p:03} import m{p:03}_export\n\n\n"),
                        format!("m{p:03}_export(x)"),
                    ),
                    None => (String::new(), "0".to_string()),
                };
                format!(
                    "\"\"\"Generated module {i}.\"\"\"\n{import}\
                     def m{i:03}_helper(x):\n    return x * {i} + 1\n\n\n\
                     def m{i:03}_compute(x):\n    return m{i:03}_helper(x) + {upstream}\n\n\n\
                     def m{i:03}_export(x):\n    return m{i:03}_compute(x) - 1\n\n\n\
                     class Widget{i:03}:\n    def run(self, x):\n        return m{i:03}_export(x)\n"
                )
            }
            Language::TypeScript | Language::JavaScript => {
                let typed = self == Language::TypeScript;
                let (num, ret) = if typed {
                    (": number", ": number")
                } else {
                    ("", "")
                };
                let suffix = if typed { "" } else { ".js" };
                let (import, upstream) = match previous {
                    Some(p) => (
                        format!("import {{ m{p:03}_export }} from \"./mod_{p:03}{suffix}\";\n\n"),
                        format!("m{p:03}_export(x)"),
                    ),
                    None => (String::new(), "0".to_string()),
                };
                format!(
                    "// Generated module {i}.\n{import}\
                     export function m{i:03}_helper(x{num}){ret} {{\n  return x * {i} + 1;\n}}\n\n\
                     export function m{i:03}_compute(x{num}){ret} {{\n  return m{i:03}_helper(x) + {upstream};\n}}\n\n\
                     export function m{i:03}_export(x{num}){ret} {{\n  return m{i:03}_compute(x) - 1;\n}}\n\n\
                     export class Widget{i:03} {{\n  run(x{num}){ret} {{\n    return m{i:03}_export(x);\n  }}\n}}\n"
                )
            }
            Language::Go => {
                let upstream = previous
                    .map(|p| format!("m{p:03}_export(x)"))
                    .unwrap_or_else(|| "0".into());
                format!(
                    "// Generated module {i}.\npackage pkg\n\n\
                     func m{i:03}_helper(x int) int {{\n\treturn x*{i} + 1\n}}\n\n\
                     func m{i:03}_compute(x int) int {{\n\treturn m{i:03}_helper(x) + {upstream}\n}}\n\n\
                     func m{i:03}_export(x int) int {{\n\treturn m{i:03}_compute(x) - 1\n}}\n\n\
                     // Widget{i:03} runs the export.\ntype Widget{i:03} struct{{}}\n\n\
                     func (w Widget{i:03}) Run(x int) int {{\n\treturn m{i:03}_export(x)\n}}\n"
                )
            }
            Language::Rust => {
                let (import, upstream) = match previous {
                    Some(p) => (
                        format!("use crate::mod_{p:03}::m{p:03}_export;\n\n"),
                        format!("m{p:03}_export(x)"),
                    ),
                    None => (String::new(), "0".to_string()),
                };
                format!(
                    "//! Generated module {i}.\n{import}\
                     pub fn m{i:03}_helper(x: u64) -> u64 {{\n    x * {i} + 1\n}}\n\n\
                     pub fn m{i:03}_compute(x: u64) -> u64 {{\n    m{i:03}_helper(x) + {upstream}\n}}\n\n\
                     pub fn m{i:03}_export(x: u64) -> u64 {{\n    m{i:03}_compute(x) - 1\n}}\n\n\
                     pub struct Widget{i:03};\n\n\
                     impl Widget{i:03} {{\n    pub fn run(&self, x: u64) -> u64 {{\n        m{i:03}_export(x)\n    }}\n}}\n"
                )
            }
        }
    }

    /// The files besides the modules.
    fn support_files(self, modules: usize) -> Vec<(&'static str, String)> {
        match self {
            Language::Python => vec![("pkg/__init__.py", String::new())],
            Language::TypeScript | Language::JavaScript => Vec::new(),
            Language::Go => vec![("go.mod", "module example.com/bench\n\ngo 1.21\n".into())],
            Language::Rust => vec![
                (
                    "Cargo.toml",
                    "[package]\nname = \"bench\"\nversion = \"0.1.0\"\nedition = \"2021\"\n".into(),
                ),
                (
                    "src/lib.rs",
                    (0..modules)
                        .map(|i| format!("pub mod mod_{i:03};\n"))
                        .collect(),
                ),
            ],
        }
    }

    /// A module with one function `name`, at the workspace's root (as the
    /// person would add one while no service runs): its path and source.
    pub fn lone_module(self, stem: &str, name: &str) -> (String, String) {
        match self {
            Language::Python => (
                format!("{stem}.py"),
                format!("def {name}(x):\n    return x + 1\n"),
            ),
            Language::TypeScript => (
                format!("{stem}.ts"),
                format!("export function {name}(x: number): number {{\n  return x + 1;\n}}\n"),
            ),
            Language::JavaScript => (
                format!("{stem}.js"),
                format!("export function {name}(x) {{\n  return x + 1;\n}}\n"),
            ),
            Language::Go => (
                format!("{stem}.go"),
                format!("package main\n\nfunc {name}(x int) int {{\n\treturn x + 1\n}}\n"),
            ),
            Language::Rust => (
                format!("{stem}.rs"),
                format!("pub fn {name}(x: u64) -> u64 {{\n    x + 1\n}}\n"),
            ),
        }
    }
}

/// Writes the generated workspace; returns its description.
pub fn write(ws: &Path, modules: usize, language: Language) -> Result<String> {
    for (rel, text) in language.support_files(modules) {
        write_file(ws, rel, &text)?;
    }
    for i in 0..modules {
        write_file(ws, &language.module(i), &language.source(i))?;
    }
    Ok(language.layout(modules))
}

fn write_file(ws: &Path, rel: &str, text: &str) -> Result<()> {
    let path = ws.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benches::codebase::rename_definition;

    const ALL: [Language; 5] = [
        Language::Python,
        Language::TypeScript,
        Language::JavaScript,
        Language::Go,
        Language::Rust,
    ];

    #[test]
    fn every_module_calls_the_previous_ones_export_and_its_helper_can_be_renamed() {
        for language in ALL {
            let first = language.source(0);
            let second = language.source(1);
            assert!(second.contains("m000_export(x)"), "{language:?}: {second}");
            assert!(!first.contains("m-01"), "{language:?}");
            let renamed = rename_definition(&second, "m001_helper", "m001_renamed")
                .unwrap_or_else(|| panic!("{language:?}: no definition of m001_helper"));
            assert!(renamed.contains("m001_renamed("), "{language:?}");
            // The call in the compute is not a definition: left as it is.
            assert!(renamed.contains("m001_helper(x)"), "{language:?}");
        }
    }

    #[test]
    fn a_rust_workspace_declares_every_module() {
        let files = Language::Rust.support_files(3);
        let lib = &files
            .iter()
            .find(|(rel, _)| *rel == "src/lib.rs")
            .unwrap()
            .1;
        assert_eq!(
            lib,
            "pub mod mod_000;\npub mod mod_001;\npub mod mod_002;\n"
        );
    }

    #[test]
    fn a_lone_modules_function_can_be_renamed_in_every_language() {
        for language in ALL {
            let (rel, text) = language.lone_module("offline", "made");
            assert!(rel.starts_with("offline."), "{language:?}");
            assert!(
                rename_definition(&text, "made", "remade").is_some(),
                "{language:?}: {text}"
            );
        }
    }
}
