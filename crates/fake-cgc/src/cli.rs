//! Argument parsing shaped like the real `cgc` (a Typer/Click app): root
//! options, then one subcommand with its own arguments.
//!
//! Root options must come before the subcommand (`cgc --db kuzudb index .`);
//! an unknown long root option is tolerated and takes a value, because the
//! service may pass options this fake does not model. Subcommand arguments
//! are strict, like the real CLI: an unknown option or an extra argument is a
//! usage error (exit 2).

use std::fmt;

/// The root options before the subcommand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalOptions {
    /// `--db X` / `--database X` / `-d X` / `-db X`.
    pub database: Option<String>,
    /// `--db-path X`.
    pub db_path: Option<String>,
    /// `--context X`.
    pub context: Option<String>,
}

/// The subcommand, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `cgc index [PATH] [--force]`.
    Index { path: String, force: bool },
    /// `cgc update [PATH] [--quiet]`.
    Update { path: String, quiet: bool },
    /// `cgc watch [PATH] [--sync-on-start] [--poll]`.
    Watch {
        path: String,
        sync_on_start: bool,
        poll: bool,
    },
    /// `cgc doctor`.
    Doctor,
    /// `cgc list`.
    List,
    /// `cgc --version`, `cgc -v` or `cgc version`.
    Version,
    /// `cgc query CYPHER`.
    Query { cypher: String },
    /// `cgc find KIND TERM`, e.g. `cgc find name foo`.
    Find { kind: String, term: String },
}

impl Command {
    /// The scenario key of this subcommand (`"watch"`, `"version"`, ...).
    pub fn key(&self) -> &'static str {
        match self {
            Command::Index { .. } => "index",
            Command::Update { .. } => "update",
            Command::Watch { .. } => "watch",
            Command::Doctor => "doctor",
            Command::List => "list",
            Command::Version => "version",
            Command::Query { .. } => "query",
            Command::Find { .. } => "find",
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Run a subcommand.
    Run {
        globals: GlobalOptions,
        command: Command,
    },
    /// `--help` somewhere: print usage on stdout, exit 0.
    Help,
}

/// A usage error: printed on stderr, exit 2, like Click.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The usage banner (`Usage: cgc index [OPTIONS] [PATH]`).
    pub usage: String,
    /// What was wrong (`No such command 'foo'.`).
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\n{}\n\nError: {}",
            self.usage,
            crate::texts::USAGE_HINT,
            self.message
        )
    }
}

/// Root flags that take no value (everything else long takes one).
const ROOT_FLAGS: &[&str] = &["--debug", "--install-completion", "--show-completion"];

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Request, UsageError> {
    let mut globals = GlobalOptions::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (name, inline_value) = split_inline_value(arg);
        let mut value = |option: &str| -> Result<String, UsageError> {
            match inline_value {
                Some(value) => Ok(value.to_owned()),
                None => rest
                    .next()
                    .cloned()
                    .ok_or_else(|| root_error(format!("Option '{option}' requires an argument."))),
            }
        };
        match name {
            "--help" | "-h" => return Ok(Request::Help),
            "--version" | "-v" => {
                return Ok(Request::Run {
                    globals,
                    command: Command::Version,
                })
            }
            "--db" | "--database" | "-d" | "-db" => globals.database = Some(value(name)?),
            "--db-path" => globals.db_path = Some(value(name)?),
            "--context" => globals.context = Some(value(name)?),
            flag if ROOT_FLAGS.contains(&flag) => {}
            unknown if unknown.starts_with("--") => {
                value(unknown)?;
            }
            unknown if unknown.starts_with('-') => {
                return Err(root_error(format!("No such option: {unknown}")))
            }
            subcommand => {
                let sub_args: Vec<&str> = rest.map(String::as_str).collect();
                return parse_subcommand(subcommand, &sub_args).map(|command| match command {
                    Some(command) => Request::Run { globals, command },
                    None => Request::Help,
                });
            }
        }
    }
    Err(root_error("Missing command.".to_owned()))
}

/// Splits `--opt=value` into `("--opt", Some("value"))`.
fn split_inline_value(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((name, value)) if name.starts_with("--") => (name, Some(value)),
        _ => (arg, None),
    }
}

fn root_error(message: String) -> UsageError {
    UsageError {
        usage: crate::texts::USAGE_ROOT.to_owned(),
        message,
    }
}

/// The arguments of one subcommand, checked against its signature.
struct SubcommandArgs<'a> {
    usage: String,
    positionals: Vec<&'a str>,
    flags: Vec<&'a str>,
}

impl<'a> SubcommandArgs<'a> {
    /// Splits `args` into positionals and known flags; `Ok(None)` on `--help`.
    fn split(
        name: &str,
        usage_tail: &str,
        known_flags: &[&str],
        args: &[&'a str],
    ) -> Result<Option<Self>, UsageError> {
        let usage = format!("Usage: cgc {name} [OPTIONS] {usage_tail}")
            .trim_end()
            .to_owned();
        let mut positionals = Vec::new();
        let mut flags = Vec::new();
        let mut only_positionals = false;
        for &arg in args {
            if only_positionals || !arg.starts_with('-') || arg == "-" {
                positionals.push(arg);
            } else if arg == "--" {
                only_positionals = true;
            } else if arg == "--help" || arg == "-h" {
                return Ok(None);
            } else if known_flags.contains(&arg) {
                flags.push(arg);
            } else {
                return Err(UsageError {
                    usage,
                    message: format!("No such option: {arg}"),
                });
            }
        }
        Ok(Some(Self {
            usage,
            positionals,
            flags,
        }))
    }

    fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// Positionals `[required..., optional...]`, rejecting extras.
    fn positionals(
        &self,
        required: &[&str],
        optional: usize,
    ) -> Result<Vec<Option<String>>, UsageError> {
        if let Some(missing) = required.get(self.positionals.len()) {
            return Err(UsageError {
                usage: self.usage.clone(),
                message: format!("Missing argument '{missing}'."),
            });
        }
        if let Some(extra) = self.positionals.get(required.len() + optional) {
            return Err(UsageError {
                usage: self.usage.clone(),
                message: format!("Got unexpected extra argument ({extra})"),
            });
        }
        Ok((0..required.len() + optional)
            .map(|index| self.positionals.get(index).map(|arg| (*arg).to_owned()))
            .collect())
    }
}

fn parse_subcommand(name: &str, args: &[&str]) -> Result<Option<Command>, UsageError> {
    let (usage_tail, flags): (&str, &[&str]) = match name {
        "index" => ("[PATH]", &["--force", "-f"]),
        "update" => ("[PATH]", &["--quiet", "-q"]),
        "watch" => ("[PATH]", &["--sync-on-start", "--poll"]),
        "doctor" | "list" | "version" => ("", &[]),
        "query" => ("CYPHER", &[]),
        "find" => ("KIND TERM", &[]),
        unknown => return Err(root_error(format!("No such command '{unknown}'."))),
    };
    let Some(parsed) = SubcommandArgs::split(name, usage_tail, flags, args)? else {
        return Ok(None);
    };
    let path = |values: Vec<Option<String>>| {
        values
            .into_iter()
            .next()
            .flatten()
            .unwrap_or_else(|| ".".to_owned())
    };
    let command = match name {
        "index" => Command::Index {
            path: path(parsed.positionals(&[], 1)?),
            force: parsed.has("--force") || parsed.has("-f"),
        },
        "update" => Command::Update {
            path: path(parsed.positionals(&[], 1)?),
            quiet: parsed.has("--quiet") || parsed.has("-q"),
        },
        "watch" => Command::Watch {
            path: path(parsed.positionals(&[], 1)?),
            sync_on_start: parsed.has("--sync-on-start"),
            poll: parsed.has("--poll"),
        },
        "query" => {
            let mut values = parsed.positionals(&["CYPHER"], 0)?.into_iter().flatten();
            Command::Query {
                cypher: values.next().unwrap_or_default(),
            }
        }
        "find" => {
            let mut values = parsed
                .positionals(&["KIND", "TERM"], 0)?
                .into_iter()
                .flatten();
            Command::Find {
                kind: values.next().unwrap_or_default(),
                term: values.next().unwrap_or_default(),
            }
        }
        "doctor" | "list" | "version" => {
            parsed.positionals(&[], 0)?;
            match name {
                "doctor" => Command::Doctor,
                "list" => Command::List,
                _ => Command::Version,
            }
        }
        _ => unreachable!("subcommand names are matched above"),
    };
    Ok(Some(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    fn run(line: &str) -> (GlobalOptions, Command) {
        match parse(&args(line)) {
            Ok(Request::Run { globals, command }) => (globals, command),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn root_options_come_before_the_subcommand() {
        let (globals, command) =
            run("--db kuzudb --db-path /x/db --context c --foo bar watch . --sync-on-start");
        assert_eq!(globals.database.as_deref(), Some("kuzudb"));
        assert_eq!(globals.db_path.as_deref(), Some("/x/db"));
        assert_eq!(globals.context.as_deref(), Some("c"));
        assert_eq!(
            command,
            Command::Watch {
                path: ".".into(),
                sync_on_start: true,
                poll: false
            }
        );
    }

    #[test]
    fn inline_values_and_defaults() {
        let (globals, command) = run("--database=ladybugdb index");
        assert_eq!(globals.database.as_deref(), Some("ladybugdb"));
        assert_eq!(
            command,
            Command::Index {
                path: ".".into(),
                force: false
            }
        );
        assert_eq!(
            run("update src -q").1,
            Command::Update {
                path: "src".into(),
                quiet: true
            }
        );
    }

    #[test]
    fn version_flag_and_subcommand() {
        assert_eq!(run("--version").1, Command::Version);
        assert_eq!(run("--db kuzudb -v").1, Command::Version);
        assert_eq!(run("version").1, Command::Version);
    }

    #[test]
    fn query_and_find_take_their_arguments() {
        assert_eq!(
            parse(&["query".into(), "MATCH (n) RETURN n".into()]),
            Ok(Request::Run {
                globals: GlobalOptions::default(),
                command: Command::Query {
                    cypher: "MATCH (n) RETURN n".into()
                }
            })
        );
        assert_eq!(
            run("find name foo").1,
            Command::Find {
                kind: "name".into(),
                term: "foo".into()
            }
        );
    }

    #[test]
    fn usage_errors() {
        let error = parse(&args("frobnicate")).unwrap_err();
        assert_eq!(error.message, "No such command 'frobnicate'.");
        assert!(parse(&args("index --db kuzudb .")).is_err());
        assert!(parse(&args("index a b")).is_err());
        assert!(parse(&args("query")).is_err());
        assert!(parse(&args("find name")).is_err());
        assert!(parse(&args("doctor now")).is_err());
        assert!(parse(&args("--db")).is_err());
        assert!(parse(&args("")).is_err());
        assert!(parse(&args("-x watch")).is_err());
    }

    #[test]
    fn help_anywhere() {
        assert_eq!(parse(&args("--help")), Ok(Request::Help));
        assert_eq!(parse(&args("watch --help")), Ok(Request::Help));
    }
}
