//! Workspaces in other languages than Python (issue 25): the real CLI
//! (0.6.13) indexes a small TypeScript (with a TSX file), JavaScript (with
//! a CommonJS file), Go and Rust workspace, and one of Python and
//! TypeScript together, offline — its grammars come from the pinned
//! wheels the test venv's `tree_sitter_languages` stand-in answers from —
//! and after an agent renames a function called from another file, the
//! service's `incremental` sync leaves the graph a from-scratch index of
//! the same tree builds, on Kùzu and on a FalkorDB server. The rename's
//! sync parses the edited files alone: every other file's parse comes
//! from the parse cache (`cgc_seam.FILE_ALONE_SUFFIXES`).
//!
//! Real-CLI tests need `CGC_FRESH_REAL_CGC` (see `scripts/test.sh`).

use std::collections::BTreeSet;

use crate::graph_backend::{GraphBackend, GraphCli};
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, baseline_sync, functions, replace_in, service,
    wait_synced_fresh, write,
};
use crate::parse_cache::{driver_timings, figure};
use crate::support::{open_session, strategies_run, Sandbox};

/// A small workspace of one language and the edit made to it.
struct Workspace {
    /// The language, as the graph's name and in messages.
    language: &'static str,
    /// Its files: modules importing each other, classes (or their
    /// language's kind), functions and methods.
    files: &'static [(&'static str, &'static str)],
    /// The function the agent renames, called from another file ...
    renamed: &'static str,
    /// ... its new name ...
    new_name: &'static str,
    /// ... the functions calling it, each in another file ...
    callers: &'static [&'static str],
    /// ... and the files the rename rewrites (its definition, the callers'
    /// imports and calls).
    edited: &'static [&'static str],
    /// How many of `files` are of a suffix the parse cache keeps (a
    /// `Cargo.toml` is a bare File node, handed to CGC every time:
    /// `parse_uncached`).
    parsed: u64,
}

const TYPESCRIPT: Workspace = Workspace {
    language: "typescript",
    files: &[
        (
            "src/shapes.ts",
            "export interface Named {\n  name(): string;\n}\n\n\
             export function scale(x: number): number {\n  return x * 2;\n}\n\n\
             export class Shape implements Named {\n  constructor(protected size: number) {}\n\n  \
             name(): string {\n    return \"shape\";\n  }\n\n  \
             area(): number {\n    return scale(this.size);\n  }\n}\n",
        ),
        (
            "src/circle.ts",
            "import { Shape, scale } from \"./shapes\";\n\n\
             export class Circle extends Shape {\n  name(): string {\n    return \"circle\";\n  }\n\n  \
             area(): number {\n    return scale(this.size) * 3;\n  }\n}\n\n\
             export const makeCircle = (r: number): Circle => new Circle(r);\n",
        ),
        (
            "src/util.ts",
            "export function formatArea(value: number): string {\n  return value.toFixed(2);\n}\n",
        ),
        (
            "src/main.ts",
            "import { makeCircle } from \"./circle\";\nimport { formatArea } from \"./util\";\n\n\
             export function describe(r: number): string {\n  const c = makeCircle(r);\n  \
             return `${c.name()}: ${formatArea(c.area())}`;\n}\n",
        ),
        (
            "src/view.tsx",
            "import { describe } from \"./main\";\nimport { formatArea } from \"./util\";\n\n\
             export function View(props: { r: number }) {\n  \
             return <p title={formatArea(props.r)}>{describe(props.r)}</p>;\n}\n",
        ),
    ],
    renamed: "formatArea",
    new_name: "formatSurface",
    callers: &["View", "describe"],
    edited: &["src/main.ts", "src/util.ts", "src/view.tsx"],
    parsed: 5,
};

const JAVASCRIPT: Workspace = Workspace {
    language: "javascript",
    files: &[
        (
            "lib/shapes.js",
            "export function scale(x) {\n  return x * 2;\n}\n\n\
             export class Shape {\n  constructor(size) {\n    this.size = size;\n  }\n\n  \
             area() {\n    return scale(this.size);\n  }\n}\n",
        ),
        (
            "lib/circle.js",
            "import { Shape, scale } from \"./shapes.js\";\n\n\
             export class Circle extends Shape {\n  area() {\n    return scale(this.size) * 3;\n  }\n}\n\n\
             export const makeCircle = (r) => new Circle(r);\n",
        ),
        (
            "lib/util.js",
            "export function formatArea(value) {\n  return value.toFixed(2);\n}\n",
        ),
        (
            "lib/main.js",
            "import { makeCircle } from \"./circle.js\";\nimport { formatArea } from \"./util.js\";\n\n\
             export function describe(r) {\n  const c = makeCircle(r);\n  return formatArea(c.area());\n}\n",
        ),
        (
            "lib/report.cjs",
            "const { formatArea } = require(\"./util.js\");\n\n\
             function report(values) {\n  return values.map((v) => formatArea(v)).join(\", \");\n}\n\n\
             module.exports = { report };\n",
        ),
    ],
    renamed: "formatArea",
    new_name: "formatSurface",
    callers: &["describe", "report"],
    edited: &["lib/main.js", "lib/report.cjs", "lib/util.js"],
    parsed: 5,
};

const GO: Workspace = Workspace {
    language: "go",
    files: &[
        ("go.mod", "module example.com/geo\n\ngo 1.21\n"),
        (
            "shapes/shapes.go",
            "package shapes\n\n\
             // Scale doubles a size.\nfunc Scale(x int) int {\n\treturn x * 2\n}\n\n\
             // Shape has a size.\ntype Shape struct {\n\tSize int\n}\n\n\
             // Area of the shape.\nfunc (s Shape) Area() int {\n\treturn Scale(s.Size)\n}\n\n\
             // Circle embeds a Shape.\ntype Circle struct {\n\tShape\n}\n\n\
             // NewCircle makes a circle.\nfunc NewCircle(r int) Circle {\n\treturn Circle{Shape{Size: r}}\n}\n",
        ),
        (
            "util/util.go",
            "package util\n\nimport \"fmt\"\n\n\
             // FormatArea prints an area.\nfunc FormatArea(value int) string {\n\
             \treturn fmt.Sprintf(\"%d\", value)\n}\n",
        ),
        (
            "main.go",
            "package main\n\nimport (\n\t\"example.com/geo/shapes\"\n\t\"example.com/geo/util\"\n)\n\n\
             func describe(r int) string {\n\tc := shapes.NewCircle(r)\n\treturn util.FormatArea(c.Area())\n}\n\n\
             func main() {\n\tprintln(describe(3))\n}\n",
        ),
    ],
    renamed: "FormatArea",
    new_name: "FormatSurface",
    callers: &["describe"],
    edited: &["main.go", "util/util.go"],
    parsed: 3,
};

const RUST: Workspace = Workspace {
    language: "rust",
    files: &[
        (
            "Cargo.toml",
            "[package]\nname = \"geo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "pub mod shapes;\npub mod util;\n\n\
             use crate::shapes::{make_circle, Area};\nuse crate::util::format_area;\n\n\
             pub fn describe(r: u32) -> String {\n    let c = make_circle(r);\n    format_area(c.area())\n}\n",
        ),
        (
            "src/shapes.rs",
            "pub trait Area {\n    fn area(&self) -> u32;\n}\n\n\
             pub fn scale(x: u32) -> u32 {\n    x * 2\n}\n\n\
             pub struct Circle {\n    pub size: u32,\n}\n\n\
             impl Area for Circle {\n    fn area(&self) -> u32 {\n        scale(self.size) * 3\n    }\n}\n\n\
             pub fn make_circle(r: u32) -> Circle {\n    Circle { size: r }\n}\n",
        ),
        (
            "src/util.rs",
            "pub fn format_area(value: u32) -> String {\n    format!(\"{value}\")\n}\n",
        ),
    ],
    renamed: "format_area",
    new_name: "format_surface",
    callers: &["describe"],
    edited: &["src/lib.rs", "src/util.rs"],
    parsed: 3,
};

/// A Python backend with a TypeScript front end in one repository: the
/// rename is in a Python module and in TypeScript, one batch.
const PYTHON_AND_TYPESCRIPT: Workspace = Workspace {
    language: "python_and_typescript",
    files: &[
        ("backend/__init__.py", ""),
        (
            "backend/areas.py",
            "def formatArea(value):\n    return f\"{value:.2f}\"\n\n\n             class Report:\n    def total(self, values):\n        return sum(values)\n",
        ),
        (
            "backend/api.py",
            "from backend.areas import formatArea, Report\n\n\n             def describe(values):\n    return formatArea(Report().total(values))\n",
        ),
        (
            "web/src/util.ts",
            "export function formatArea(value: number): string {\n  return value.toFixed(2);\n}\n",
        ),
        (
            "web/src/view.ts",
            "import { formatArea } from \"./util\";\n\n             export function View(r: number): string {\n  return formatArea(r);\n}\n",
        ),
    ],
    renamed: "formatArea",
    new_name: "formatSurface",
    callers: &["View", "describe"],
    edited: &[
        "backend/api.py",
        "backend/areas.py",
        "web/src/util.ts",
        "web/src/view.ts",
    ],
    parsed: 5,
};

/// The names of the functions with a CALLS edge to a function `callee`.
fn callers_of(cli: &GraphCli, callee: &str) -> BTreeSet<String> {
    cli.query(&format!(
        "MATCH (a:Function)-[:CALLS]->(b:Function) WHERE b.name = '{callee}' \
         RETURN a.name AS caller"
    ))
    .iter()
    .filter_map(|row| row["caller"].as_str().map(str::to_string))
    .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Indexes `workspace`, syncs the agent's rename with `incremental` and
/// compares the synced graph with a from-scratch index.
fn a_rename_syncs_to_the_graph_a_from_scratch_index_builds(
    workspace: &Workspace,
    backend: &GraphBackend,
) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let language = workspace.language;
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    for (rel, text) in workspace.files {
        write(&ws, rel, text);
    }
    let cli = backend.cli(&cgc, &ws, &home, language);
    cli.index();
    // The grammar loaded: without it CGC writes File nodes alone, and a
    // comparison of two such graphs would prove nothing.
    assert_eq!(
        callers_of(&cli, workspace.renamed),
        names(workspace.callers),
        "{language}: the from-scratch index links the calls across files"
    );

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    agent_batch(&mut conn, workspace.edited, || {
        for rel in workspace.edited {
            replace_in(&ws, rel, workspace.renamed, workspace.new_name);
        }
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(
        strategies_run(&service),
        ["baseline", "incremental"],
        "{language}: the rename's sync ran incremental"
    );
    // The rename's sync parsed the edited files and took every other
    // parse from the cache the baseline left (the files were written
    // before the index, long enough for their entries to be stored).
    let timings = driver_timings(&service);
    let rename = timings.last().expect("the rename's timings");
    assert_eq!(
        figure(rename, "parse_cache_misses"),
        workspace.edited.len() as u64,
        "{language}: only the edited files parsed: {rename}"
    );
    assert_eq!(
        figure(rename, "parse_cache_hits"),
        workspace.parsed - workspace.edited.len() as u64,
        "{language}: {rename}"
    );
    // On Kùzu the call edges went through the staged statements
    // (`CallLinksStaged`), and the graph compared below is theirs.
    let staged = figure(rename, "call_statements_staged");
    if backend.is_kuzu() {
        assert!(
            staged > 0,
            "{language}: the call statements staged: {rename}"
        );
    } else {
        assert_eq!(staged, 0, "{language}: {rename}");
    }
    assert_eq!(functions(&cli, workspace.renamed), 0, "{language}");
    assert_eq!(
        functions(&cli, workspace.new_name),
        workspace.edited.len() - workspace.callers.len(),
        "{language}: one definition per language"
    );
    assert_eq!(
        callers_of(&cli, workspace.new_name),
        names(workspace.callers),
        "{language}: the callers are linked to the new name"
    );
    drop(conn);
    // Kùzu lets one process at a time open the database.
    drop(service);
    let synced = cli.dump();
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &synced,
        language,
        &format!("{language}: a rename across files"),
    );
}

fn typescript(backend: &GraphBackend) {
    a_rename_syncs_to_the_graph_a_from_scratch_index_builds(&TYPESCRIPT, backend);
}

fn javascript(backend: &GraphBackend) {
    a_rename_syncs_to_the_graph_a_from_scratch_index_builds(&JAVASCRIPT, backend);
}

fn go(backend: &GraphBackend) {
    a_rename_syncs_to_the_graph_a_from_scratch_index_builds(&GO, backend);
}

fn rust(backend: &GraphBackend) {
    a_rename_syncs_to_the_graph_a_from_scratch_index_builds(&RUST, backend);
}

fn python_and_typescript(backend: &GraphBackend) {
    a_rename_syncs_to_the_graph_a_from_scratch_index_builds(&PYTHON_AND_TYPESCRIPT, backend);
}

on_both_backends!(
    typescript,
    a_typescript_rename_across_files_syncs_to_the_graph_a_from_scratch_index_builds_on_kuzu,
    a_typescript_rename_across_files_syncs_to_the_graph_a_from_scratch_index_builds_on_a_falkordb_server
);

on_both_backends!(
    javascript,
    a_javascript_rename_across_files_syncs_to_the_graph_a_from_scratch_index_builds_on_kuzu,
    a_javascript_rename_across_files_syncs_to_the_graph_a_from_scratch_index_builds_on_a_falkordb_server
);

on_both_backends!(
    go,
    a_go_rename_across_packages_syncs_to_the_graph_a_from_scratch_index_builds_on_kuzu,
    a_go_rename_across_packages_syncs_to_the_graph_a_from_scratch_index_builds_on_a_falkordb_server
);

on_both_backends!(
    rust,
    a_rust_rename_across_modules_syncs_to_the_graph_a_from_scratch_index_builds_on_kuzu,
    a_rust_rename_across_modules_syncs_to_the_graph_a_from_scratch_index_builds_on_a_falkordb_server
);

on_both_backends!(
    python_and_typescript,
    a_rename_across_python_and_typescript_in_one_workspace_syncs_to_the_graph_a_from_scratch_index_builds_on_kuzu,
    a_rename_across_python_and_typescript_in_one_workspace_syncs_to_the_graph_a_from_scratch_index_builds_on_a_falkordb_server
);
