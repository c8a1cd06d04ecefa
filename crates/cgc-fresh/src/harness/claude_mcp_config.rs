//! `cgc-fresh install --harness claude-code` / `uninstall --harness
//! claude-code`: the project's MCP server entry for `cgc-fresh mcp`, in the
//! project's `.mcp.json`, so that Claude Code asks the graph through the
//! service instead of through `cgc mcp start` (which holds the embedded
//! database while it runs, and every sync would be skipped as busy).
//!
//! The format Claude Code reads: `{"mcpServers": {"<name>": {"type":
//! "stdio", "command": "<program>", "args": ["…"]}}}`; our entry is
//! `"cgc-fresh": {"type": "stdio", "command": "<absolute path of
//! cgc-fresh>", "args": ["mcp", "--workspace", "<workspace>"]}`.
//!
//! Rules (those of `claude_settings.rs`):
//! - *Ours* is the entry named `cgc-fresh` whose `command` is a program
//!   named `cgc-fresh` (in whatever directory) and whose `args` begin with
//!   `mcp`: re-installing after moving the binary rewrites it in place. An
//!   entry named `cgc-fresh` that is not ours is the person's own: left
//!   alone, and said so. Every other entry and key is left as it is.
//! - Install says what the person should know and does not change it: an
//!   entry running `cgc mcp start` (the `CodeGraphContext` one `cgc mcp
//!   setup` writes, in `.mcp.json` or in Claude Code's own `.claude.json`)
//!   still holds the database and should be removed — named, with the
//!   command that removes it; another entry already running `cgc-fresh
//!   mcp` duplicates ours.
//! - Uninstall takes out exactly our entry; `mcpServers` goes when ours was
//!   all it held, and the file goes when nothing at all is left in it (what
//!   install creates in a project without one), so no empty `.mcp.json`
//!   stays behind in the repository.
//! - Rewriting is atomic; a `.mcp.json` that is a symlink is refused, never
//!   followed; a file that is not a JSON object is refused, never replaced;
//!   nothing is written when nothing changes; `--dry-run` shows the file.
//!
//! User scope: Claude Code keeps user-scope MCP servers in its own
//! `.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`, default
//! `~/.claude.json`), a file it rewrites all the time while it runs
//! (session counters, per-project state), so a write of ours could be lost,
//! or lose one of its own. With `--scope user` this module therefore writes
//! nothing: it reads that file (never writes it) and prints the exact
//! `claude mcp add --scope user …` command, which has Claude Code make the
//! change itself — and on uninstall the `claude mcp remove` command when
//! our entry is there.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{json, Map, Value};

use super::claude_settings::{read_settings, refuse_symlinks, write_or_show, Change};
use crate::shell_word::shell_word;

/// The name of our server entry (Claude Code calls its tools
/// `mcp__cgc-fresh__<tool>`).
pub const SERVER_NAME: &str = "cgc-fresh";

/// The name of our program, whatever directory it is in.
const PROGRAM: &str = "cgc-fresh";

/// Why an MCP configuration cannot be changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum McpConfigError {
    #[error("the MCP configuration is not a JSON object")]
    NotObject,
    #[error("`mcpServers` is not a JSON object")]
    ServersNotObject,
}

/// The project's MCP configuration file.
pub fn mcp_json_path(workspace: &Path) -> PathBuf {
    workspace.join(".mcp.json")
}

/// Claude Code's own configuration file (user- and local-scope MCP
/// servers): `$CLAUDE_CONFIG_DIR/.claude.json`, default `~/.claude.json`.
pub fn claude_json_path(claude_config_dir: Option<&str>, home: &Path) -> PathBuf {
    match claude_config_dir.filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(".claude.json"),
        None => home.join(".claude.json"),
    }
}

/// Our entry: `cgc-fresh mcp --workspace <workspace>` over stdio.
pub fn our_server(bin: &Path, workspace: &Path) -> Value {
    json!({
        "type": "stdio",
        "command": bin.display().to_string(),
        "args": ["mcp", "--workspace", workspace.display().to_string()],
    })
}

/// The words a server runs: its `command` split at blanks (a command
/// written with its arguments in one string), then its `args`.
fn words(server: &Value) -> Vec<&str> {
    let command = server.get("command").and_then(Value::as_str).unwrap_or("");
    let args = server
        .get("args")
        .and_then(Value::as_array)
        .map(|args| args.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    command.split_whitespace().chain(args).collect()
}

fn program_name(word: &str) -> Option<&str> {
    Path::new(word).file_name().and_then(|n| n.to_str())
}

/// Whether a server entry runs `cgc-fresh mcp` (exactly a program named
/// `cgc-fresh` with `args` beginning with `mcp`, as install writes it).
pub fn is_our_server(server: &Value) -> bool {
    let program = server.get("command").and_then(Value::as_str);
    let first_arg = server
        .get("args")
        .and_then(Value::as_array)
        .and_then(|args| args.first())
        .and_then(Value::as_str);
    program.and_then(program_name) == Some(PROGRAM) && first_arg == Some("mcp")
}

/// Whether a server entry runs `cgc-fresh mcp` in any spelling (a duplicate
/// of ours when it is not ours).
fn runs_cgc_fresh_mcp(server: &Value) -> bool {
    let words = words(server);
    words.first().and_then(|w| program_name(w)) == Some(PROGRAM)
        && words.iter().skip(1).any(|w| *w == "mcp")
}

/// Whether a server entry runs CodeGraphContext's own `cgc mcp start`, in
/// the spellings `cgc mcp setup` writes: `<…/cgc> mcp start`, `pipx run
/// codegraphcontext mcp start`, `<python> -m codegraphcontext mcp start`.
pub fn runs_cgc_mcp_start(server: &Value) -> bool {
    let words = words(server);
    let starts = words.windows(2).any(|pair| pair == ["mcp", "start"]);
    let is_cgc = words.first().and_then(|w| program_name(w)) == Some("cgc")
        || words.contains(&"codegraphcontext");
    starts && is_cgc
}

/// The note for a `cgc mcp start` entry named `name`, found in `place`,
/// removed by `remove`.
fn cgc_mcp_start_note(name: &str, place: &str, remove: &str) -> String {
    format!(
        "`{name}` in {place} runs `cgc mcp start`, which holds the graph's embedded database \
         (Kùzu, LadybugDB) for as long as it runs, so the service's syncs would be skipped as \
         busy; cgc-fresh's `{SERVER_NAME}` entry offers the same tools. Remove it: {remove}"
    )
}

/// Merges our entry (for the binary `bin`, serving `workspace`) into the
/// project's MCP configuration `config`.
pub fn merge(config: &Value, bin: &Path, workspace: &Path) -> Result<Change, McpConfigError> {
    let mut root = config
        .as_object()
        .cloned()
        .ok_or(McpConfigError::NotObject)?;
    let mut notes = Vec::new();
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(McpConfigError::ServersNotObject)?;
    for (name, server) in servers.iter() {
        if name == SERVER_NAME {
            continue;
        }
        if runs_cgc_mcp_start(server) {
            notes.push(cgc_mcp_start_note(
                name,
                ".mcp.json",
                &format!("`claude mcp remove --scope project {name}` (or delete it from the file)"),
            ));
        } else if runs_cgc_fresh_mcp(server) {
            notes.push(format!(
                "`{name}` in .mcp.json runs `cgc-fresh mcp` too: Claude Code would offer every \
                 tool twice; remove one of the two"
            ));
        }
    }
    let desired = our_server(bin, workspace);
    match servers.get(SERVER_NAME) {
        Some(existing) if !is_our_server(existing) => notes.push(format!(
            "kept your own `{SERVER_NAME}` MCP server in .mcp.json (it does not run `cgc-fresh \
             mcp`); to use cgc-fresh's, rename yours and install again"
        )),
        // In place: an entry of ours keeps its position among the others.
        _ => {
            servers.insert(SERVER_NAME.into(), desired);
        }
    }
    Ok(Change::between(config, root, notes))
}

/// Takes exactly our entry out of the project's MCP configuration.
pub fn unmerge(config: &Value) -> Result<Change, McpConfigError> {
    let mut root = config
        .as_object()
        .cloned()
        .ok_or(McpConfigError::NotObject)?;
    let mut drop_servers = false;
    if let Some(servers) = root.get_mut("mcpServers") {
        let servers = servers
            .as_object_mut()
            .ok_or(McpConfigError::ServersNotObject)?;
        if servers.get(SERVER_NAME).is_some_and(is_our_server) {
            // `shift_remove`: the person's entries keep their order.
            servers.shift_remove(SERVER_NAME);
            drop_servers = servers.is_empty();
        }
    }
    if drop_servers {
        root.shift_remove("mcpServers");
    }
    Ok(Change::between(config, root, Vec::new()))
}

/// The `cgc mcp start` entries (and where they are) in Claude Code's own
/// `.claude.json`: user scope (`mcpServers`) and this project's local
/// scope (`projects.<workspace>.mcpServers`).
pub fn cgc_mcp_start_notes_in_claude_json(
    claude_json: &Value,
    workspace: &Path,
    file: &Path,
) -> Vec<String> {
    let user = claude_json.get("mcpServers");
    let local = claude_json
        .get("projects")
        .and_then(|projects| projects.get(workspace.display().to_string()))
        .and_then(|project| project.get("mcpServers"));
    let mut notes = Vec::new();
    for (servers, scope) in [(user, "user"), (local, "local")] {
        let Some(servers) = servers.and_then(Value::as_object) else {
            continue;
        };
        for (name, server) in servers {
            if runs_cgc_mcp_start(server) {
                notes.push(cgc_mcp_start_note(
                    name,
                    &format!("{} ({scope} scope)", file.display()),
                    &format!("`claude mcp remove --scope {scope} {name}`"),
                ));
            }
        }
    }
    notes
}

/// Reads Claude Code's `.claude.json` for what install should say; never
/// writes it. Unreadable or not JSON: nothing to say (it is Claude Code's
/// file, and only notes depend on it).
fn read_claude_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// The command that adds our server at user scope.
pub fn user_scope_add_command(bin: &Path) -> String {
    format!(
        "claude mcp add --scope user {SERVER_NAME} -- {} mcp",
        shell_word(bin)
    )
}

/// `install --harness claude-code` (project scope): our entry in
/// `<workspace>/.mcp.json`, and notes on `cgc mcp start` entries in
/// Claude Code's `.claude.json` (`claude_json`, read only).
pub fn install(
    path: &Path,
    bin: &Path,
    workspace: &Path,
    claude_json: &Path,
    dry_run: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    refuse_symlinks(path)?;
    let before = read_settings(path)?.unwrap_or_else(|| Value::Object(Map::new()));
    let change = merge(&before, bin, workspace)
        .with_context(|| format!("cannot merge into {}", path.display()))?;
    let elsewhere = read_claude_json(claude_json)
        .map(|value| cgc_mcp_start_notes_in_claude_json(&value, workspace, claude_json))
        .unwrap_or_default();
    for note in change.notes.iter().chain(&elsewhere) {
        writeln!(out, "note: {note}")?;
    }
    if !change.changed {
        writeln!(
            out,
            "the cgc-fresh MCP server for Claude Code is already in {}",
            path.display()
        )?;
        return Ok(());
    }
    if !write_or_show(path, &change.settings, dry_run, out)? {
        return Ok(());
    }
    writeln!(
        out,
        "installed the cgc-fresh MCP server for Claude Code in {}: `{SERVER_NAME}` → `{} mcp \
         --workspace {}` (Claude Code asks you to approve a project's MCP server once)",
        path.display(),
        shell_word(bin),
        shell_word(workspace)
    )?;
    Ok(())
}

/// `uninstall --harness claude-code` (project scope).
pub fn uninstall(path: &Path, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    refuse_symlinks(path)?;
    let Some(before) = read_settings(path)? else {
        writeln!(
            out,
            "{} does not exist; no MCP server to remove",
            path.display()
        )?;
        return Ok(());
    };
    let change = unmerge(&before).with_context(|| format!("cannot edit {}", path.display()))?;
    if !change.changed {
        writeln!(
            out,
            "no cgc-fresh MCP server in {}; nothing to remove",
            path.display()
        )?;
        return Ok(());
    }
    if change.settings == json!({}) {
        // Ours was all it held: install created it, and an empty file
        // would only litter the repository.
        if dry_run {
            writeln!(out, "would remove {}", path.display())?;
            return Ok(());
        }
        std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
        writeln!(
            out,
            "removed {} (the cgc-fresh MCP server was all it held)",
            path.display()
        )?;
        return Ok(());
    }
    if !write_or_show(path, &change.settings, dry_run, out)? {
        return Ok(());
    }
    writeln!(
        out,
        "removed the cgc-fresh MCP server from {}",
        path.display()
    )?;
    Ok(())
}

/// `install --harness claude-code --scope user`: writes nothing (see the
/// module doc); says whether our entry is in Claude Code's `.claude.json`
/// already, or the command that adds it, and notes `cgc mcp start`
/// entries there.
pub fn install_user_scope(
    claude_json: &Path,
    bin: &Path,
    workspace: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let config = read_claude_json(claude_json);
    if let Some(config) = &config {
        for note in cgc_mcp_start_notes_in_claude_json(config, workspace, claude_json) {
            writeln!(out, "note: {note}")?;
        }
    }
    let ours = config
        .as_ref()
        .and_then(|c| c.get("mcpServers"))
        .and_then(|servers| servers.get(SERVER_NAME))
        .is_some_and(is_our_server);
    if ours {
        writeln!(
            out,
            "the cgc-fresh MCP server is already in {} (user scope)",
            claude_json.display()
        )?;
    } else {
        writeln!(
            out,
            "note: the MCP server is not written at user scope: Claude Code keeps it in {}, which \
             it rewrites while it runs. To add it (it serves the directory Claude Code is started \
             in): {}",
            claude_json.display(),
            user_scope_add_command(bin)
        )?;
    }
    Ok(())
}

/// `uninstall --harness claude-code --scope user`: writes nothing; when our
/// entry is in Claude Code's `.claude.json`, the command that removes it.
pub fn uninstall_user_scope(claude_json: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let ours = read_claude_json(claude_json)
        .as_ref()
        .and_then(|c| c.get("mcpServers"))
        .and_then(|servers| servers.get(SERVER_NAME))
        .is_some_and(is_our_server);
    if ours {
        writeln!(
            out,
            "note: the cgc-fresh MCP server is still in {} (user scope); remove it with: claude \
             mcp remove --scope user {SERVER_NAME}",
            claude_json.display()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/opt/bin/cgc-fresh";
    const WS: &str = "/home/someone/project";

    fn users_own() -> Value {
        json!({
            "mcpServers": {
                "github": {"type": "http", "url": "https://example.invalid/mcp"},
                "notes": {"command": "npx", "args": ["-y", "notes-mcp"], "env": {"K": "v"}}
            },
            "extra": true
        })
    }

    fn merge_ws(config: &Value) -> Change {
        merge(config, Path::new(BIN), Path::new(WS)).unwrap()
    }

    #[test]
    fn merging_adds_our_entry_and_keeps_the_rest() {
        let change = merge_ws(&users_own());
        assert!(change.changed);
        assert!(change.notes.is_empty(), "{:?}", change.notes);
        let mut expected = users_own();
        expected["mcpServers"]["cgc-fresh"] = json!({
            "type": "stdio",
            "command": BIN,
            "args": ["mcp", "--workspace", WS]
        });
        assert_eq!(change.settings, expected);
        let names: Vec<&String> = change.settings["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(names, ["github", "notes", "cgc-fresh"]);
        // Into nothing: exactly our entry.
        assert_eq!(
            merge_ws(&json!({})).settings,
            json!({"mcpServers": {"cgc-fresh": our_server(Path::new(BIN), Path::new(WS))}})
        );
    }

    #[test]
    fn merging_twice_changes_nothing_the_second_time() {
        let once = merge_ws(&users_own()).settings;
        let twice = merge_ws(&once);
        assert!(!twice.changed);
        assert_eq!(twice.settings, once);
    }

    #[test]
    fn a_moved_binary_rewrites_our_entry_in_place() {
        let old = merge(&users_own(), Path::new("/old/cgc-fresh"), Path::new(WS))
            .unwrap()
            .settings;
        let mut with_later = old.clone();
        with_later["mcpServers"]["later"] = json!({"command": "x"});
        let new = merge_ws(&with_later);
        assert!(new.changed);
        assert_eq!(new.settings["mcpServers"]["cgc-fresh"]["command"], BIN);
        let names: Vec<&String> = new.settings["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(names, ["github", "notes", "cgc-fresh", "later"]);
    }

    #[test]
    fn unmerging_restores_the_users_config_exactly() {
        let merged = merge_ws(&users_own()).settings;
        let back = unmerge(&merged).unwrap();
        assert!(back.changed);
        assert_eq!(back.settings, users_own());
        assert!(!unmerge(&users_own()).unwrap().changed);
        // What install created from nothing goes entirely.
        let created = merge_ws(&json!({})).settings;
        assert_eq!(unmerge(&created).unwrap().settings, json!({}));
        // The person's other keys keep an emptied file from going.
        let merged = merge_ws(&json!({"extra": 1})).settings;
        assert_eq!(unmerge(&merged).unwrap().settings, json!({"extra": 1}));
    }

    #[test]
    fn a_users_own_entry_named_cgc_fresh_is_kept_and_said_so() {
        let own = json!({"mcpServers": {"cgc-fresh": {"command": "/usr/bin/cgc-fresh-wrapper", "args": ["mcp"]}}});
        let change = merge_ws(&own);
        assert!(!change.changed);
        assert_eq!(change.settings, own);
        assert_eq!(change.notes.len(), 1);
        assert!(
            change.notes[0].contains("kept your own"),
            "{:?}",
            change.notes
        );
        assert!(!unmerge(&own).unwrap().changed, "never removed either");
        // `cgc-fresh` itself, but not its MCP server: not ours either.
        let other = json!({"mcpServers": {"cgc-fresh": {"command": BIN, "args": ["status"]}}});
        assert!(!merge_ws(&other).changed);
        assert!(!unmerge(&other).unwrap().changed);
    }

    #[test]
    fn a_cgc_mcp_start_entry_is_kept_and_named_in_a_note() {
        let own = json!({"mcpServers": {
            "CodeGraphContext": {"command": "/home/x/.local/bin/cgc", "args": ["mcp", "start"],
                                 "env": {"NEO4J_URI": ""}}
        }});
        let change = merge_ws(&own);
        assert!(change.changed);
        assert_eq!(
            change.settings["mcpServers"]["CodeGraphContext"],
            own["mcpServers"]["CodeGraphContext"]
        );
        assert_eq!(change.notes.len(), 1, "{:?}", change.notes);
        assert!(change.notes[0].starts_with("`CodeGraphContext` in .mcp.json runs `cgc mcp start`"));
        assert!(change.notes[0].contains("claude mcp remove --scope project CodeGraphContext"));
        assert_eq!(unmerge(&change.settings).unwrap().settings, own);
    }

    #[test]
    fn servers_are_recognised_by_program_name_and_arguments() {
        let server = |command: &str, args: Value| json!({"command": command, "args": args});
        assert!(is_our_server(&server("/a/b/cgc-fresh", json!(["mcp"]))));
        assert!(is_our_server(&server(
            "cgc-fresh",
            json!(["mcp", "--workspace", "/w"])
        )));
        assert!(!is_our_server(&server("/a/b/cgc-fresh", json!(["serve"]))));
        assert!(!is_our_server(&server("/a/b/cgc", json!(["mcp", "start"]))));
        assert!(!is_our_server(&json!({"command": "cgc-fresh mcp"})));
        assert!(runs_cgc_fresh_mcp(&json!({"command": "cgc-fresh mcp"})));
        assert!(runs_cgc_mcp_start(&server(
            "/x/cgc",
            json!(["mcp", "start"])
        )));
        assert!(runs_cgc_mcp_start(&server(
            "/usr/bin/pipx",
            json!(["run", "codegraphcontext", "mcp", "start"])
        )));
        assert!(runs_cgc_mcp_start(&server(
            "/usr/bin/python3",
            json!(["-m", "codegraphcontext", "mcp", "start"])
        )));
        assert!(runs_cgc_mcp_start(&json!({"command": "cgc mcp start"})));
        assert!(!runs_cgc_mcp_start(&server(
            "/x/cgc",
            json!(["index", "."])
        )));
        assert!(!runs_cgc_mcp_start(&server(
            "/x/other",
            json!(["mcp", "start"])
        )));
    }

    #[test]
    fn a_second_cgc_fresh_mcp_entry_is_named_as_a_duplicate() {
        let own = json!({"mcpServers": {"graph": {"command": "/x/cgc-fresh", "args": ["mcp"]}}});
        let change = merge_ws(&own);
        assert!(change.changed);
        assert_eq!(change.notes.len(), 1, "{:?}", change.notes);
        assert!(change.notes[0].contains("`graph`"), "{:?}", change.notes);
        assert_eq!(unmerge(&change.settings).unwrap().settings, own);
    }

    #[test]
    fn wrong_shapes_are_refused_not_replaced() {
        for bad in [json!([1]), json!("x"), json!(null)] {
            assert_eq!(
                merge(&bad, Path::new(BIN), Path::new(WS)),
                Err(McpConfigError::NotObject)
            );
            assert_eq!(unmerge(&bad), Err(McpConfigError::NotObject));
        }
        for bad in [json!({"mcpServers": []}), json!({"mcpServers": "x"})] {
            assert_eq!(
                merge(&bad, Path::new(BIN), Path::new(WS)),
                Err(McpConfigError::ServersNotObject)
            );
            assert_eq!(unmerge(&bad), Err(McpConfigError::ServersNotObject));
        }
    }

    #[test]
    fn cgc_mcp_start_entries_in_claude_json_are_named_with_their_scope() {
        let claude_json = json!({
            "numStartups": 7,
            "mcpServers": {
                "CodeGraphContext": {"command": "/x/cgc", "args": ["mcp", "start"]},
                "other": {"command": "y"}
            },
            "projects": {
                WS: {"mcpServers": {"cgc-local": {"command": "cgc", "args": ["mcp", "start"]}}},
                "/elsewhere": {"mcpServers": {"far": {"command": "cgc", "args": ["mcp", "start"]}}}
            }
        });
        let notes = cgc_mcp_start_notes_in_claude_json(
            &claude_json,
            Path::new(WS),
            Path::new("/h/.claude.json"),
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("claude mcp remove --scope user CodeGraphContext"));
        assert!(notes[1].contains("claude mcp remove --scope local cgc-local"));
        assert!(!notes.iter().any(|n| n.contains("far")));
    }

    #[test]
    fn the_file_is_written_atomically_removed_when_emptied_and_symlinks_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".mcp.json");
        let nowhere = dir.path().join("no-claude.json");
        let (bin, ws) = (Path::new(BIN), Path::new(WS));
        let mut out = Vec::new();
        install(&path, bin, ws, &nowhere, true, &mut out).unwrap();
        assert!(!path.exists(), "a dry run writes nothing");
        assert!(String::from_utf8_lossy(&out).contains("would write"));
        install(&path, bin, ws, &nowhere, false, &mut out).unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"mcpServers": {"cgc-fresh": our_server(bin, ws)}})
        );
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        install(&path, bin, ws, &nowhere, false, &mut out).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (
                meta.modified().unwrap(),
                std::os::unix::fs::MetadataExt::ino(&meta)
            ),
            (mtime, ino),
            "nothing written when nothing changes"
        );
        let mut shown = Vec::new();
        uninstall(&path, true, &mut shown).unwrap();
        assert!(path.exists(), "a dry run removes nothing");
        assert!(String::from_utf8_lossy(&shown).contains("would remove"));
        uninstall(&path, false, &mut out).unwrap();
        assert!(!path.exists(), "ours was all it held");

        let own = serde_json::to_string(&users_own()).unwrap();
        std::fs::write(&path, &own).unwrap();
        install(&path, bin, ws, &nowhere, false, &mut out).unwrap();
        uninstall(&path, false, &mut out).unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back, users_own());

        let target = dir.path().join("elsewhere.json");
        std::fs::write(&target, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(install(&link, bin, ws, &nowhere, false, &mut out).is_err());
        assert!(uninstall(&link, false, &mut out).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");

        std::fs::write(&path, "{not json").unwrap();
        assert!(install(&path, bin, ws, &nowhere, false, &mut out).is_err());
        assert!(uninstall(&path, false, &mut out).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    }

    #[test]
    fn user_scope_writes_nothing_and_prints_the_claude_command() {
        let dir = tempfile::tempdir().unwrap();
        let claude_json = dir.path().join(".claude.json");
        let mut out = Vec::new();
        install_user_scope(&claude_json, Path::new(BIN), Path::new(WS), &mut out).unwrap();
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(
            text.contains("claude mcp add --scope user cgc-fresh -- /opt/bin/cgc-fresh mcp"),
            "{text}"
        );
        assert!(!claude_json.exists(), "never written");
        let mut out = Vec::new();
        uninstall_user_scope(&claude_json, &mut out).unwrap();
        assert!(out.is_empty(), "nothing of ours there, nothing to say");

        let present = json!({"mcpServers": {"cgc-fresh": {"command": BIN, "args": ["mcp"]}}});
        let text = serde_json::to_string(&present).unwrap();
        std::fs::write(&claude_json, &text).unwrap();
        let mut out = Vec::new();
        install_user_scope(&claude_json, Path::new(BIN), Path::new(WS), &mut out).unwrap();
        assert!(String::from_utf8_lossy(&out).contains("already"));
        let mut out = Vec::new();
        uninstall_user_scope(&claude_json, &mut out).unwrap();
        assert!(String::from_utf8_lossy(&out).contains("claude mcp remove --scope user cgc-fresh"));
        assert_eq!(std::fs::read_to_string(&claude_json).unwrap(), text);
    }
}
