//! The byte stream side of a connection: a stream cut into chunks, fed
//! through [`FrameCodec`] as `tokio_util`'s `FramedRead` does, and the lines
//! the codec must yield according to its documented rules.

use bytes::{Bytes, BytesMut};
use cgc_fresh_proto::{CodecError, FrameCodec};
use tokio_util::codec::Decoder;

/// What the codec yielded for a whole stream.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Framed {
    /// The lines, in order.
    pub lines: Vec<Bytes>,
    /// Whether a line was refused as too large (after the last of `lines`).
    pub too_large: bool,
}

/// What the codec must yield for `stream` under `limit`, read off the rules
/// in its documentation with no buffering at all, so it cannot depend on
/// how the stream was cut: split on `\n`; a segment longer than the limit
/// (its `\r` counted) ends everything with `TooLarge`; one trailing `\r` is
/// dropped; empty lines are skipped; the unterminated tail is a line too.
pub fn expected_lines(stream: &[u8], limit: usize) -> Framed {
    let mut framed = Framed::default();
    for segment in stream.split(|byte| *byte == b'\n') {
        if segment.len() > limit {
            framed.too_large = true;
            return framed;
        }
        let line = segment.strip_suffix(b"\r").unwrap_or(segment);
        if !line.is_empty() {
            framed.lines.push(Bytes::copy_from_slice(line));
        }
    }
    framed
}

/// Chunk lengths for a stream, from one seed byte: `0` delivers the stream
/// in one piece; otherwise lengths cycle pseudo-randomly through
/// `1..=seed % 64 + 1`, so small seeds cut byte by byte and a line or a
/// `\r\n` often straddles two reads.
pub fn chunk_lengths(seed: u8) -> impl Iterator<Item = usize> {
    let most = usize::from(seed % 64) + 1;
    let mut state = u32::from(seed) | 0x9e37_0000;
    std::iter::from_fn(move || {
        if seed == 0 {
            return Some(usize::MAX);
        }
        // xorshift32: cheap, deterministic, never zero.
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        Some(state as usize % most + 1)
    })
}

/// Feeds `stream` through a fresh codec with `limit`, one chunk per read,
/// then signals end of input, exactly as `FramedRead` drives a decoder
/// (decode until it yields nothing after every read; `decode_eof` until it
/// yields nothing at the end). Keeps feeding after a `TooLarge`, to check
/// that the codec then refuses everything.
///
/// Checks on the way (panicking on a breach): `TooLarge` comes at most once
/// and is the only error; after it the codec refuses (yields nothing, keeps
/// no input); while it waits for more input it buffers at most `limit`
/// bytes; no yielded line is longer than `limit`, holds a `\n` or is empty.
pub fn decode_in_chunks(
    stream: &[u8],
    limit: usize,
    mut lengths: impl Iterator<Item = usize>,
) -> Framed {
    let mut codec = FrameCodec::with_max_line_bytes(limit);
    assert_eq!(codec.max_line_bytes(), limit);
    let mut buffer = BytesMut::new();
    let mut framed = Framed::default();
    let mut rest = stream;
    while !rest.is_empty() {
        let length = lengths.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (chunk, after) = rest.split_at(length);
        rest = after;
        buffer.extend_from_slice(chunk);
        loop {
            let result = codec.decode(&mut buffer);
            if !take(result, &mut framed, &codec, &buffer, limit) {
                break;
            }
        }
    }
    loop {
        let result = codec.decode_eof(&mut buffer);
        if !take(result, &mut framed, &codec, &buffer, limit) {
            break;
        }
    }
    assert!(
        buffer.is_empty(),
        "{} bytes left in the buffer after end of input",
        buffer.len()
    );
    framed
}

/// Records one decoder result; returns whether to call the decoder again.
fn take(
    result: Result<Option<Bytes>, CodecError>,
    framed: &mut Framed,
    codec: &FrameCodec,
    buffer: &BytesMut,
    limit: usize,
) -> bool {
    match result {
        Ok(Some(line)) => {
            assert!(!framed.too_large, "a line came after TooLarge: {line:?}");
            assert!(!line.is_empty(), "an empty line was yielded");
            assert!(
                line.len() <= limit,
                "a line of {} bytes passed the limit of {limit}",
                line.len()
            );
            assert!(!line.contains(&b'\n'), "a yielded line holds a newline");
            framed.lines.push(line);
            true
        }
        Ok(None) => {
            if framed.too_large {
                assert!(codec.is_refusing(), "the codec stopped refusing");
                assert!(buffer.is_empty(), "a refusing codec kept input");
            } else {
                assert!(
                    buffer.len() <= limit,
                    "{} bytes buffered without a newline under a limit of {limit}",
                    buffer.len()
                );
            }
            false
        }
        Err(CodecError::TooLarge { limit: reported }) => {
            assert!(!framed.too_large, "TooLarge was reported twice");
            assert_eq!(reported, limit, "TooLarge names another limit");
            assert!(codec.is_refusing(), "TooLarge without refusing");
            framed.too_large = true;
            false
        }
        Err(other) => panic!("a decoder error other than TooLarge: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(framed: &Framed) -> Vec<&[u8]> {
        framed.lines.iter().map(|line| line.as_ref()).collect()
    }

    #[test]
    fn the_rules_split_strip_skip_and_stop_at_the_first_long_line() {
        let framed = expected_lines(b"a\r\n\nbc\r\r\nlast", 8);
        assert_eq!(lines(&framed), [&b"a"[..], b"bc\r", b"last"]);
        assert!(!framed.too_large);

        let framed = expected_lines(b"1234\n12345\nafter\n", 4);
        assert_eq!(lines(&framed), [&b"1234"[..]]);
        assert!(framed.too_large);
        // The `\r` counts against the limit.
        assert!(expected_lines(b"1234\r\n", 4).too_large);
    }

    #[test]
    fn the_codec_agrees_with_the_rules_however_the_stream_is_cut() {
        let stream = b"{\"type\":\"status\"}\r\n\n{\"id\":1}\nxxxxxxxxxxxx\nlost\n";
        for seed in [0, 1, 2, 7, 200] {
            for limit in [0, 5, 11, 12, 64] {
                let framed = decode_in_chunks(stream, limit, chunk_lengths(seed));
                assert_eq!(
                    framed,
                    expected_lines(stream, limit),
                    "seed {seed} limit {limit}"
                );
            }
        }
    }
}
