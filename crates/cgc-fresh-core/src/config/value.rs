//! Parsing one raw value of one layer into a typed value, or into the reason
//! it is invalid. File layers give JSON values (TOML is converted to JSON by
//! the loader); the environment layer gives text.

use serde_json::Value;

use super::settings::{SyncStrategy, WatchMode};

/// The largest millisecond value accepted (365 days): large enough for any
/// real timeout, small enough that adding it to a clock reading never
/// overflows.
pub const MAX_MILLIS: u64 = 365 * 24 * 60 * 60 * 1000;

/// Bounds for `service.maxLineBytes`: a line shorter than a `hello` frame
/// would make the protocol unusable; a huge one would let a client make the
/// service buffer unbounded input.
pub const MIN_LINE_BYTES: u64 = 1024;
pub const MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// How many characters of an offending value a warning quotes.
const MAX_QUOTED_CHARS: usize = 120;

/// One value as a layer wrote it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawValue<'a> {
    /// From a file layer (JSON, or TOML converted to JSON).
    Tree(&'a Value),
    /// From an environment variable.
    Env(&'a str),
}

impl RawValue<'_> {
    /// "Not set in this layer": a JSON `null`, or an empty environment
    /// variable (a common way to switch a variable off, e.g. in a unit file).
    pub(crate) fn is_unset(&self) -> bool {
        match self {
            RawValue::Tree(value) => value.is_null(),
            RawValue::Env(text) => text.trim().is_empty(),
        }
    }

    /// The value as a warning quotes it: JSON text, shortened if long.
    pub(crate) fn quoted(&self) -> String {
        let full = match self {
            RawValue::Tree(value) => value.to_string(),
            RawValue::Env(text) => Value::from(*text).to_string(),
        };
        shorten(full)
    }

    /// The text of a string value from either layer.
    fn text(&self) -> Option<&str> {
        match self {
            RawValue::Tree(Value::String(text)) => Some(text),
            RawValue::Env(text) => Some(text),
            RawValue::Tree(_) => None,
        }
    }
}

pub(crate) fn shorten(text: String) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The boolean spellings accepted as text in every layer.
fn text_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// `off | on | auto`, with booleans mapping to `on`/`off`; `auto` only from
/// its own literal text, never from a boolean.
pub(crate) fn watch_mode(raw: RawValue<'_>) -> Result<WatchMode, String> {
    const EXPECTED: &str = "expected \"off\", \"on\", \"auto\" or a boolean";
    if let RawValue::Tree(Value::Bool(flag)) = raw {
        return Ok(if *flag { WatchMode::On } else { WatchMode::Off });
    }
    let text = raw.text().ok_or(EXPECTED)?;
    match text.trim().to_ascii_lowercase().as_str() {
        "off" => Ok(WatchMode::Off),
        "on" => Ok(WatchMode::On),
        "auto" => Ok(WatchMode::Auto),
        other => match text_bool(other) {
            Some(true) => Ok(WatchMode::On),
            Some(false) => Ok(WatchMode::Off),
            None => Err(EXPECTED.to_owned()),
        },
    }
}

pub(crate) fn boolean(raw: RawValue<'_>) -> Result<bool, String> {
    const EXPECTED: &str = "expected a boolean (true/false, yes/no, 1/0)";
    match raw {
        RawValue::Tree(Value::Bool(flag)) => Ok(*flag),
        _ => raw
            .text()
            .and_then(text_bool)
            .ok_or_else(|| EXPECTED.to_owned()),
    }
}

/// An integer in `min..=max`: a JSON/TOML integer, or a string of decimal
/// digits in any layer.
pub(crate) fn integer(raw: RawValue<'_>, min: u64, max: u64) -> Result<u64, String> {
    let parsed = match raw {
        RawValue::Tree(Value::Number(number)) => match number.as_u64() {
            Some(value) => value,
            None if number.is_i64() => return Err(below_min(min)),
            None => return Err("expected a whole number".to_owned()),
        },
        _ => {
            let text = raw.text().ok_or("expected an integer")?.trim();
            match text.parse::<u64>() {
                Ok(value) if text.bytes().all(|b| b.is_ascii_digit()) => value,
                _ if is_negative_integer(text) => return Err(below_min(min)),
                _ => return Err("expected an integer".to_owned()),
            }
        }
    };
    if parsed < min {
        Err(below_min(min))
    } else if parsed > max {
        Err(format!("must be at most {max}"))
    } else {
        Ok(parsed)
    }
}

fn is_negative_integer(text: &str) -> bool {
    text.strip_prefix('-')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

fn below_min(min: u64) -> String {
    match min {
        0 => "must not be negative".to_owned(),
        1 => "must be greater than 0".to_owned(),
        _ => format!("must be at least {min}"),
    }
}

pub(crate) fn non_empty_string(raw: RawValue<'_>) -> Result<String, String> {
    match raw.text().map(str::trim) {
        Some(text) if !text.is_empty() => Ok(text.to_owned()),
        _ => Err("expected a non-empty string".to_owned()),
    }
}

/// How the environment layer spells a list in one variable.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EnvListSyntax {
    /// `write, edit ,bash`; blank items are dropped.
    CommaSeparated,
    /// `--db kuzudb`; no quoting.
    WhitespaceSeparated,
}

/// A list of non-empty strings: a JSON/TOML array in files, one delimited
/// string in the environment.
pub(crate) fn string_list(
    raw: RawValue<'_>,
    env_syntax: EnvListSyntax,
) -> Result<Vec<String>, String> {
    match raw {
        RawValue::Tree(value) => string_array(value),
        RawValue::Env(text) => Ok(match env_syntax {
            EnvListSyntax::CommaSeparated => text
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect(),
            EnvListSyntax::WhitespaceSeparated => {
                text.split_whitespace().map(str::to_owned).collect()
            }
        }),
    }
}

fn string_array(value: &Value) -> Result<Vec<String>, String> {
    const EXPECTED: &str = "expected an array of non-empty strings";
    let items = value.as_array().ok_or(EXPECTED)?;
    items
        .iter()
        .map(|item| match item.as_str() {
            Some(text) if !text.trim().is_empty() => Ok(text.to_owned()),
            _ => Err(EXPECTED.to_owned()),
        })
        .collect()
}

/// `incremental | reconcile | update | index` (any case), `custom: ARG ARG...` as text in
/// any layer, or a non-empty array of arguments in a file.
pub(crate) fn sync_strategy(raw: RawValue<'_>) -> Result<SyncStrategy, String> {
    const EXPECTED: &str = "expected \"incremental\", \"reconcile\", \"update\", \"index\", \"custom: ARGS...\" or an array of arguments";
    const CUSTOM_PREFIX: &str = "custom:";
    if let RawValue::Tree(value @ Value::Array(_)) = raw {
        let args = string_array(value)?;
        return if args.is_empty() {
            Err("a custom sync needs at least one argument".to_owned())
        } else {
            Ok(SyncStrategy::Custom(args))
        };
    }
    let text = raw.text().ok_or(EXPECTED)?.trim();
    match text.to_ascii_lowercase().as_str() {
        "incremental" => return Ok(SyncStrategy::Incremental),
        "reconcile" => return Ok(SyncStrategy::Reconcile),
        "update" => return Ok(SyncStrategy::Update),
        "index" => return Ok(SyncStrategy::Index),
        _ => {}
    }
    let prefix_len = CUSTOM_PREFIX.len();
    let has_custom_prefix = text
        .get(..prefix_len)
        .is_some_and(|head| head.eq_ignore_ascii_case(CUSTOM_PREFIX));
    if !has_custom_prefix {
        return Err(EXPECTED.to_owned());
    }
    let args: Vec<String> = text[prefix_len..]
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if args.is_empty() {
        Err("a custom sync needs at least one argument after \"custom:\"".to_owned())
    } else {
        Ok(SyncStrategy::Custom(args))
    }
}

/// The kind of value a key accepts: how a raw value of any layer is checked
/// and turned into the field's type, and how the field reads back in the
/// form a file would write it. Each key names its kind in `schema.rs`.
pub(crate) trait Kind {
    type Value;
    fn parse(raw: RawValue<'_>) -> Result<Self::Value, String>;
    fn render(value: &Self::Value) -> Value;
}

macro_rules! kinds {
    ($($(#[doc = $doc:literal])* $Kind:ident: $ty:ty = |$raw:ident| $parse:expr, |$value:ident| $render:expr;)*) => {$(
        $(#[doc = $doc])*
        pub(crate) enum $Kind {}

        impl Kind for $Kind {
            type Value = $ty;
            fn parse($raw: RawValue<'_>) -> Result<$ty, String> {
                $parse
            }
            fn render($value: &$ty) -> Value {
                $render
            }
        }
    )*};
}

kinds! {
    /// `off | on | auto` or a boolean.
    Watch: WatchMode = |raw| watch_mode(raw), |mode| Value::from(mode.as_str());
    /// A boolean.
    Flag: bool = |raw| boolean(raw), |flag| Value::from(*flag);
    /// Milliseconds, `1..=MAX_MILLIS`.
    PositiveMillis: u64 = |raw| integer(raw, 1, MAX_MILLIS), |ms| Value::from(*ms);
    /// Milliseconds, `0..=MAX_MILLIS`.
    Millis: u64 = |raw| integer(raw, 0, MAX_MILLIS), |ms| Value::from(*ms);
    /// A count, `0..=u32::MAX`.
    Count: u32 = |raw| {
        let count = integer(raw, 0, u64::from(u32::MAX))?;
        u32::try_from(count).map_err(|_| format!("must be at most {}", u32::MAX))
    }, |count| Value::from(*count);
    /// A line length in bytes, `MIN_LINE_BYTES..=MAX_LINE_BYTES`.
    LineBytes: usize = |raw| {
        let bytes = integer(raw, MIN_LINE_BYTES, MAX_LINE_BYTES)?;
        usize::try_from(bytes).map_err(|_| "too large for this platform".to_owned())
    }, |bytes| Value::from(*bytes);
    /// A non-empty string, trimmed.
    NonEmptyText: String = |raw| non_empty_string(raw), |text| Value::from(text.as_str());
    /// A list of strings; comma-separated in the environment.
    CommaList: Vec<String> = |raw| string_list(raw, EnvListSyntax::CommaSeparated),
        |items| Value::from(items.clone());
    /// A list of strings; whitespace-separated in the environment.
    WordList: Vec<String> = |raw| string_list(raw, EnvListSyntax::WhitespaceSeparated),
        |items| Value::from(items.clone());
    /// `reconcile | update | index`, or custom arguments.
    Strategy: SyncStrategy = |raw| sync_strategy(raw), |strategy| match strategy {
        SyncStrategy::Custom(args) => Value::from(args.clone()),
        named => Value::from(named.name().unwrap_or_default()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(value: &Value) -> RawValue<'_> {
        RawValue::Tree(value)
    }

    #[test]
    fn watch_mode_accepts_the_enum_and_boolean_spellings_only() {
        for (text, mode) in [
            ("off", WatchMode::Off),
            (" ON ", WatchMode::On),
            ("Auto", WatchMode::Auto),
            ("true", WatchMode::On),
            ("YES", WatchMode::On),
            ("1", WatchMode::On),
            ("false", WatchMode::Off),
            ("no", WatchMode::Off),
            ("0", WatchMode::Off),
        ] {
            assert_eq!(watch_mode(RawValue::Env(text)), Ok(mode), "env {text:?}");
            let value = json!(text);
            assert_eq!(watch_mode(tree(&value)), Ok(mode), "file {text:?}");
        }
        for bad in [
            json!("maybe"),
            json!(""),
            json!(1),
            json!(["on"]),
            json!({"on": true}),
        ] {
            assert!(watch_mode(tree(&bad)).is_err(), "{bad}");
        }
        assert!(watch_mode(RawValue::Env("automatic")).is_err());
    }

    #[test]
    fn integers_respect_their_bounds_and_reject_non_integers() {
        assert_eq!(integer(tree(&json!(15000)), 1, MAX_MILLIS), Ok(15000));
        assert_eq!(integer(RawValue::Env(" 250 "), 1, MAX_MILLIS), Ok(250));
        assert_eq!(
            integer(tree(&json!("42")), 0, 10),
            Err("must be at most 10".into())
        );
        assert_eq!(
            integer(tree(&json!(0)), 1, 9),
            Err("must be greater than 0".into())
        );
        assert_eq!(
            integer(tree(&json!(-5)), 0, 9),
            Err("must not be negative".into())
        );
        assert_eq!(
            integer(RawValue::Env("-5"), 1, 9),
            Err("must be greater than 0".into())
        );
        assert_eq!(
            integer(tree(&json!(1.5)), 1, 9),
            Err("expected a whole number".into())
        );
        for bad in ["1.5", "abc", "+5", "1e3", "0x10", "99999999999999999999999"] {
            assert_eq!(
                integer(RawValue::Env(bad), 0, MAX_MILLIS),
                Err("expected an integer".into()),
                "{bad}"
            );
        }
        assert!(integer(tree(&json!(true)), 0, 9).is_err());
    }

    #[test]
    fn lists_use_arrays_in_files_and_delimiters_in_the_environment() {
        let tools = string_list(
            RawValue::Env(" write, ,bash "),
            EnvListSyntax::CommaSeparated,
        );
        assert_eq!(tools, Ok(vec!["write".to_owned(), "bash".to_owned()]));
        let args = string_list(
            RawValue::Env("--db  kuzudb"),
            EnvListSyntax::WhitespaceSeparated,
        );
        assert_eq!(args, Ok(vec!["--db".to_owned(), "kuzudb".to_owned()]));
        let file = json!(["--db path", "x"]);
        let parsed = string_list(tree(&file), EnvListSyntax::WhitespaceSeparated);
        assert_eq!(parsed, Ok(vec!["--db path".to_owned(), "x".to_owned()]));
        for bad in [
            json!("write,edit"),
            json!(["write", 3]),
            json!(["write", " "]),
        ] {
            assert!(
                string_list(tree(&bad), EnvListSyntax::CommaSeparated).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn sync_strategy_names_custom_text_and_arrays() {
        assert_eq!(
            sync_strategy(RawValue::Env(" Update ")),
            Ok(SyncStrategy::Update)
        );
        assert_eq!(
            sync_strategy(tree(&json!("index"))),
            Ok(SyncStrategy::Index)
        );
        let custom = SyncStrategy::Custom(vec!["index".into(), ".".into(), "--force".into()]);
        assert_eq!(
            sync_strategy(RawValue::Env("custom: index . --force")),
            Ok(custom.clone())
        );
        assert_eq!(
            sync_strategy(RawValue::Env("CUSTOM:index . --force")),
            Ok(custom.clone())
        );
        assert_eq!(
            sync_strategy(tree(&json!(["index", ".", "--force"]))),
            Ok(custom)
        );
        for bad in [
            json!("custom:"),
            json!([]),
            json!("rebuild"),
            json!(["index", 1]),
            json!(true),
        ] {
            assert!(sync_strategy(tree(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn long_values_are_shortened_in_quotes() {
        let long = "x".repeat(500);
        let quoted = RawValue::Env(&long).quoted();
        assert!(quoted.chars().count() <= MAX_QUOTED_CHARS + 1);
        assert!(quoted.ends_with('…'));
        assert_eq!(RawValue::Env("maybe").quoted(), "\"maybe\"");
    }
}
