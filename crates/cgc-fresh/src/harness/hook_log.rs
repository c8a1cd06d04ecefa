//! The hook's log: structured JSON lines collected while the hook runs and
//! appended, at the end, to the file `CGC_FRESH_HOOK_LOG` names — or
//! dropped. Never standard output (Claude Code may read it) and never
//! standard error (shown in the transcript).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The lines of one hook run, in order.
#[derive(Debug, Default, Clone)]
pub struct HookLog {
    lines: Vec<Value>,
}

impl HookLog {
    /// Adds one event: `level` (`debug`, `info`, `warn`), its name, and
    /// fields (an object; anything else is put under `detail`).
    pub fn event(&mut self, level: &str, event: &str, fields: Value) {
        let mut line = Map::new();
        line.insert("timestamp_ms".into(), Value::from(now_ms()));
        line.insert("level".into(), Value::from(level));
        line.insert("event".into(), Value::from(event));
        line.insert("pid".into(), Value::from(std::process::id()));
        match fields {
            Value::Object(fields) => line.extend(fields),
            Value::Null => {}
            other => {
                line.insert("detail".into(), other);
            }
        }
        self.lines.push(Value::Object(line));
    }

    /// The lines so far.
    #[cfg(test)]
    pub fn lines(&self) -> &[Value] {
        &self.lines
    }

    /// The names of the events so far (for tests and assertions).
    #[cfg(test)]
    pub fn events(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter_map(|l| l["event"].as_str().map(str::to_string))
            .collect()
    }

    /// Appends every line to `path` (created 0600, never through a
    /// symlink). Failures are ignored: the log must not change what the
    /// hook does.
    pub fn append_to(&self, path: &Path) {
        if self.lines.is_empty() {
            return;
        }
        let mut text = String::new();
        for line in &self.lines {
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path);
        if let Ok(mut file) = file {
            let _ = file.write_all(text.as_bytes());
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
