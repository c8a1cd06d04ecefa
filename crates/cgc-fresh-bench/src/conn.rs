//! A plain JSON-lines client over `std::os::unix::net::UnixStream`, the way
//! a harness talks to the service.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};

/// One client connection.
pub struct Conn {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: String,
}

impl Conn {
    pub fn connect(socket: &Path) -> Result<Conn> {
        let stream = UnixStream::connect(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn {
            writer: stream,
            reader,
            line: String::new(),
        })
    }

    /// The underlying stream (e.g. to clone it for a reader thread).
    pub fn stream(&self) -> &UnixStream {
        &self.writer
    }

    pub fn set_read_timeout(&self, timeout: Duration) -> Result<()> {
        self.writer.set_read_timeout(Some(timeout))?;
        Ok(())
    }

    pub fn send_line(&mut self, line: &str) -> Result<()> {
        self.writer.write_all(line.as_bytes())?;
        self.writer.write_all(b"\n")?;
        Ok(())
    }

    pub fn send(&mut self, frame: &Value) -> Result<()> {
        self.send_line(&frame.to_string())
    }

    /// The next line, unparsed; an error at end of stream or on timeout.
    pub fn recv_line(&mut self) -> Result<&str> {
        self.line.clear();
        let n = self.reader.read_line(&mut self.line)?;
        if n == 0 {
            bail!("the service closed the connection");
        }
        Ok(&self.line)
    }

    /// The next frame; an error at end of stream or on timeout.
    pub fn recv(&mut self) -> Result<Value> {
        let line = self.recv_line()?;
        serde_json::from_str(line).with_context(|| format!("bad frame {line:?}"))
    }

    /// Sends `frame` with `id` and returns the reply carrying that id,
    /// skipping pushed frames.
    pub fn request(&mut self, mut frame: Value, id: &str) -> Result<Value> {
        frame["id"] = Value::from(id);
        self.send(&frame)?;
        loop {
            let reply = self.recv()?;
            if reply["id"] == id {
                return Ok(reply);
            }
        }
    }

    /// `hello` → `welcome`.
    pub fn hello(&mut self, instance: &str) -> Result<Value> {
        let reply = self.request(
            json!({"type": "hello", "client": "cgc-fresh-bench", "instance": instance, "protocol": 1}),
            "hello",
        )?;
        if reply["type"] != "welcome" {
            bail!("hello answered with {reply}");
        }
        Ok(reply)
    }

    /// Subscribes and returns the state pushed right after the ack.
    pub fn subscribe(&mut self) -> Result<Value> {
        let ack = self.request(json!({"type": "subscribe"}), "subscribe")?;
        if ack["type"] != "ack" {
            bail!("subscribe answered with {ack}");
        }
        self.recv_until(Duration::from_secs(10), |f| f["type"] == "state")
    }

    /// A subscribed harness with an open session `session`.
    pub fn harness(socket: &Path, session: &str) -> Result<Conn> {
        let mut conn = Conn::connect(socket)?;
        conn.hello(&format!("bench-{session}"))?;
        conn.subscribe()?;
        conn.send(&json!({"type": "session_start", "session": session, "reason": "startup"}))?;
        Ok(conn)
    }

    /// Reads frames until one satisfies `pred`, for at most `within`.
    pub fn recv_until(
        &mut self,
        within: Duration,
        pred: impl FnMut(&Value) -> bool,
    ) -> Result<Value> {
        self.recv_until_seen(within, pred, |_| {})
    }

    /// As [`Conn::recv_until`], handing every frame read to `seen` first.
    pub fn recv_until_seen(
        &mut self,
        within: Duration,
        mut pred: impl FnMut(&Value) -> bool,
        mut seen: impl FnMut(&Value),
    ) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| anyhow!("no matching frame within {within:?}"))?;
            self.set_read_timeout(left)?;
            let frame = self.recv()?;
            seen(&frame);
            if pred(&frame) {
                return Ok(frame);
            }
        }
    }
}
