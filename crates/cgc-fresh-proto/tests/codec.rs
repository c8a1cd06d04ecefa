//! The JSON-lines codec: framing across arbitrary read boundaries, CRLF,
//! empty lines, the line limit, and the encoder.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use cgc_fresh_proto::{
    decode_client_frame, ClientFrame, CodecError, Envelope, ErrorCode, FrameCodec, RequestId,
    ServerFrame, DEFAULT_MAX_LINE_BYTES,
};
use futures_util::{SinkExt, StreamExt};
use proptest::collection::vec;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder, FramedRead, FramedWrite};

/// Feeds `input` in the given chunks, decoding after each, then signals EOF.
fn decode_chunks(codec: &mut FrameCodec, chunks: &[&[u8]]) -> Result<Vec<Bytes>, CodecError> {
    let mut buf = BytesMut::new();
    let mut lines = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(line) = codec.decode(&mut buf)? {
            lines.push(line);
        }
    }
    while let Some(line) = codec.decode_eof(&mut buf)? {
        lines.push(line);
    }
    Ok(lines)
}

fn decode_all(max: usize, input: &[u8]) -> Result<Vec<Bytes>, CodecError> {
    decode_chunks(&mut FrameCodec::with_max_line_bytes(max), &[input])
}

fn lines(items: &[&str]) -> Vec<Bytes> {
    items
        .iter()
        .map(|item| Bytes::copy_from_slice(item.as_bytes()))
        .collect()
}

/// Splits `input` at the given cut points (sorted, deduplicated, in range).
fn split_at_cuts(input: &[u8], mut cuts: Vec<usize>) -> Vec<&[u8]> {
    cuts.iter_mut().for_each(|cut| *cut %= input.len() + 1);
    cuts.sort_unstable();
    cuts.dedup();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(&input[start..cut]);
        start = cut;
    }
    chunks.push(&input[start..]);
    chunks
}

proptest! {
    #[test]
    fn lines_survive_any_chunking(
        content in vec(
            (vec(any::<u8>().prop_filter("no line breaks", |b| *b != b'\n' && *b != b'\r'), 1..40),
             any::<bool>(), 0..3usize),
            0..12,
        ),
        cuts in vec(any::<usize>(), 0..20),
    ) {
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for (line, crlf, blank_lines_before) in &content {
            for _ in 0..*blank_lines_before {
                input.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
            input.extend_from_slice(line);
            input.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            expected.push(Bytes::copy_from_slice(line));
        }
        let chunks = split_at_cuts(&input, cuts);
        let decoded = decode_chunks(&mut FrameCodec::with_max_line_bytes(40), &chunks)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn an_over_long_line_fails_once_at_any_chunking(
        before in vec(b'a'..=b'z', 0..8),
        long_len in 9..40usize,
        newline in any::<bool>(),
        cuts in vec(any::<usize>(), 0..10),
    ) {
        let mut input = before.clone();
        if !before.is_empty() {
            input.push(b'\n');
        }
        input.extend(vec![b'x'; long_len]);
        if newline {
            input.extend_from_slice(b"\nafter\n");
        }
        let chunks = split_at_cuts(&input, cuts);

        let mut codec = FrameCodec::with_max_line_bytes(8);
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        let mut errors = 0;
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            loop {
                match codec.decode(&mut buf) {
                    Ok(Some(line)) => decoded.push(line),
                    Ok(None) => break,
                    Err(CodecError::TooLarge { limit }) => {
                        prop_assert_eq!(limit, 8);
                        errors += 1;
                    }
                    Err(other) => return Err(TestCaseError::fail(other.to_string())),
                }
            }
            // Between reads, at most the limit of a pending line is kept.
            prop_assert!(buf.len() <= 8);
        }
        prop_assert!(matches!(codec.decode_eof(&mut buf), Ok(None)));
        prop_assert_eq!(errors, 1);
        prop_assert!(codec.is_refusing());
        let expected: Vec<Bytes> = if before.is_empty() { vec![] } else { vec![Bytes::from(before)] };
        prop_assert_eq!(decoded, expected);
    }
}

#[test]
fn crlf_is_stripped_but_inner_carriage_returns_are_kept() {
    assert_eq!(
        decode_all(64, b"a\r\nb\nc\rd\n").unwrap(),
        lines(&["a", "b", "c\rd"])
    );
}

#[test]
fn only_one_trailing_carriage_return_is_stripped() {
    assert_eq!(decode_all(64, b"a\r\r\n").unwrap(), lines(&["a\r"]));
}

#[test]
fn empty_lines_are_skipped() {
    assert_eq!(
        decode_all(64, b"\n\n\r\na\n\n\r\nb\n\n").unwrap(),
        lines(&["a", "b"])
    );
}

#[test]
fn a_line_that_is_not_utf8_is_yielded_and_the_next_one_follows() {
    // Not a decoder error (that would end a `FramedRead`): the frame decoder
    // answers it with `bad_json` and the connection goes on.
    let decoded = decode_all(64, b"{\"type\":\"\xff\"}\n{\"type\":\"status\"}\n").unwrap();
    assert_eq!(decoded.len(), 2);
    assert_eq!(&decoded[0][..], b"{\"type\":\"\xff\"}");
    let error = decode_client_frame(&decoded[0]).unwrap_err();
    assert_eq!(error.code(), ErrorCode::BadJson, "{error:?}");
    assert!(decode_client_frame(&decoded[1]).is_ok());
}

#[test]
fn a_line_of_exactly_the_limit_is_accepted() {
    assert_eq!(decode_all(8, b"01234567\n").unwrap(), lines(&["01234567"]));
}

#[test]
fn the_carriage_return_counts_against_the_limit() {
    assert_eq!(decode_all(8, b"0123456\r\n").unwrap(), lines(&["0123456"]));
    assert!(matches!(
        decode_all(8, b"01234567\r\n"),
        Err(CodecError::TooLarge { limit: 8 })
    ));
}

#[test]
fn a_complete_line_over_the_limit_is_too_large() {
    assert!(matches!(
        decode_all(8, b"012345678\n"),
        Err(CodecError::TooLarge { limit: 8 })
    ));
}

#[test]
fn a_pending_line_at_the_limit_waits_and_one_more_byte_fails() {
    let mut codec = FrameCodec::with_max_line_bytes(8);
    let mut buf = BytesMut::from(&b"01234567"[..]);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert_eq!(buf.len(), 8);

    buf.extend_from_slice(b"8");
    assert!(matches!(
        codec.decode(&mut buf),
        Err(CodecError::TooLarge { limit: 8 })
    ));
    assert!(buf.is_empty(), "the over-long line is dropped, not kept");
}

#[test]
fn after_too_large_all_input_is_refused() {
    let mut codec = FrameCodec::with_max_line_bytes(8);
    let mut buf = BytesMut::from(&b"ok\n0123456789"[..]);
    assert_eq!(
        codec.decode(&mut buf).unwrap(),
        Some(Bytes::from_static(b"ok"))
    );
    assert!(matches!(
        codec.decode(&mut buf),
        Err(CodecError::TooLarge { limit: 8 })
    ));

    buf.extend_from_slice(b"\n{\"type\":\"status\"}\n");
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
    buf.extend_from_slice(b"tail");
    assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
    assert!(codec.is_refusing());
}

#[test]
fn byte_by_byte_over_long_line_fails_on_the_first_excess_byte() {
    let mut codec = FrameCodec::with_max_line_bytes(16);
    let mut buf = BytesMut::new();
    for fed in 1..=17 {
        buf.extend_from_slice(b"x");
        let result = codec.decode(&mut buf);
        if fed <= 16 {
            assert_eq!(result.unwrap(), None, "after {fed} bytes");
        } else {
            assert!(matches!(result, Err(CodecError::TooLarge { limit: 16 })));
        }
    }
}

#[test]
fn a_final_line_without_newline_is_yielded_at_eof() {
    assert_eq!(decode_all(64, b"a\nlast\r").unwrap(), lines(&["a", "last"]));
}

#[test]
fn default_limit_is_64_kib() {
    assert_eq!(DEFAULT_MAX_LINE_BYTES, 65_536);
    assert_eq!(FrameCodec::new().max_line_bytes(), 65_536);
    let mut line = vec![b' '; DEFAULT_MAX_LINE_BYTES];
    line.push(b'\n');
    assert_eq!(decode_all(DEFAULT_MAX_LINE_BYTES, &line).unwrap().len(), 1);
}

#[test]
fn encoder_writes_one_compact_line() {
    let mut codec = FrameCodec::new();
    let mut dst = BytesMut::new();
    let envelope = Envelope::with_id(Some(RequestId::Number(1)), ClientFrame::Status);
    codec.encode(&envelope, &mut dst).unwrap();
    codec
        .encode(Envelope::new(ServerFrame::Ack), &mut dst)
        .unwrap();
    assert_eq!(
        &dst[..],
        b"{\"id\":1,\"type\":\"status\"}\n{\"type\":\"ack\"}\n"
    );
}

#[test]
fn encoder_failure_leaves_the_buffer_untouched() {
    let mut codec = FrameCodec::new();
    let mut dst = BytesMut::from(&b"{\"type\":\"ack\"}\n"[..]);
    // JSON object keys must be strings; a tuple key cannot be encoded.
    let unencodable: HashMap<(u8, u8), u8> = HashMap::from([((1, 2), 3)]);
    let result = codec.encode(unencodable, &mut dst);
    assert!(matches!(result, Err(CodecError::Encode(_))));
    assert_eq!(&dst[..], b"{\"type\":\"ack\"}\n");
}

#[tokio::test]
async fn framed_read_yields_lines_then_one_error_then_ends() {
    let input: &[u8] = b"{\"id\":1,\"type\":\"status\"}\r\n\n{\"type\":\"sync\"}\n0123456789012345678901234567890123456789\n{\"type\":\"subscribe\"}\n";
    let mut framed = FramedRead::new(input, FrameCodec::with_max_line_bytes(32));

    let first = framed.next().await.unwrap().unwrap();
    let first = decode_client_frame(&first).unwrap();
    assert_eq!(first.id, Some(RequestId::Number(1)));
    assert_eq!(first.frame, ClientFrame::Status);

    let second = framed.next().await.unwrap().unwrap();
    assert_eq!(
        decode_client_frame(&second).unwrap().frame,
        ClientFrame::Sync
    );

    assert!(matches!(
        framed.next().await,
        Some(Err(CodecError::TooLarge { limit: 32 }))
    ));
    assert!(framed.next().await.is_none());
    assert!(framed.next().await.is_none(), "nothing after the refusal");
}

#[tokio::test]
async fn framed_write_then_read_round_trips() {
    let mut written = Vec::new();
    {
        let mut sink = FramedWrite::new(&mut written, FrameCodec::new());
        sink.send(Envelope::new(ClientFrame::Subscribe))
            .await
            .unwrap();
        sink.send(Envelope::with_id(
            Some(RequestId::from("c")),
            ClientFrame::Config,
        ))
        .await
        .unwrap();
    }
    let mut framed = FramedRead::new(&written[..], FrameCodec::new());
    let mut frames = Vec::new();
    while let Some(line) = framed.next().await {
        frames.push(decode_client_frame(&line.unwrap()).unwrap());
    }
    assert_eq!(
        frames,
        vec![
            Envelope::new(ClientFrame::Subscribe),
            Envelope::with_id(Some(RequestId::from("c")), ClientFrame::Config),
        ]
    );
}
