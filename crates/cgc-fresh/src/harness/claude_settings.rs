//! `cgc-fresh install --harness claude-code` / `uninstall --harness
//! claude-code`: the hooks and the status line in Claude Code's
//! `settings.json` (`.claude/settings.json` of the project, or the user's
//! `$CLAUDE_CONFIG_DIR/settings.json`, default `~/.claude/settings.json`).
//!
//! The settings format: `{"hooks": {"<Event>": [{"matcher": "<regex>",
//! "hooks": [{"type": "command", "command": "…", "timeout": <s>}]}]},
//! "statusLine": {"type": "command", "command": "…"}}`.
//!
//! Rules:
//! - *Ours* is a hook whose command is `<…/cgc-fresh> hook claude-code` and a
//!   `statusLine` whose command is `<…/cgc-fresh> status --line` — whatever
//!   directory the binary was in, so re-installing after moving the binary
//!   replaces the old entries instead of adding new ones.
//! - Install adds one matcher group of ours per event (or keeps it when it
//!   is already exactly there) and removes any other entry of ours; it
//!   never touches another hook, matcher group or key. A `statusLine` of the
//!   person's own is left alone (and said so).
//! - Uninstall takes out exactly our entries. A matcher group, an event's
//!   array, and the `hooks` object itself are removed only when taking out
//!   our entries emptied them: so `hooks` goes only when ours were all it
//!   held — exactly what install creates in a file without hooks. (An empty
//!   `"hooks": {}` written by hand before the install is therefore removed
//!   too; Claude Code reads it the same as no `hooks`.)
//! - Rewriting is atomic (a fresh temp file renamed over the target); a
//!   `settings.json` or `.claude` that is a symlink is refused, never
//!   followed; a file that is not a JSON object is refused, never replaced.
//!   Nothing is written when nothing changes.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{json, Map, Value};

use crate::shell_word::shell_word;

/// Which settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// `<workspace>/.claude/settings.json` (shared with the project).
    Project,
    /// `$CLAUDE_CONFIG_DIR/settings.json`, default `~/.claude/settings.json`.
    User,
}

/// The tools whose use the service must hear about.
pub const TOOL_MATCHER: &str = "Write|Edit|MultiEdit|NotebookEdit|Bash";

/// The events we hook, each with its matcher (`None`: every occurrence).
/// `PostToolUse` matches every tool so that pending notices are shown
/// after any tool, not only after an edit.
pub const EVENTS: [(&str, Option<&str>); 6] = [
    ("SessionStart", None),
    ("PreToolUse", Some(TOOL_MATCHER)),
    ("PostToolUse", Some("*")),
    ("PostToolUseFailure", Some(TOOL_MATCHER)),
    ("Stop", None),
    ("SessionEnd", None),
];

/// Claude Code's time limit for one run of our hook, in seconds; the hook
/// bounds itself far below it.
pub const HOOK_TIMEOUT_S: u64 = 10;

const HOOK_ARGS: &str = "hook claude-code";
const STATUS_ARGS: &str = "status --line";

/// Why a settings file cannot be changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("the settings are not a JSON object")]
    NotObject,
    #[error("`hooks` is not a JSON object")]
    HooksNotObject,
    #[error("`hooks.{0}` is not an array")]
    EventNotArray(String),
}

/// `<bin> hook claude-code`.
pub fn hook_command(bin: &Path) -> String {
    format!("{} {HOOK_ARGS}", shell_word(bin))
}

/// `<bin> status --line`.
pub fn status_command(bin: &Path) -> String {
    format!("{} {STATUS_ARGS}", shell_word(bin))
}

/// The program word of a command (unquoted) and the rest.
fn split_program(command: &str) -> Option<(String, &str)> {
    let command = command.trim();
    if let Some(quoted) = command.strip_prefix('\'') {
        // '…' with '\'' escapes, as `shell_word` writes it.
        let mut program = String::new();
        let mut rest = quoted;
        loop {
            let end = rest.find('\'')?;
            program.push_str(&rest[..end]);
            rest = &rest[end + 1..];
            if let Some(after) = rest.strip_prefix(r"\''") {
                program.push('\'');
                rest = after;
            } else {
                return Some((program, rest));
            }
        }
    }
    let end = command.find(char::is_whitespace).unwrap_or(command.len());
    Some((command[..end].to_string(), &command[end..]))
}

fn is_ours(command: &str, args: &str) -> bool {
    match split_program(command) {
        Some((program, rest)) => {
            Path::new(&program).file_name().and_then(|n| n.to_str()) == Some("cgc-fresh")
                && rest.split_whitespace().collect::<Vec<_>>()
                    == args.split_whitespace().collect::<Vec<_>>()
        }
        None => false,
    }
}

/// Whether a hook command is ours.
pub fn is_our_hook_command(command: &str) -> bool {
    is_ours(command, HOOK_ARGS)
}

/// Whether a status line command is ours.
pub fn is_our_status_command(command: &str) -> bool {
    is_ours(command, STATUS_ARGS)
}

fn is_our_hook(hook: &Value) -> bool {
    hook.get("type").and_then(Value::as_str) == Some("command")
        && hook
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(is_our_hook_command)
}

fn is_our_status_line(value: &Value) -> bool {
    value
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(is_our_status_command)
}

/// Our matcher group for one event.
fn our_group(matcher: Option<&str>, command: &str) -> Value {
    let hook = json!({ "type": "command", "command": command, "timeout": HOOK_TIMEOUT_S });
    match matcher {
        Some(matcher) => json!({ "matcher": matcher, "hooks": [hook] }),
        None => json!({ "hooks": [hook] }),
    }
}

/// Takes our hooks out of every group of `groups` except the one at
/// `keep`; a group emptied by that is removed. Returns whether anything
/// was taken out.
fn strip_ours(groups: &mut Vec<Value>, keep: Option<usize>) -> bool {
    let mut removed = false;
    let mut index = 0;
    groups.retain_mut(|group| {
        let this = index;
        index += 1;
        if Some(this) == keep {
            return true;
        }
        let Some(hooks) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            return true;
        };
        let before = hooks.len();
        hooks.retain(|hook| !is_our_hook(hook));
        if hooks.len() == before {
            return true;
        }
        removed = true;
        !hooks.is_empty()
    });
    removed
}

/// The result of a merge or an unmerge.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub settings: Value,
    pub changed: bool,
    /// Things the person should know (e.g. their own status line was kept).
    pub notes: Vec<String>,
}

impl Change {
    /// The change from `before` to the object `after`, with `notes`.
    pub(crate) fn between(before: &Value, after: Map<String, Value>, notes: Vec<String>) -> Change {
        let settings = Value::Object(after);
        Change {
            changed: settings != *before,
            settings,
            notes,
        }
    }
}

/// Merges our hooks and status line (for the binary `bin`) into `settings`.
pub fn merge(settings: &Value, bin: &Path) -> Result<Change, SettingsError> {
    let mut root = settings
        .as_object()
        .cloned()
        .ok_or(SettingsError::NotObject)?;
    let mut notes = Vec::new();
    let command = hook_command(bin);
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(SettingsError::HooksNotObject)?;
    for (event, matcher) in EVENTS {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| SettingsError::EventNotArray(event.to_string()))?;
        let desired = our_group(matcher, &command);
        let keep = groups.iter().position(|group| *group == desired);
        strip_ours(groups, keep);
        if keep.is_none() {
            groups.push(desired);
        }
    }
    let status = json!({ "type": "command", "command": status_command(bin) });
    match root.get("statusLine") {
        None => {
            root.insert("statusLine".into(), status);
        }
        Some(existing) if is_our_status_line(existing) => {
            root.insert("statusLine".into(), status);
        }
        Some(existing) => notes.push(format!(
            "kept your own statusLine ({}); to show the graph's state there, run `{}`",
            existing
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("not a command"),
            status_command(bin)
        )),
    }
    Ok(Change::between(settings, root, notes))
}

/// Takes exactly our hooks and status line out of `settings`.
pub fn unmerge(settings: &Value) -> Result<Change, SettingsError> {
    let mut root = settings
        .as_object()
        .cloned()
        .ok_or(SettingsError::NotObject)?;
    let mut drop_hooks = false;
    if let Some(hooks) = root.get_mut("hooks") {
        let hooks = hooks.as_object_mut().ok_or(SettingsError::HooksNotObject)?;
        let mut removed_any = false;
        let events: Vec<String> = hooks.keys().cloned().collect();
        for event in events {
            let Some(groups) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
                continue;
            };
            if strip_ours(groups, None) {
                removed_any = true;
                if groups.is_empty() {
                    hooks.remove(&event);
                }
            }
        }
        drop_hooks = removed_any && hooks.is_empty();
    }
    if drop_hooks {
        root.remove("hooks");
    }
    if root.get("statusLine").is_some_and(is_our_status_line) {
        root.remove("statusLine");
    }
    Ok(Change::between(settings, root, Vec::new()))
}

/// Where the settings file of `scope` is.
pub fn settings_path(
    scope: Scope,
    workspace: &Path,
    claude_config_dir: Option<&str>,
    home: &Path,
) -> PathBuf {
    match scope {
        Scope::Project => workspace.join(".claude").join("settings.json"),
        Scope::User => match claude_config_dir.filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("settings.json"),
            None => home.join(".claude").join("settings.json"),
        },
    }
}

/// Refuses a path that is a symlink (the file, or its directory).
pub(crate) fn refuse_symlinks(path: &Path) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for candidate in [dir, path] {
        if let Ok(meta) = std::fs::symlink_metadata(candidate) {
            if meta.file_type().is_symlink() {
                anyhow::bail!(
                    "{} is a symlink; refusing to write through it (edit the file it points to, \
                     or replace the link with a file)",
                    candidate.display()
                );
            }
        }
    }
    Ok(())
}

/// Reads `path` as settings: absent or empty is `{}`.
pub(crate) fn read_settings(path: &Path) -> anyhow::Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Some(Value::Object(Map::new()))),
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not valid JSON; left unchanged", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn render(settings: &Value) -> anyhow::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(settings)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `settings` to `path` (atomically, never through a link), or with
/// `dry_run` prints what would be written; whether it wrote.
pub(crate) fn write_or_show(
    path: &Path,
    settings: &Value,
    dry_run: bool,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let bytes = render(settings)?;
    if dry_run {
        writeln!(out, "would write {}:", path.display())?;
        out.write_all(&bytes)?;
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    refuse_symlinks(path)?;
    crate::atomic_file::write_atomically(path, &bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(true)
}

/// `install --harness claude-code`.
pub fn install(path: &Path, bin: &Path, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    refuse_symlinks(path)?;
    let before = read_settings(path)?.unwrap_or_else(|| Value::Object(Map::new()));
    let change =
        merge(&before, bin).with_context(|| format!("cannot merge into {}", path.display()))?;
    for note in &change.notes {
        writeln!(out, "note: {note}")?;
    }
    if !change.changed {
        writeln!(
            out,
            "cgc-fresh hooks and status line for Claude Code are already in {}",
            path.display()
        )?;
        return Ok(());
    }
    if !write_or_show(path, &change.settings, dry_run, out)? {
        return Ok(());
    }
    let events: Vec<&str> = EVENTS.iter().map(|(event, _)| *event).collect();
    writeln!(
        out,
        "installed cgc-fresh for Claude Code in {}: hooks {} → `{}`, status line `{}`",
        path.display(),
        events.join(", "),
        hook_command(bin),
        status_command(bin)
    )?;
    Ok(())
}

/// `uninstall --harness claude-code`.
pub fn uninstall(path: &Path, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    refuse_symlinks(path)?;
    let Some(before) = read_settings(path)? else {
        writeln!(out, "{} does not exist; nothing to remove", path.display())?;
        return Ok(());
    };
    let change = unmerge(&before).with_context(|| format!("cannot edit {}", path.display()))?;
    if !change.changed {
        writeln!(
            out,
            "no cgc-fresh entries in {}; nothing to remove",
            path.display()
        )?;
        return Ok(());
    }
    if !write_or_show(path, &change.settings, dry_run, out)? {
        return Ok(());
    }
    writeln!(
        out,
        "removed the cgc-fresh hooks and status line from {}",
        path.display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/opt/bin/cgc-fresh";

    fn users_own() -> Value {
        json!({
            "model": "opus",
            "permissions": {"allow": ["Bash(ls:*)"]},
            "hooks": {
                "PostToolUse": [
                    {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
                ],
                "Notification": [
                    {"hooks": [{"type": "command", "command": "notify-send hi"}]}
                ]
            }
        })
    }

    #[test]
    fn merging_adds_every_event_and_the_status_line_and_keeps_the_rest() {
        let change = merge(&users_own(), Path::new(BIN)).unwrap();
        assert!(change.changed);
        let s = &change.settings;
        assert_eq!(s["model"], "opus");
        assert_eq!(s["permissions"]["allow"][0], "Bash(ls:*)");
        assert_eq!(
            s["hooks"]["Notification"][0]["hooks"][0]["command"],
            "notify-send hi"
        );
        let post = s["hooks"]["PostToolUse"].as_array().unwrap();
        assert_eq!(post.len(), 2, "{post:?}");
        assert_eq!(post[0]["hooks"][0]["command"], "prettier --write");
        assert_eq!(post[1]["matcher"], "*");
        assert_eq!(
            post[1]["hooks"][0]["command"],
            "/opt/bin/cgc-fresh hook claude-code"
        );
        for (event, matcher) in EVENTS {
            let ours = s["hooks"][event]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(ours["hooks"][0]["type"], "command", "{event}");
            assert_eq!(
                ours.get("matcher").and_then(Value::as_str),
                matcher,
                "{event}"
            );
        }
        assert_eq!(
            s["statusLine"],
            json!({"type": "command", "command": "/opt/bin/cgc-fresh status --line"})
        );
    }

    #[test]
    fn merging_twice_changes_nothing_the_second_time() {
        let once = merge(&users_own(), Path::new(BIN)).unwrap().settings;
        let twice = merge(&once, Path::new(BIN)).unwrap();
        assert!(!twice.changed);
        assert_eq!(twice.settings, once);
    }

    #[test]
    fn a_moved_binary_replaces_the_old_entries() {
        let old = merge(&users_own(), Path::new("/old/place/cgc-fresh"))
            .unwrap()
            .settings;
        let new = merge(&old, Path::new(BIN)).unwrap().settings;
        let text = new.to_string();
        assert!(!text.contains("/old/place"), "{text}");
        assert_eq!(new["hooks"]["PostToolUse"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn unmerging_restores_the_users_settings_exactly() {
        let merged = merge(&users_own(), Path::new(BIN)).unwrap().settings;
        let back = unmerge(&merged).unwrap();
        assert!(back.changed);
        assert_eq!(back.settings, users_own());
        assert!(!unmerge(&users_own()).unwrap().changed);
    }

    #[test]
    fn unmerging_removes_a_hooks_object_only_ours_filled() {
        let merged = merge(&json!({"model": "x"}), Path::new(BIN))
            .unwrap()
            .settings;
        assert_eq!(unmerge(&merged).unwrap().settings, json!({"model": "x"}));
        // A hooks object with entries of the person's own stays.
        let merged = merge(&users_own(), Path::new(BIN)).unwrap().settings;
        assert!(unmerge(&merged).unwrap().settings.get("hooks").is_some());
        // Entry-less arrays of the person's own held nothing but ours after
        // the install: taking ours out empties them, and they go (Claude
        // Code reads an empty array as no array).
        let own_empty = json!({"hooks": {"Stop": []}});
        let merged = merge(&own_empty, Path::new(BIN)).unwrap().settings;
        assert_eq!(unmerge(&merged).unwrap().settings, json!({}));
    }

    #[test]
    fn a_users_status_line_is_kept_and_said_so() {
        let own = json!({"statusLine": {"type": "command", "command": "my-line"}});
        let change = merge(&own, Path::new(BIN)).unwrap();
        assert_eq!(change.settings["statusLine"]["command"], "my-line");
        assert_eq!(change.notes.len(), 1);
        assert_eq!(
            unmerge(&change.settings).unwrap().settings["statusLine"]["command"],
            "my-line"
        );
    }

    #[test]
    fn a_group_shared_with_the_users_hook_keeps_the_users_hook() {
        let shared = json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "say done"},
            {"type": "command", "command": "/x/cgc-fresh hook claude-code"}
        ]}]}});
        let back = unmerge(&shared).unwrap().settings;
        assert_eq!(
            back,
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}})
        );
    }

    #[test]
    fn wrong_shapes_are_refused_not_replaced() {
        assert_eq!(
            merge(&json!([1]), Path::new(BIN)),
            Err(SettingsError::NotObject)
        );
        assert_eq!(
            merge(&json!({"hooks": []}), Path::new(BIN)),
            Err(SettingsError::HooksNotObject)
        );
        assert_eq!(
            merge(&json!({"hooks": {"Stop": {}}}), Path::new(BIN)),
            Err(SettingsError::EventNotArray("Stop".into()))
        );
    }

    #[test]
    fn commands_are_recognised_by_program_name_and_arguments() {
        assert!(is_our_hook_command("/a/b/cgc-fresh hook claude-code"));
        assert!(is_our_hook_command("'/a b/cgc-fresh' hook claude-code"));
        assert!(is_our_hook_command("cgc-fresh  hook  claude-code "));
        assert!(!is_our_hook_command("/a/b/cgc-fresh hook pi"));
        assert!(!is_our_hook_command("/a/b/other hook claude-code"));
        assert!(!is_our_hook_command("echo cgc-fresh hook claude-code"));
        assert!(is_our_status_command("/a/cgc-fresh status --line"));
        assert!(!is_our_status_command("/a/cgc-fresh status"));
        let odd = Path::new("/tmp/it's here/cgc-fresh");
        assert_eq!(shell_word(odd), r"'/tmp/it'\''s here/cgc-fresh'");
        assert!(is_our_hook_command(&hook_command(odd)));
    }

    #[test]
    fn the_files_are_written_atomically_and_symlinks_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.json");
        let mut out = Vec::new();
        install(&path, Path::new(BIN), true, &mut out).unwrap();
        assert!(!path.exists(), "a dry run writes nothing");
        install(&path, Path::new(BIN), false, &mut out).unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written["statusLine"]["command"],
            "/opt/bin/cgc-fresh status --line"
        );
        uninstall(&path, false, &mut out).unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back, json!({}));

        let target = dir.path().join("elsewhere.json");
        std::fs::write(&target, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(install(&link, Path::new(BIN), false, &mut out).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");

        std::fs::write(&path, "{not json").unwrap();
        assert!(install(&path, Path::new(BIN), false, &mut out).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    }
}
