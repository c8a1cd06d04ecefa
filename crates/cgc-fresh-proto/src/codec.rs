//! JSON-lines framing for `tokio_util::codec`: splits a byte stream into
//! lines with a hard length limit, and writes values as compact JSON lines.
//!
//! The splitting is `tokio_util`'s own bounded line splitter,
//! [`AnyDelimiterCodec::new_with_max_length`] with `\n` as the delimiter:
//! the same algorithm as `LinesCodec::new_with_max_length` (each byte
//! searched for `\n` once, at most limit + 1 bytes looked at), but yielding
//! the line's bytes without a copy. `LinesCodec` itself is not used because
//! it decodes to `String`: a line that is not UTF-8 would be a decoder
//! error, which ends a `FramedRead` stream, whereas the protocol answers it
//! with `bad_json` and keeps the connection (the frame decoder checks
//! UTF-8). This thin wrapper adds the protocol's rules on top.
//!
//! The decoder yields raw line bytes; turning them into frames is
//! [`crate::decode_client_frame`]'s job, so a malformed line can be answered
//! with an `error` frame while the connection stays usable. An over-long line
//! is different: the stream cannot be resynchronised cheaply, so the decoder
//! reports it once and then discards everything, and the caller closes the
//! connection.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder, Encoder};

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
///   every later call discards its input and yields nothing (the inner
///   splitter would skip to the next line instead, which the protocol does
///   not want);
/// - at end of input, a final line without `\n` is still yielded;
/// - bytes are not checked for UTF-8 here.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    lines: AnyDelimiterCodec,
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
            lines: AnyDelimiterCodec::new_with_max_length(
                b"\n".to_vec(),
                b"\n".to_vec(),
                max_line_bytes,
            ),
            refusing: false,
        }
    }

    /// The configured line limit.
    pub fn max_line_bytes(&self) -> usize {
        self.lines.max_length()
    }

    /// Whether an over-long line was seen and input is now refused.
    pub fn is_refusing(&self) -> bool {
        self.refusing
    }

    /// Applies the protocol's rules to what the splitter returned.
    fn finish(
        &mut self,
        split: Result<Option<Bytes>, AnyDelimiterCodecError>,
        buf: &mut BytesMut,
    ) -> Result<Step, CodecError> {
        match split {
            Ok(Some(line)) => {
                Ok(finish_line(line).map_or(Step::SkipEmpty, |line| Step::Yield(Some(line))))
            }
            Ok(None) => Ok(Step::Yield(None)),
            Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                buf.clear();
                self.refusing = true;
                Err(CodecError::TooLarge {
                    limit: self.max_line_bytes(),
                })
            }
            Err(AnyDelimiterCodecError::Io(error)) => Err(CodecError::Io(error)),
        }
    }
}

/// What one split amounts to.
enum Step {
    /// Return this from the decoder.
    Yield(Option<Bytes>),
    /// An empty line: split again.
    SkipEmpty,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new()
    }
}

/// Removes one trailing `\r`; returns `None` for an empty line.
fn finish_line(mut line: Bytes) -> Option<Bytes> {
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    (!line.is_empty()).then_some(line)
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
            let split = self.lines.decode(buf);
            if let Step::Yield(line) = self.finish(split, buf)? {
                return Ok(line);
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        loop {
            if self.refusing {
                buf.clear();
                return Ok(None);
            }
            // The splitter yields the peer's last, unterminated line too.
            let split = self.lines.decode_eof(buf);
            if let Step::Yield(line) = self.finish(split, buf)? {
                return Ok(line);
            }
        }
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
