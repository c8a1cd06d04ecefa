//! JSON-lines framing for `tokio_util::codec`: splits a byte stream into
//! lines with a hard length limit, and writes values as compact JSON lines.
//!
//! The decoder yields raw line bytes; turning them into frames is
//! [`crate::decode_client_frame`]'s job, so a malformed line can be answered
//! with an `error` frame while the connection stays usable. An over-long line
//! is different: the stream cannot be resynchronised cheaply, so the decoder
//! reports it once and then discards everything, and the caller closes the
//! connection.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use tokio_util::codec::{Decoder, Encoder};

/// The default maximum line length in bytes (excluding the `\n`).
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;

/// What can go wrong while framing.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A line exceeded the limit. Reported once; the decoder then refuses
    /// all further input.
    #[error("line exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// Reading or writing the underlying stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A value given to the encoder could not be serialized as JSON.
    #[error("cannot encode frame as JSON: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Splits input on `\n` and writes JSON lines.
///
/// Decoding rules:
/// - one item per `\n`-terminated line, without the `\n` and without one
///   trailing `\r` (so CRLF peers work);
/// - empty lines are skipped;
/// - a line counts every byte before its `\n` (a `\r` included) against
///   the limit; a line of exactly the limit is accepted;
/// - as soon as more than the limit is buffered without a `\n`, or a
///   complete line exceeds it, [`CodecError::TooLarge`] is returned once;
///   every later call discards its input and yields nothing;
/// - at end of input, a final line without `\n` is still yielded.
///
/// Each input byte is searched for `\n` once: the position already searched
/// is remembered across calls, so decoding is linear in the input.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    max_line_bytes: usize,
    /// Bytes at the front of the buffer already known to hold no `\n`.
    searched_up_to: usize,
    /// Set once a line was too large; input is refused from then on.
    refusing: bool,
}

impl FrameCodec {
    /// A codec with [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new() -> Self {
        FrameCodec::with_max_line_bytes(DEFAULT_MAX_LINE_BYTES)
    }

    /// A codec accepting lines of up to `max_line_bytes` bytes.
    pub fn with_max_line_bytes(max_line_bytes: usize) -> Self {
        FrameCodec {
            max_line_bytes,
            searched_up_to: 0,
            refusing: false,
        }
    }

    /// The configured line limit.
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Whether an over-long line was seen and input is now refused.
    pub fn is_refusing(&self) -> bool {
        self.refusing
    }

    fn refuse(&mut self, buf: &mut BytesMut) {
        buf.clear();
        self.searched_up_to = 0;
        self.refusing = true;
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new()
    }
}

/// Removes one trailing `\r`; returns `None` for an empty line.
fn finish_line(mut line: BytesMut) -> Option<Bytes> {
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    (!line.is_empty()).then(|| line.freeze())
}

impl Decoder for FrameCodec {
    type Item = Bytes;
    type Error = CodecError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        loop {
            if self.refusing {
                buf.clear();
                return Ok(None);
            }
            // A `\n` at index `max_line_bytes` ends a line of exactly the
            // limit, so at most limit + 1 bytes are ever searched.
            let search_end = buf.len().min(self.max_line_bytes.saturating_add(1));
            let newline = buf[self.searched_up_to..search_end]
                .iter()
                .position(|byte| *byte == b'\n')
                .map(|offset| self.searched_up_to + offset);
            match newline {
                Some(newline) => {
                    let mut line = buf.split_to(newline + 1);
                    line.truncate(newline);
                    self.searched_up_to = 0;
                    match finish_line(line) {
                        Some(line) => return Ok(Some(line)),
                        None => continue,
                    }
                }
                None if buf.len() > self.max_line_bytes => {
                    self.refuse(buf);
                    return Err(CodecError::TooLarge {
                        limit: self.max_line_bytes,
                    });
                }
                None => {
                    self.searched_up_to = buf.len();
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        // `decode` left at most the limit's worth of bytes without a `\n`:
        // the peer's last line, which it did not terminate.
        self.searched_up_to = 0;
        Ok(finish_line(buf.split()))
    }
}

impl<T: Serialize> Encoder<T> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, item: T, dst: &mut BytesMut) -> Result<(), CodecError> {
        let start = dst.len();
        if let Err(error) = serde_json::to_writer((&mut *dst).writer(), &item) {
            // Do not leave half a line behind for the next frame to follow.
            dst.truncate(start);
            return Err(CodecError::Encode(error));
        }
        dst.put_u8(b'\n');
        Ok(())
    }
}
