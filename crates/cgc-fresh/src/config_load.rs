//! Reading the configuration layers from disk and the environment.
//!
//! The rules (validation, precedence, warnings) live in
//! `cgc_fresh_core::config`; this module finds the inputs and has config-rs
//! (the `config` crate) read them, in precedence order:
//!
//! 1. built-in defaults: `config/default.toml`, embedded in the binary;
//! 2. user file: `$PI_CODING_AGENT_DIR/cgc.json`, else `~/.pi/agent/cgc.json`;
//! 3. workspace file: `<workspace>/.pi/cgc.json`;
//! 4. `--config FILE`: TOML when the name ends in `.toml`, JSON otherwise;
//! 5. the `CGC_*` environment variables.
//!
//! Loading never fails. A missing user or workspace file is normal and
//! silent; a missing `--config` file, or any file that cannot be read or
//! parsed, is one warning naming the file, and that layer is skipped.
//!
//! Every layer is a config-rs [`Source`]: a file layer is a
//! [`config::File`] over the file's text (read here, with a size bound, so a
//! huge or endless file costs nothing), parsed by config-rs's JSON or TOML
//! format, which keeps keys' case (`watcherLivenessMs` survives); the
//! environment layer is [`EnvironmentLayer`], which reads exactly the
//! documented variables and gives each value its variable as
//! [`config::Value::origin`]. config-rs's own `Environment` source is not
//! used: it lowercases variable names and turns `on`/`off`/`1` into booleans
//! itself, while `freshness.watch` must see the text (`"on"` is a mode,
//! `"auto"` is not a boolean).
//!
//! The layers are not merged into one `config::Config`. Each layer's
//! collected values go to the core on their own, which validates them and
//! applies them over the layers below, because a merged `Config` would break
//! three rules: an invalid value must be skipped so the lower layer's value
//! stands (a merge lets it hide that value before anyone validates it); each
//! value's layer must be known for `cgc-fresh config` and for warnings; and a
//! key written twice in one file (nested and dotted) must be warned about,
//! which building a `Config` hides because it folds dotted keys into tables.
//! The values are handed over as plain JSON (config-rs values deserialize
//! into `serde_json::Value`), so the core stays free of I/O and of config-rs.

use std::fs::File as FsFile;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use cgc_fresh_core::config::{ConfigWarning, Key, Layer, LayeredConfig, Settings};
use config::{ConfigError, File, FileFormat, Map, Source, ValueKind};
use serde::Deserialize;
use serde_json::Value;

/// The built-in defaults layer; every key is documented there.
pub const DEFAULTS_TOML: &str = include_str!("../../../config/default.toml");

/// Configuration files larger than this are refused rather than read: they
/// cannot be a real configuration and must not cost unbounded memory.
const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// The effective configuration and how it came about.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The effective settings (the same as `layers.settings()`, kept as a
    /// field because almost every caller wants only this).
    pub settings: Settings,
    layers: LayeredConfig,
    files_read: Vec<PathBuf>,
}
impl LoadedConfig {
    /// This configuration, kept in force after `refused` (a reload that
    /// could not read a file this one had applied), with `refused`'s
    /// skipped-layer warnings added so a person sees why.
    pub fn kept_after(&self, refused: &LoadedConfig) -> LoadedConfig {
        let mut kept = self.clone();
        for warning in refused.warnings() {
            if let ConfigWarning::LayerSkipped { layer, reason } = warning {
                kept.layers.skip_layer(
                    layer.clone(),
                    format!("{reason}; reload refused, the values read before stand"),
                );
            }
        }
        kept
    }

    /// Every problem met while loading, in layer order.
    pub fn warnings(&self) -> &[ConfigWarning] {
        self.layers.warnings()
    }

    /// The warnings as human-readable sentences (each names key, value and
    /// layer, or the file that was skipped).
    pub fn warning_texts(&self) -> Vec<String> {
        self.warnings().iter().map(ToString::to_string).collect()
    }

    /// The layer that set the effective value of `key`.
    #[cfg(test)]
    pub fn origin(&self, key: Key) -> &Layer {
        self.layers.origin(key)
    }

    /// The files that were read and applied, in layer order (a missing,
    /// unreadable or corrupt file is not listed; it has a warning instead).
    pub fn files_read(&self) -> &[PathBuf] {
        &self.files_read
    }

    /// Every key with its effective value and the layer that set it:
    /// `{"freshness.watch": {"value": "auto", "layer": "workspace (PATH)"}}`.
    pub fn render_json(&self) -> Value {
        self.layers.render_json()
    }

    /// A table of every key, then the files read and the warnings.
    pub fn render_text(&self) -> String {
        let mut text = self.layers.render_table();
        if !self.files_read.is_empty() {
            text.push_str("\nfiles read:\n");
            for path in &self.files_read {
                text.push_str(&format!("  {}\n", path.display()));
            }
        }
        if !self.warnings().is_empty() {
            text.push_str("\nwarnings:\n");
            for warning in self.warnings() {
                text.push_str(&format!("  {warning}\n"));
            }
        }
        text
    }
}

/// Loads every layer for `workspace`. `env` looks up one environment variable
/// (the process environment in production; a table in tests); it supplies
/// `HOME`, `PI_CODING_AGENT_DIR` and the `CGC_*` variables.
pub fn load(
    workspace: &Path,
    explicit_file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> LoadedConfig {
    let mut layers = LayeredConfig::new();
    let mut files_read = Vec::new();

    let defaults = Parsed::file(DEFAULTS_TOML, FileFormat::Toml);
    apply_source(&mut layers, Layer::Defaults, &defaults);
    let mut files = Vec::new();
    if let Some(path) = user_file(env) {
        files.push((Layer::User { path }, Presence::Optional));
    }
    let path = workspace.join(".pi").join("cgc.json");
    files.push((Layer::Workspace { path }, Presence::Optional));
    if let Some(path) = explicit_file {
        let path = path.to_path_buf();
        files.push((Layer::File { path }, Presence::Required));
    }
    for (layer, presence) in files {
        let Some(path) = layer.path().map(Path::to_path_buf) else {
            continue;
        };
        let format = format_of(&path, &layer);
        match read_bounded(&path) {
            Ok(Some(text)) => {
                if apply_source(&mut layers, layer, &Parsed::file(&text, format)) {
                    files_read.push(path);
                }
            }
            Ok(None) if presence == Presence::Optional => {}
            Ok(None) => layers.skip_layer(layer, "file not found"),
            Err(reason) => layers.skip_layer(layer, reason),
        }
    }
    let environment = Parsed::environment(EnvironmentLayer::capture(env));
    apply_source(&mut layers, Layer::Env, &environment);

    LoadedConfig {
        settings: layers.settings().clone(),
        layers,
        files_read,
    }
}

/// One layer's config-rs source, with the text and format a file layer was
/// parsed from (to place a syntax error).
struct Parsed<'a> {
    source: Box<dyn Source + 'a>,
    text: &'a str,
    format: FileFormat,
}

impl<'a> Parsed<'a> {
    fn file(text: &'a str, format: FileFormat) -> Parsed<'a> {
        let source = Box::new(File::from_str(text, format));
        Parsed {
            source,
            text,
            format,
        }
    }

    fn environment(environment: EnvironmentLayer) -> Parsed<'a> {
        Parsed {
            source: Box::new(environment),
            text: "",
            format: FileFormat::Json,
        }
    }
}

/// Has config-rs collect one layer and the core apply it. `false`, with one
/// warning naming the layer, when the layer cannot be parsed.
fn apply_source(layers: &mut LayeredConfig, layer: Layer, parsed: &Parsed<'_>) -> bool {
    match collect_tree(parsed) {
        Ok(tree) => {
            layers.apply_tree(layer, &tree);
            true
        }
        Err(reason) => {
            layers.skip_layer(layer, reason);
            false
        }
    }
}

/// One layer's values as config-rs collected them (keys as written, dotted
/// or nested), as plain JSON for the core.
fn collect_tree(parsed: &Parsed<'_>) -> Result<Value, String> {
    let entries = parsed
        .source
        .collect()
        .map_err(|error| parse_failure(error, parsed))?;
    Value::deserialize(config::Value::new(None, ValueKind::Table(entries)))
        .map_err(|error| format!("unusable value: {error}"))
}

/// One line saying why a file could not be parsed, with the place when the
/// parser gives one (the TOML parser's own text spans several lines).
fn parse_failure(error: ConfigError, parsed: &Parsed<'_>) -> String {
    let ConfigError::FileParse { cause, .. } = error else {
        return error.to_string();
    };
    if let Some(error) = cause.downcast_ref::<serde_json::Error>() {
        return format!("not valid JSON: {error}");
    }
    if let Some(error) = cause.downcast_ref::<toml::de::Error>() {
        let place = error
            .span()
            .map(|span| line_and_column(parsed.text, span.start))
            .map(|(line, column)| format!(" at line {line} column {column}"))
            .unwrap_or_default();
        let message = error.message().trim_end().replace('\n', "; ");
        return format!("not valid TOML{place}: {message}");
    }
    match parsed.format {
        FileFormat::Json => format!("the top level must be an object: {cause}"),
        _ => format!("not valid TOML: {cause}"),
    }
}

/// The environment layer as a config-rs source: exactly the variables named
/// by [`Key::env_var`], each as text under its key's dotted name, with the
/// variable as the value's origin. Captured once, so a load sees one
/// consistent environment.
#[derive(Debug, Clone)]
struct EnvironmentLayer {
    vars: Vec<(Key, String)>,
}

impl EnvironmentLayer {
    fn capture(env: &dyn Fn(&str) -> Option<String>) -> EnvironmentLayer {
        let vars = Key::ALL
            .into_iter()
            .filter_map(|key| env(key.env_var()).map(|text| (key, text)))
            .collect();
        EnvironmentLayer { vars }
    }
}

impl Source for EnvironmentLayer {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<Map<String, config::Value>, ConfigError> {
        Ok(self
            .vars
            .iter()
            .map(|(key, text)| {
                let origin = key.env_var().to_owned();
                let value = config::Value::new(Some(&origin), ValueKind::String(text.clone()));
                (key.name().to_owned(), value)
            })
            .collect())
    }
}

/// The Pi agent directory's `cgc.json`, as the Pi extension finds it:
/// `PI_CODING_AGENT_DIR` (with a leading `~` expanded) when set, else
/// `~/.pi/agent`. `None` when neither that variable nor `HOME` is usable.
fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = env("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    let agent_dir = match env("PI_CODING_AGENT_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) if dir == "~" => home?,
        Some(dir) => match dir.strip_prefix("~/") {
            Some(rest) => home?.join(rest),
            None => PathBuf::from(dir),
        },
        None => home?.join(".pi").join("agent"),
    };
    Some(agent_dir.join("cgc.json"))
}

/// The `--config` file is TOML when its name ends in `.toml` (any case) and
/// JSON otherwise; the Pi files are JSON.
fn format_of(path: &Path, layer: &Layer) -> FileFormat {
    match (layer, path.extension()) {
        (Layer::File { .. }, Some(ext)) if ext.eq_ignore_ascii_case("toml") => FileFormat::Toml,
        _ => FileFormat::Json,
    }
}

/// Whether a missing file is worth a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    /// The user and workspace files: most setups have neither.
    Optional,
    /// `--config FILE`: the user asked for it by name.
    Required,
}

/// The file's text; `Ok(None)` when it does not exist.
fn read_bounded(path: &Path) -> Result<Option<String>, String> {
    let file = match FsFile::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot open the file: {error}")),
    };
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the file: {error}"))?;
    if bytes.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(format!(
            "the file is larger than {MAX_CONFIG_FILE_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "the file is not UTF-8 text".to_owned())
}

/// 1-based line and column of a byte offset, for one-line error messages.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests;
