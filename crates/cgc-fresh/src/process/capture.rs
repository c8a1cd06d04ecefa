//! Bounded capture of a child's stdout and stderr.
//!
//! A child can print without limit (a full index of a large tree, a crash
//! loop), so nothing here grows with the amount of output:
//! - a line longer than [`CaptureLimits::max_line_bytes`] is cut, and the
//!   rest of it (up to the next newline) is only counted;
//! - only the first `head_lines` and the last `tail_lines` lines are kept,
//!   plus a count of the lines dropped in between.
//!
//! Every line is also handed to a caller-supplied callback as it arrives, so
//! the caller can log it ([`log_child_line`]) and react to markers such as
//! CGC's ready line (see `cgc_markers.rs`).

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "root_supervisor";

/// Which of the child's output pipes a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl fmt::Display for OutputStream {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        })
    }
}

/// One line of child output, without its line terminator, lossily decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    pub stream: OutputStream,
    /// The line (ending in a cut marker when `cut_bytes > 0`).
    pub text: String,
    /// Bytes of this line that were discarded because it was too long.
    pub cut_bytes: usize,
}

/// How much output to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureLimits {
    pub head_lines: usize,
    pub tail_lines: usize,
    pub max_line_bytes: usize,
}

impl Default for CaptureLimits {
    fn default() -> Self {
        CaptureLimits {
            head_lines: 50,
            tail_lines: 200,
            max_line_bytes: 8 * 1024,
        }
    }
}

/// The retained head and tail of a child's output.
#[derive(Debug, Clone)]
pub struct CapturedLines {
    limits: CaptureLimits,
    head: Vec<OutputLine>,
    tail: VecDeque<OutputLine>,
    dropped_lines: u64,
    total_lines: u64,
}

impl CapturedLines {
    pub fn new(limits: CaptureLimits) -> Self {
        CapturedLines {
            limits,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped_lines: 0,
            total_lines: 0,
        }
    }

    pub fn push(&mut self, line: OutputLine) {
        self.total_lines += 1;
        if self.head.len() < self.limits.head_lines {
            self.head.push(line);
            return;
        }
        self.tail.push_back(line);
        if self.tail.len() > self.limits.tail_lines {
            self.tail.pop_front();
            self.dropped_lines += 1;
        }
    }

    /// The first lines, at most `head_lines`.
    #[cfg(test)]
    pub fn head(&self) -> &[OutputLine] {
        &self.head
    }

    /// The last lines after the head, at most `tail_lines`.
    #[cfg(test)]
    pub fn tail(&self) -> impl Iterator<Item = &OutputLine> {
        self.tail.iter()
    }

    /// Lines seen but not kept (between head and tail).
    #[cfg(test)]
    pub fn dropped_lines(&self) -> u64 {
        self.dropped_lines
    }

    /// Every line seen, kept or not.
    #[cfg(test)]
    pub fn total_lines(&self) -> u64 {
        self.total_lines
    }

    /// The last `count` retained lines joined by newlines, for error records.
    /// If they reach back past dropped lines, a marker line says how many.
    pub fn tail_text(&self, count: usize) -> String {
        let from_tail = count.min(self.tail.len());
        let from_head = (count - from_tail).min(self.head.len());
        let mut lines: Vec<String> = Vec::with_capacity(from_head + from_tail + 1);
        lines.extend(
            self.head[self.head.len() - from_head..]
                .iter()
                .map(|line| line.text.clone()),
        );
        if from_head > 0 && self.dropped_lines > 0 {
            lines.push(format!("… [{} lines dropped] …", self.dropped_lines));
        }
        lines.extend(
            self.tail
                .iter()
                .skip(self.tail.len() - from_tail)
                .map(|line| line.text.clone()),
        );
        lines.join("\n")
    }
}

/// A shared handle to one child's [`CapturedLines`], readable while the
/// capture runs (e.g. to build an error record when the child dies).
#[derive(Debug, Clone)]
pub struct OutputCapture {
    lines: Arc<Mutex<CapturedLines>>,
}

impl OutputCapture {
    pub fn new(limits: CaptureLimits) -> Self {
        OutputCapture {
            lines: Arc::new(Mutex::new(CapturedLines::new(limits))),
        }
    }

    /// A copy of what has been captured so far.
    #[cfg(test)]
    pub fn snapshot(&self) -> CapturedLines {
        self.locked().clone()
    }

    /// See [`CapturedLines::tail_text`].
    pub fn tail_text(&self, count: usize) -> String {
        self.locked().tail_text(count)
    }

    fn push(&self, line: OutputLine) {
        self.locked().push(line);
    }

    fn max_line_bytes(&self) -> usize {
        self.locked().limits.max_line_bytes
    }

    fn locked(&self) -> MutexGuard<'_, CapturedLines> {
        // A panic while holding the lock cannot leave the buffers
        // inconsistent in a way that matters for logging; keep going.
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads both pipes until both reach end-of-file, storing every line in
/// `capture` and then passing it to `on_line`.
///
/// Must run inside a tokio runtime with IO enabled (actix-rt's is). End of
/// file comes when the child *and every process that inherited the pipes*
/// closed them; a daemonized grandchild may keep them open, so callers bound
/// how long they wait for this future after the child exited.
///
/// Fails only if a descriptor is not a readable pipe. A read error on one
/// pipe ends that stream (logged) and the other is still read.
pub async fn capture_output(
    pid: i32,
    stdout: OwnedFd,
    stderr: OwnedFd,
    capture: OutputCapture,
    mut on_line: impl FnMut(&OutputLine),
) -> io::Result<()> {
    let max_line_bytes = capture.max_line_bytes();
    let mut stdout = Some(pipe::Receiver::from_owned_fd(stdout)?);
    let mut stderr = Some(pipe::Receiver::from_owned_fd(stderr)?);
    let mut stdout_lines = LineSplitter::new(max_line_bytes);
    let mut stderr_lines = LineSplitter::new(max_line_bytes);
    let mut stdout_buffer = vec![0u8; 8 * 1024];
    let mut stderr_buffer = vec![0u8; 8 * 1024];

    while stdout.is_some() || stderr.is_some() {
        let (stream, result) = tokio::select! {
            result = read_open(&mut stdout, &mut stdout_buffer), if stdout.is_some() => {
                (OutputStream::Stdout, result)
            }
            result = read_open(&mut stderr, &mut stderr_buffer), if stderr.is_some() => {
                (OutputStream::Stderr, result)
            }
        };
        let (receiver, splitter, buffer) = match stream {
            OutputStream::Stdout => (&mut stdout, &mut stdout_lines, &stdout_buffer),
            OutputStream::Stderr => (&mut stderr, &mut stderr_lines, &stderr_buffer),
        };
        let mut deliver = |text: String, cut_bytes: usize| {
            let line = OutputLine {
                stream,
                text,
                cut_bytes,
            };
            capture.push(line.clone());
            on_line(&line);
        };
        match result {
            Ok(0) => {
                splitter.finish(&mut deliver);
                *receiver = None;
            }
            Ok(read) => splitter.push(&buffer[..read], &mut deliver),
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "child_output_failed", pid, %stream, %error, "reading child output failed; stream closed");
                splitter.finish(&mut deliver);
                *receiver = None;
            }
        }
    }
    Ok(())
}

async fn read_open(receiver: &mut Option<pipe::Receiver>, buffer: &mut [u8]) -> io::Result<usize> {
    match receiver {
        Some(receiver) => receiver.read(buffer).await,
        None => Ok(0), // Not polled: the select! precondition excludes it.
    }
}

/// Forwards one child line to the log (target `cgc_fresh::child_output`, so
/// it can be filtered separately).
pub fn log_child_line(pid: i32, line: &OutputLine) {
    tracing::info!(
        target: "cgc_fresh::child_output",
        component = COMPONENT,
        event = "child_output",
        pid,
        stream = %line.stream,
        line = %line.text,
        "child output"
    );
}

/// Splits a byte stream into lines of bounded length.
#[derive(Debug)]
struct LineSplitter {
    pending: Vec<u8>,
    cut_bytes: usize,
    max_line_bytes: usize,
}

impl LineSplitter {
    fn new(max_line_bytes: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            cut_bytes: 0,
            max_line_bytes,
        }
    }

    fn push(&mut self, chunk: &[u8], emit: &mut impl FnMut(String, usize)) {
        for segment in chunk.split_inclusive(|&byte| byte == b'\n') {
            let (body, line_ends) = match segment.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (segment, false),
            };
            let room = self.max_line_bytes.saturating_sub(self.pending.len());
            let kept = body.len().min(room);
            self.pending.extend_from_slice(&body[..kept]);
            self.cut_bytes += body.len() - kept;
            if line_ends {
                self.emit_pending(emit);
            }
        }
    }

    /// Emits a final line that had no terminating newline.
    fn finish(&mut self, emit: &mut impl FnMut(String, usize)) {
        if !self.pending.is_empty() || self.cut_bytes > 0 {
            self.emit_pending(emit);
        }
    }

    fn emit_pending(&mut self, emit: &mut impl FnMut(String, usize)) {
        if self.cut_bytes == 0 && self.pending.last() == Some(&b'\r') {
            self.pending.pop();
        }
        if self.cut_bytes > 0 {
            // Do not show half a character where the line was cut.
            if let Err(error) = std::str::from_utf8(&self.pending) {
                if error.error_len().is_none() {
                    let valid = error.valid_up_to();
                    self.cut_bytes += self.pending.len() - valid;
                    self.pending.truncate(valid);
                }
            }
        }
        let mut text = String::from_utf8_lossy(&self.pending).into_owned();
        if self.cut_bytes > 0 {
            text.push_str(&format!(" … [line cut: {} more bytes]", self.cut_bytes));
        }
        emit(text, self.cut_bytes);
        self.pending.clear();
        self.cut_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::spawn::spawn_child;
    use crate::process::test_support::{kill_and_reap, shell_spec};

    fn split_all(max: usize, chunks: &[&[u8]]) -> Vec<(String, usize)> {
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        let mut emit = |text: String, cut: usize| lines.push((text, cut));
        for chunk in chunks {
            splitter.push(chunk, &mut emit);
        }
        splitter.finish(&mut emit);
        lines
    }

    fn line(text: &str) -> OutputLine {
        OutputLine {
            stream: OutputStream::Stdout,
            text: text.to_string(),
            cut_bytes: 0,
        }
    }

    #[test]
    fn splitter_joins_chunks_and_strips_line_endings() {
        let lines = split_all(100, &[b"one\r\ntw", b"o\n", b"\nlast"]);
        let texts: Vec<&str> = lines.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(texts, vec!["one", "two", "", "last"]);
    }

    #[test]
    fn over_long_line_is_cut_with_marker_and_next_line_is_intact() {
        let long = [b'x'; 20];
        let lines = split_all(8, &[&long[..5], &long[5..], b"\nshort\n"]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].0, "xxxxxxxx … [line cut: 12 more bytes]");
        assert_eq!(lines[0].1, 12);
        assert_eq!(lines[1], ("short".to_string(), 0));
    }

    #[test]
    fn cut_never_splits_a_character_and_invalid_utf8_is_replaced() {
        // "ééé" is 6 bytes; a 5-byte cap would split the third é.
        let lines = split_all(5, &["ééé\n".as_bytes(), b"a\xffb\n"]);
        assert_eq!(lines[0], ("éé … [line cut: 2 more bytes]".to_string(), 2));
        assert_eq!(lines[1], ("a\u{fffd}b".to_string(), 0));
    }

    #[test]
    fn head_and_tail_are_kept_and_the_middle_counted() {
        let mut captured = CapturedLines::new(CaptureLimits {
            head_lines: 2,
            tail_lines: 3,
            max_line_bytes: 100,
        });
        for index in 0..10 {
            captured.push(line(&index.to_string()));
        }
        let head: Vec<&str> = captured.head().iter().map(|l| l.text.as_str()).collect();
        let tail: Vec<&str> = captured.tail().map(|l| l.text.as_str()).collect();
        assert_eq!(head, vec!["0", "1"]);
        assert_eq!(tail, vec!["7", "8", "9"]);
        assert_eq!(captured.dropped_lines(), 5);
        assert_eq!(captured.total_lines(), 10);
        assert_eq!(captured.tail_text(2), "8\n9");
        assert_eq!(captured.tail_text(4), "1\n… [5 lines dropped] …\n7\n8\n9");
        assert_eq!(
            captured.tail_text(100),
            "0\n1\n… [5 lines dropped] …\n7\n8\n9"
        );
    }

    #[test]
    fn tail_text_has_no_marker_when_nothing_was_dropped() {
        let mut captured = CapturedLines::new(CaptureLimits::default());
        for text in ["a", "b", "c"] {
            captured.push(line(text));
        }
        assert_eq!(captured.tail_text(10), "a\nb\nc");
        assert_eq!(captured.tail_text(0), "");
    }

    #[tokio::test]
    async fn capture_of_ten_thousand_lines_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let spec = shell_spec(
            dir.path(),
            "capture-test.many",
            "seq 1 10000; echo on-stderr >&2",
        );
        let child = spawn_child(&spec).unwrap();
        let capture = OutputCapture::new(CaptureLimits {
            head_lines: 50,
            tail_lines: 200,
            max_line_bytes: 8 * 1024,
        });
        let mut seen = Vec::new();
        capture_output(
            child.pid,
            child.stdout,
            child.stderr,
            capture.clone(),
            |line| {
                seen.push((line.stream, line.text.clone()));
            },
        )
        .await
        .unwrap();
        kill_and_reap(child.pid);

        assert_eq!(seen.len(), 10_001, "the callback sees every line");
        assert!(seen.contains(&(OutputStream::Stderr, "on-stderr".to_string())));
        let captured = capture.snapshot();
        assert_eq!(captured.total_lines(), 10_001);
        assert_eq!(captured.head().len(), 50);
        assert_eq!(captured.tail().count(), 200);
        assert_eq!(captured.dropped_lines(), 10_001 - 250);
        // The stderr line may be read at any point, so look at stdout only.
        let stdout_head: Vec<&str> = captured
            .head()
            .iter()
            .filter(|l| l.stream == OutputStream::Stdout)
            .map(|l| l.text.as_str())
            .collect();
        assert!(stdout_head.len() >= 49);
        for (index, text) in stdout_head.iter().enumerate() {
            assert_eq!(*text, (index + 1).to_string());
        }
        let stdout_tail: Vec<&str> = captured
            .tail()
            .filter(|l| l.stream == OutputStream::Stdout)
            .map(|l| l.text.as_str())
            .collect();
        assert_eq!(stdout_tail.last(), Some(&"10000"));
    }

    #[tokio::test]
    async fn capture_cuts_an_over_long_line_from_a_real_child() {
        let dir = tempfile::tempdir().unwrap();
        let spec = shell_spec(
            dir.path(),
            "capture-test.long",
            "head -c 100000 /dev/zero | tr '\\0' y; echo; echo after",
        );
        let child = spawn_child(&spec).unwrap();
        let capture = OutputCapture::new(CaptureLimits::default());
        capture_output(
            child.pid,
            child.stdout,
            child.stderr,
            capture.clone(),
            |_| {},
        )
        .await
        .unwrap();
        kill_and_reap(child.pid);

        let captured = capture.snapshot();
        let lines = captured.head();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].cut_bytes, 100_000 - 8 * 1024);
        assert!(lines[0].text.starts_with(&"y".repeat(8 * 1024)));
        assert!(lines[0].text.ends_with("[line cut: 91808 more bytes]"));
        assert_eq!(lines[1].text, "after");
    }
}
