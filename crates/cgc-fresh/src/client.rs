//! A blocking client for the service's socket, used by the CLI
//! subcommands. Scripts can do the same with any JSON-lines socket client.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cgc_fresh_proto::{
    decode_server_frame, ClientFrame, Envelope, Hello, RequestId, ServerFrame, Welcome,
    PROTOCOL_VERSION,
};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no cgc-fresh service is running for this workspace (socket {socket}: {reason})")]
    NotRunning { socket: PathBuf, reason: String },
    #[error("the service closed the connection")]
    Closed,
    #[error("the service sent a frame this client cannot read: {0}")]
    BadFrame(String),
    #[error("i/o error talking to the service: {0}")]
    Io(#[from] io::Error),
}

/// One connection to a running service.
pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    pub welcome: Option<Welcome>,
}

impl Client {
    /// Connects to `socket`; a missing socket or a refused connection means
    /// no service is running.
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|e| ClientError::NotRunning {
            socket: socket.to_path_buf(),
            reason: e.to_string(),
        })?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client {
            writer: stream,
            reader,
            next_id: 1,
            welcome: None,
        })
    }

    /// Connects and introduces itself; returns once `welcome` arrived.
    pub fn connect_hello(socket: &Path, instance: &str) -> Result<Client, ClientError> {
        let mut client = Client::connect(socket)?;
        client.set_timeout(Some(Duration::from_secs(10)))?;
        let hello = ClientFrame::Hello(Hello {
            client: "cgc-fresh-cli".into(),
            instance: instance.into(),
            protocol: PROTOCOL_VERSION,
        });
        match client.request(hello)?.frame {
            ServerFrame::Welcome(w) => client.welcome = Some(w),
            ServerFrame::Error(e) => return Err(ClientError::BadFrame(e.message)),
            other => {
                return Err(ClientError::BadFrame(format!(
                    "expected welcome, got {}",
                    other.type_name()
                )))
            }
        }
        Ok(client)
    }

    /// Sets the read timeout (None = wait forever, for `events`).
    pub fn set_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }

    /// Sends `frame` with a fresh id and returns the reply carrying that id
    /// (pushed frames in between are skipped).
    pub fn request(&mut self, frame: ClientFrame) -> Result<Envelope<ServerFrame>, ClientError> {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        self.send(&Envelope::with_id(Some(id.clone()), frame))?;
        loop {
            let reply = self.read_frame()?;
            if reply.id.as_ref() == Some(&id) {
                return Ok(reply);
            }
            if let ServerFrame::Error(_) = reply.frame {
                if reply.id.is_none() {
                    return Ok(reply);
                }
            }
        }
    }

    /// Sends one frame.
    pub fn send(&mut self, frame: &Envelope<ClientFrame>) -> Result<(), ClientError> {
        let mut line =
            serde_json::to_vec(frame).map_err(|e| ClientError::BadFrame(e.to_string()))?;
        line.push(b'\n');
        self.send_raw(&line)
    }

    /// Sends raw bytes (the line must end in `\n`).
    pub fn send_raw(&mut self, line: &[u8]) -> Result<(), ClientError> {
        self.writer.write_all(line)?;
        Ok(())
    }

    /// Reads one raw line (without the newline).
    pub fn read_line(&mut self) -> Result<String, ClientError> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(ClientError::Closed);
        }
        Ok(line.trim_end_matches(['\n', '\r']).to_string())
    }

    /// Reads and decodes one frame.
    pub fn read_frame(&mut self) -> Result<Envelope<ServerFrame>, ClientError> {
        let line = self.read_line()?;
        decode_server_frame(line.as_bytes()).map_err(|e| ClientError::BadFrame(e.message()))
    }
}
