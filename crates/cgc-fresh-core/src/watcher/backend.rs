//! Which graph backend CGC will use, decided from what the shell gathered.
//!
//! Spec, "Backend-aware watcher detection": for `auto` mode the backend is
//! detected, in order, from CGC's runtime-environment database overrides,
//! from `cgc doctor`'s `Default database:` line, and from the
//! `DATABASE_TYPE`/`DEFAULT_DATABASE` keys of `~/.codegraphcontext/.env`.
//! Detection is time-bounded and fails open to the conservative answer:
//! a backend that cannot be determined is [`Backend::Unknown`], which is
//! treated as embedded (no automatic watcher). Only `neo4j` and
//! `falkordb-remote` are server backends.
//!
//! Everything here is pure: the shell reads the environment, runs
//! `cgc doctor` under `cgc.timeoutMs` and reads the `.env` file, and hands
//! the texts to these functions. `cgc doctor` exits 1 whenever any of its
//! checks fails, whatever the backend, so only its line counts, never its
//! exit code.

use std::fmt;

use cgc_fresh_proto::BackendFacts;

/// The runtime-environment variables CGC honours, highest precedence first.
pub const RUNTIME_ENV_VARS: [&str; 3] =
    ["CGC_RUNTIME_DB_TYPE", "DATABASE_TYPE", "DEFAULT_DATABASE"];

/// The `.env` keys CGC reads, highest precedence first.
pub const DOTENV_KEYS: [&str; 2] = ["DATABASE_TYPE", "DEFAULT_DATABASE"];

/// Where CGC's own `.env` file lives, relative to the home directory.
pub const DOTENV_PATH_IN_HOME: &str = ".codegraphcontext/.env";

/// The marker of `cgc doctor`'s backend line.
const DOCTOR_MARKER: &str = "default database:";

/// A CGC graph backend.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Neo4j server.
    Neo4j,
    /// A FalkorDB server reached over the network.
    FalkordbRemote,
    /// Embedded Kùzu.
    Kuzudb,
    /// Embedded FalkorDB Lite.
    Falkordb,
    /// Embedded LadybugDB.
    Ladybugdb,
    /// A name CGC may know and this code does not (lower-cased).
    Other(String),
    /// Detection could not determine the backend.
    Unknown,
}

impl Backend {
    /// Whether this is a server backend: only these satisfy the backend
    /// condition of `auto` mode. Everything else, unknown included, counts
    /// as embedded for spawning.
    pub fn is_server(&self) -> bool {
        matches!(self, Backend::Neo4j | Backend::FalkordbRemote)
    }

    /// CGC's spelling of the backend (`unknown` when undetermined).
    pub fn name(&self) -> &str {
        match self {
            Backend::Neo4j => "neo4j",
            Backend::FalkordbRemote => "falkordb-remote",
            Backend::Kuzudb => "kuzudb",
            Backend::Falkordb => "falkordb",
            Backend::Ladybugdb => "ladybugdb",
            Backend::Other(name) => name,
            Backend::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The backend CGC's name `name` stands for, case-insensitively; any name
/// this code does not know is [`Backend::Other`] (an embedded answer).
pub fn classify(name: &str) -> Backend {
    let name = name.trim().to_ascii_lowercase();
    match name.as_str() {
        "neo4j" => Backend::Neo4j,
        "falkordb-remote" => Backend::FalkordbRemote,
        "kuzudb" => Backend::Kuzudb,
        "falkordb" => Backend::Falkordb,
        "ladybugdb" => Backend::Ladybugdb,
        _ => Backend::Other(name),
    }
}

/// Where an answer came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BackendSource {
    /// `--db`/`--database` in `cgc.globalArgs`: CGC turns it into
    /// `CGC_RUNTIME_DB_TYPE`, the highest-precedence override of all.
    GlobalArgs,
    /// A runtime-environment override, e.g. `DEFAULT_DATABASE`.
    RuntimeEnv { var: &'static str },
    /// `cgc doctor`'s `Default database:` line.
    Doctor,
    /// A key of `~/.codegraphcontext/.env`.
    DotEnv { key: &'static str },
    /// Nothing determined the backend; `reason` says what was tried.
    Fallback { reason: String },
}

impl fmt::Display for BackendSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendSource::GlobalArgs => f.write_str("cgc.globalArgs --db"),
            BackendSource::RuntimeEnv { var } => write!(f, "environment {var}"),
            BackendSource::Doctor => f.write_str("cgc doctor"),
            BackendSource::DotEnv { key } => write!(f, "~/{DOTENV_PATH_IN_HOME} {key}"),
            BackendSource::Fallback { reason } => write!(f, "not determined: {reason}"),
        }
    }
}

/// A detected backend and how it was found; displays as
/// `kuzudb (environment DEFAULT_DATABASE)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendAnswer {
    /// The backend.
    pub backend: Backend,
    /// How it was determined.
    pub source: BackendSource,
}

impl BackendAnswer {
    /// The answer as the state frame's backend facts.
    pub fn facts(&self) -> BackendFacts {
        BackendFacts {
            kind: self.backend.name().to_string(),
            source: self.source.to_string(),
        }
    }
}

impl fmt::Display for BackendAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.backend, self.source)
    }
}

/// The first of CGC's runtime-environment overrides that is set
/// (`CGC_RUNTIME_DB_TYPE`, then `DATABASE_TYPE`, then `DEFAULT_DATABASE`);
/// an empty or blank value counts as unset. `get` reads one variable.
pub fn from_runtime_env(get: impl Fn(&str) -> Option<String>) -> Option<(Backend, BackendSource)> {
    RUNTIME_ENV_VARS.iter().find_map(|var| {
        let value = get(var)?;
        let value = value.trim();
        (!value.is_empty()).then(|| (classify(value), BackendSource::RuntimeEnv { var }))
    })
}

/// The backend on `cgc doctor`'s `   Default database: <db> (source: …)`
/// line (CGC prints it on stderr; pass stderr, or both streams). Colour
/// codes are ignored. `None` when no such line names a single backend
/// word — garbage never becomes an answer.
pub fn parse_doctor_output(text: &str) -> Option<Backend> {
    strip_ansi(text).lines().find_map(|line| {
        let lower = line.to_ascii_lowercase();
        let start = lower.find(DOCTOR_MARKER)? + DOCTOR_MARKER.len();
        let value = &line[start..];
        let value = match value.find('(') {
            Some(paren) => &value[..paren],
            None => value,
        };
        let value = value.trim();
        let is_word = !value.is_empty()
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        is_word.then(|| classify(value))
    })
}

/// The backend set by a `.env` text: `DATABASE_TYPE`, else
/// `DEFAULT_DATABASE` (the later line wins when a key repeats; an empty
/// value is unset), with the key that decided. Reads the dotenv dialect
/// CGC's files use: `#` comments, blank lines, an `export ` prefix,
/// whitespace around `=`, single or double quotes, and an inline
/// ` # comment` after an unquoted value.
pub fn parse_dotenv(text: &str) -> Option<(Backend, &'static str)> {
    let mut values: [Option<String>; 2] = [None, None];
    for line in text.trim_start_matches('\u{feff}').lines() {
        let Some((key, value)) = dotenv_assignment(line) else {
            continue;
        };
        if let Some(slot) = DOTENV_KEYS.iter().position(|known| *known == key) {
            values[slot] = Some(value);
        }
    }
    DOTENV_KEYS.iter().zip(values).find_map(|(key, value)| {
        let value = value?;
        let value = value.trim();
        (!value.is_empty()).then(|| (classify(value), *key))
    })
}

/// One `KEY=value` line of a `.env` file; `None` for comments, blank
/// lines, and lines that are not assignments (or whose quote never closes).
fn dotenv_assignment(line: &str) -> Option<(&str, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
        _ => line,
    };
    let (key, value) = line.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return None;
    }
    let value = value.trim_start();
    let value = match value.chars().next() {
        Some(quote @ ('"' | '\'')) => quoted(&value[1..], quote)?,
        _ => unquoted(value),
    };
    Some((key, value))
}

/// The text up to the closing `quote` (a double-quoted value may escape a
/// quote or backslash with a backslash); `None` if it never closes.
fn quoted(rest: &str, quote: char) -> Option<String> {
    let mut value = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quote == '"' => value.push(chars.next()?),
            c if c == quote => return Some(value),
            c => value.push(c),
        }
    }
    None
}

/// An unquoted value: up to an inline comment (` #`), trimmed.
fn unquoted(value: &str) -> String {
    let mut end = value.len();
    let mut previous_blank = false;
    for (index, c) in value.char_indices() {
        if c == '#' && previous_blank {
            end = index;
            break;
        }
        previous_blank = c.is_whitespace();
    }
    value[..end].trim().to_string()
}

/// `text` without ANSI escape sequences (CSI `ESC [ … final`, OSC
/// `ESC ] … BEL|ESC \`, and two-character escapes).
fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            plain.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    plain
}

/// The order of detection: what the shell does, step by step, until one
/// step answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectionStep {
    /// Read [`RUNTIME_ENV_VARS`] from the service's environment.
    RuntimeEnv,
    /// Run `cgc doctor` for at most `timeout_ms`; its exit code is
    /// ignored, only the `Default database:` line counts. A run that
    /// times out or cannot start gives no output.
    Doctor { timeout_ms: u64 },
    /// Read `~/.codegraphcontext/.env` ([`DOTENV_PATH_IN_HOME`]).
    DotEnv,
    /// Nothing answered: [`Backend::Unknown`], embedded for spawning.
    Fallback,
}

/// Backend detection for one service start: the steps in order, bounded
/// by `cgc.timeoutMs`, and the decision from what they found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetectionPlan {
    /// The bound on the `cgc doctor` run (`cgc.timeoutMs`).
    pub doctor_timeout_ms: u64,
}

impl DetectionPlan {
    /// The plan with `cgc doctor` bounded by `cgc_timeout_ms`.
    pub fn new(cgc_timeout_ms: u64) -> Self {
        DetectionPlan {
            doctor_timeout_ms: cgc_timeout_ms,
        }
    }

    /// The steps, in order. The shell may stop at the first that answers
    /// (a runtime override makes running `cgc doctor` unnecessary).
    pub fn steps(&self) -> [DetectionStep; 4] {
        [
            DetectionStep::RuntimeEnv,
            DetectionStep::Doctor {
                timeout_ms: self.doctor_timeout_ms,
            },
            DetectionStep::DotEnv,
            DetectionStep::Fallback,
        ]
    }
}

/// The backend named by `--db X` / `--database X` (or `=X`) among the root
/// options the service passes to every `cgc` (`cgc.globalArgs`). It wins
/// over everything else, exactly as in CGC, so detection checks it first.
pub fn from_global_args(args: &[String]) -> Option<(Backend, BackendSource)> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == "--db" || arg == "--database" {
            iter.next().cloned()
        } else {
            arg.strip_prefix("--db=")
                .or_else(|| arg.strip_prefix("--database="))
                .map(str::to_string)
        };
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            found = Some((classify(value.trim()), BackendSource::GlobalArgs));
        }
    }
    found
}

/// The answer from what the steps found, in precedence order:
/// `env_answer` (from [`from_runtime_env`]); `doctor_output` (`None` when
/// `cgc doctor` timed out, failed to run, or was not run); `dotenv_text`
/// (`None` when the file is missing or unreadable); otherwise
/// [`Backend::Unknown`] with the reason, which fails open to "embedded".
pub fn decide(
    env_answer: Option<(Backend, BackendSource)>,
    doctor_output: Option<&str>,
    dotenv_text: Option<&str>,
) -> BackendAnswer {
    if let Some((backend, source)) = env_answer {
        return BackendAnswer { backend, source };
    }
    let doctor = doctor_output.map(parse_doctor_output);
    if let Some(Some(backend)) = doctor {
        return BackendAnswer {
            backend,
            source: BackendSource::Doctor,
        };
    }
    let dotenv = dotenv_text.map(parse_dotenv);
    if let Some(Some((backend, key))) = dotenv {
        return BackendAnswer {
            backend,
            source: BackendSource::DotEnv { key },
        };
    }
    let doctor_said = match doctor {
        None => "cgc doctor did not answer in time or could not run".to_string(),
        Some(_) => "cgc doctor printed no `Default database:` line".to_string(),
    };
    let dotenv_said = match dotenv {
        None => format!("~/{DOTENV_PATH_IN_HOME} is missing or unreadable"),
        Some(_) => {
            format!("~/{DOTENV_PATH_IN_HOME} sets neither DATABASE_TYPE nor DEFAULT_DATABASE")
        }
    };
    BackendAnswer {
        backend: Backend::Unknown,
        source: BackendSource::Fallback {
            reason: format!("no runtime override; {doctor_said}; {dotenv_said}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        move |key| map.get(key).cloned()
    }

    // ---- classification ------------------------------------------------

    #[test]
    fn names_classify_case_insensitively_and_only_two_are_servers() {
        assert_eq!(classify("neo4j"), Backend::Neo4j);
        assert_eq!(classify("Neo4J"), Backend::Neo4j);
        assert_eq!(classify("FALKORDB-REMOTE"), Backend::FalkordbRemote);
        assert_eq!(classify("kuzudb"), Backend::Kuzudb);
        assert_eq!(classify(" falkordb "), Backend::Falkordb);
        assert_eq!(classify("LadybugDB"), Backend::Ladybugdb);
        assert_eq!(classify("Memgraph"), Backend::Other("memgraph".into()));
        let servers: Vec<Backend> = [
            Backend::Neo4j,
            Backend::FalkordbRemote,
            Backend::Kuzudb,
            Backend::Falkordb,
            Backend::Ladybugdb,
            Backend::Other("memgraph".into()),
            Backend::Unknown,
        ]
        .into_iter()
        .filter(Backend::is_server)
        .collect();
        assert_eq!(servers, [Backend::Neo4j, Backend::FalkordbRemote]);
    }

    #[test]
    fn an_answer_displays_backend_and_source() {
        let answer = BackendAnswer {
            backend: Backend::Kuzudb,
            source: BackendSource::RuntimeEnv {
                var: "DEFAULT_DATABASE",
            },
        };
        assert_eq!(answer.to_string(), "kuzudb (environment DEFAULT_DATABASE)");
        assert_eq!(
            answer.facts(),
            BackendFacts {
                kind: "kuzudb".into(),
                source: "environment DEFAULT_DATABASE".into()
            }
        );
        let dotenv = BackendAnswer {
            backend: Backend::Neo4j,
            source: BackendSource::DotEnv {
                key: "DATABASE_TYPE",
            },
        };
        assert_eq!(
            dotenv.to_string(),
            "neo4j (~/.codegraphcontext/.env DATABASE_TYPE)"
        );
    }

    // ---- runtime environment -------------------------------------------

    #[test]
    fn runtime_overrides_follow_cgc_precedence() {
        let all = env(&[
            ("CGC_RUNTIME_DB_TYPE", "neo4j"),
            ("DATABASE_TYPE", "kuzudb"),
            ("DEFAULT_DATABASE", "falkordb"),
        ]);
        assert_eq!(
            from_runtime_env(all),
            Some((
                Backend::Neo4j,
                BackendSource::RuntimeEnv {
                    var: "CGC_RUNTIME_DB_TYPE"
                }
            ))
        );
        let two = env(&[("DATABASE_TYPE", "kuzudb"), ("DEFAULT_DATABASE", "neo4j")]);
        assert_eq!(
            from_runtime_env(two).map(|(backend, _)| backend),
            Some(Backend::Kuzudb)
        );
        let last = env(&[("DEFAULT_DATABASE", "falkordb-remote")]);
        assert_eq!(
            from_runtime_env(last),
            Some((
                Backend::FalkordbRemote,
                BackendSource::RuntimeEnv {
                    var: "DEFAULT_DATABASE"
                }
            ))
        );
    }

    #[test]
    fn empty_runtime_values_count_as_unset() {
        let blank = env(&[
            ("CGC_RUNTIME_DB_TYPE", ""),
            ("DATABASE_TYPE", "   "),
            ("DEFAULT_DATABASE", "neo4j"),
        ]);
        assert_eq!(
            from_runtime_env(blank).map(|(backend, _)| backend),
            Some(Backend::Neo4j)
        );
        assert_eq!(from_runtime_env(env(&[])), None);
        assert_eq!(from_runtime_env(env(&[("DATABASE_TYPE", "")])), None);
    }

    // ---- cgc doctor ----------------------------------------------------

    #[test]
    fn doctor_line_is_found_among_other_output() {
        let stderr = "🔍 Running CodeGraphContext diagnostics...\n\
                      \n\
                      📋 Configuration\n   \
                      Default database: kuzudb (source: environment (DEFAULT_DATABASE))\n   \
                      ✓ Config file found\n\
                      ❌ FalkorDB Lite is not installed\n";
        assert_eq!(parse_doctor_output(stderr), Some(Backend::Kuzudb));
        assert_eq!(
            parse_doctor_output("   Default database: falkordb (source: context (resolved))"),
            Some(Backend::Falkordb)
        );
        assert_eq!(
            parse_doctor_output(
                "Default database: falkordb-remote (source: environment (DEFAULT_DATABASE))"
            ),
            Some(Backend::FalkordbRemote)
        );
        assert_eq!(
            parse_doctor_output("   Default database: neo4j"),
            Some(Backend::Neo4j),
            "the source part is optional"
        );
    }

    #[test]
    fn doctor_line_tolerates_ansi_colour_codes() {
        let coloured = "\u{1b}[2m   \u{1b}[0m\u{1b}[1mDefault database:\u{1b}[0m \
                        \u{1b}[36mneo4j\u{1b}[0m (source: \u{1b}]8;;x\u{7}env\u{1b}]8;;\u{1b}\\)\r\n";
        assert_eq!(parse_doctor_output(coloured), Some(Backend::Neo4j));
    }

    #[test]
    fn doctor_garbage_is_no_answer() {
        for garbage in [
            "",
            "Traceback (most recent call last):\n  File \"cgc\", line 1\nImportError: boom",
            "   Default database:",
            "   Default database:    (source: unknown)",
            "   Default database: not configured",
            "   Default database: ¿qué? (source: x)",
            "\u{1b}[31m\u{1b}[0m",
            "Default databases are many",
        ] {
            assert_eq!(parse_doctor_output(garbage), None, "{garbage:?}");
        }
    }

    // ---- ~/.codegraphcontext/.env --------------------------------------

    #[test]
    fn dotenv_prefers_database_type_over_default_database() {
        let text = "DEFAULT_DATABASE=kuzudb\nDATABASE_TYPE=neo4j\n";
        assert_eq!(parse_dotenv(text), Some((Backend::Neo4j, "DATABASE_TYPE")));
        let only_default = "DEFAULT_DATABASE=ladybugdb\n";
        assert_eq!(
            parse_dotenv(only_default),
            Some((Backend::Ladybugdb, "DEFAULT_DATABASE"))
        );
        let empty_type = "DATABASE_TYPE=\nDEFAULT_DATABASE=kuzudb\n";
        assert_eq!(
            parse_dotenv(empty_type),
            Some((Backend::Kuzudb, "DEFAULT_DATABASE")),
            "an empty value is unset"
        );
    }

    #[test]
    fn dotenv_reads_quotes_export_comments_and_spacing() {
        let text = "\u{feff}# CodeGraphContext configuration\n\
                    \n\
                    NEO4J_URI=bolt://localhost:7687   # not ours\n\
                    export   DATABASE_TYPE = \"falkordb-remote\"  # inline after quotes\r\n";
        assert_eq!(
            parse_dotenv(text),
            Some((Backend::FalkordbRemote, "DATABASE_TYPE"))
        );
        assert_eq!(
            parse_dotenv("DEFAULT_DATABASE='neo4j'"),
            Some((Backend::Neo4j, "DEFAULT_DATABASE"))
        );
        assert_eq!(
            parse_dotenv("DEFAULT_DATABASE = kuzudb # the embedded default"),
            Some((Backend::Kuzudb, "DEFAULT_DATABASE"))
        );
        assert_eq!(
            parse_dotenv("DEFAULT_DATABASE=\"neo4j # quoted, not a comment\""),
            Some((
                Backend::Other("neo4j # quoted, not a comment".into()),
                "DEFAULT_DATABASE"
            ))
        );
        assert_eq!(
            parse_dotenv("DEFAULT_DATABASE=kuzu#db"),
            Some((Backend::Other("kuzu#db".into()), "DEFAULT_DATABASE")),
            "a # inside a word is not a comment"
        );
    }

    #[test]
    fn dotenv_without_the_keys_is_no_answer() {
        for text in [
            "",
            "# DATABASE_TYPE=neo4j\n",
            "NEO4J_URI=bolt://localhost:7687\nNEO4J_USERNAME=neo4j\n",
            "DATABASE_TYPE=\"neo4j\n",
            "exportDATABASE_TYPE=neo4j\n",
            "DATABASE TYPE=neo4j\n",
            "DATABASE_TYPE\n",
            "DATABASE_TYPE=''\n",
        ] {
            assert_eq!(parse_dotenv(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_repeated_dotenv_key_takes_its_last_value() {
        assert_eq!(
            parse_dotenv("DATABASE_TYPE=kuzudb\nDATABASE_TYPE=neo4j\n"),
            Some((Backend::Neo4j, "DATABASE_TYPE"))
        );
    }

    // ---- the whole detection -------------------------------------------

    #[test]
    fn detection_runs_env_then_doctor_then_dotenv() {
        let plan = DetectionPlan::new(10_000);
        assert_eq!(
            plan.steps(),
            [
                DetectionStep::RuntimeEnv,
                DetectionStep::Doctor { timeout_ms: 10_000 },
                DetectionStep::DotEnv,
                DetectionStep::Fallback,
            ]
        );
        let env_answer = Some((
            Backend::Neo4j,
            BackendSource::RuntimeEnv {
                var: "DEFAULT_DATABASE",
            },
        ));
        let doctor = "   Default database: kuzudb (source: context (resolved))";
        let dotenv = "DATABASE_TYPE=falkordb\n";
        assert_eq!(
            decide(env_answer, Some(doctor), Some(dotenv)).backend,
            Backend::Neo4j
        );
        assert_eq!(
            decide(None, Some(doctor), Some(dotenv)),
            BackendAnswer {
                backend: Backend::Kuzudb,
                source: BackendSource::Doctor
            }
        );
        assert_eq!(
            decide(None, Some("Traceback: boom"), Some(dotenv)),
            BackendAnswer {
                backend: Backend::Falkordb,
                source: BackendSource::DotEnv {
                    key: "DATABASE_TYPE"
                }
            }
        );
        assert_eq!(
            decide(None, None, Some("DEFAULT_DATABASE=neo4j")).backend,
            Backend::Neo4j,
            "a doctor that timed out falls through to the file"
        );
    }

    #[test]
    fn undetermined_backend_is_unknown_and_says_why() {
        let answer = decide(None, None, None);
        assert_eq!(answer.backend, Backend::Unknown);
        assert!(!answer.backend.is_server());
        let text = answer.to_string();
        assert!(text.starts_with("unknown (not determined: "), "{text}");
        assert!(text.contains("did not answer in time"), "{text}");
        assert!(text.contains("missing or unreadable"), "{text}");

        let text = decide(None, Some("garbage"), Some("# nothing\n")).to_string();
        assert!(text.contains("no `Default database:` line"), "{text}");
        assert!(text.contains("sets neither"), "{text}");
    }
}
