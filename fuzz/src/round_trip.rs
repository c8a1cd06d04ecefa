//! What must hold of every frame that crosses the wire: encoding a decoded
//! frame gives one line that decodes to the same frame, and a decode error
//! becomes an `error` reply that survives the same trip.

use cgc_fresh_proto::{
    decode_client_frame, decode_server_frame, encode, ClientFrame, Envelope, ErrorCode, FrameError,
    ServerFrame,
};

/// The codes a line's decoding can fail with (the others are the
/// service's: `too_large` from the codec, `forbidden`, `internal`,
/// `unavailable`).
pub const DECODE_ERROR_CODES: [ErrorCode; 4] = [
    ErrorCode::BadJson,
    ErrorCode::BadRequest,
    ErrorCode::UnknownType,
    ErrorCode::UnsupportedProtocol,
];

/// An error message longer than this would mean a peer-chosen string was
/// echoed unbounded (the protocol crate shortens what it quotes).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 1_024;

/// `encoded` without its final `\n`, after checking it is exactly one
/// line: the `\n` is the last byte and the only one.
pub fn one_line(encoded: &[u8]) -> &[u8] {
    let body = encoded
        .strip_suffix(b"\n")
        .unwrap_or_else(|| panic!("an encoded frame does not end with a newline"));
    assert!(
        !body.contains(&b'\n'),
        "an encoded frame spans several lines"
    );
    body
}

/// A decoded client frame re-encodes into one line that decodes to the
/// same envelope, and re-encoding that gives the same bytes.
pub fn assert_client_round_trip(envelope: &Envelope<ClientFrame>) {
    let encoded = encode(envelope);
    let again = decode_client_frame(one_line(&encoded))
        .unwrap_or_else(|error| panic!("a re-encoded client frame is refused: {error}"));
    assert_eq!(&again, envelope, "a client frame changed on its round trip");
    assert_eq!(encode(&again), encoded, "the encoding is not stable");
}

/// As [`assert_client_round_trip`], for frames the service sends.
pub fn assert_server_round_trip(envelope: &Envelope<ServerFrame>) {
    let encoded = encode(envelope);
    let again = decode_server_frame(one_line(&encoded))
        .unwrap_or_else(|error| panic!("a re-encoded server frame is refused: {error}"));
    assert_eq!(&again, envelope, "a server frame changed on its round trip");
    assert_eq!(encode(&again), encoded, "the encoding is not stable");
}

/// The `error` reply to a line that failed to decode: it carries a code a
/// decode can produce, the error's id, its field, and a bounded message,
/// and it survives the wire. Returns the reply.
pub fn checked_error_reply(error: &FrameError) -> Envelope<ServerFrame> {
    let reply = error.to_reply();
    assert!(
        DECODE_ERROR_CODES.contains(&error.code()),
        "a decode failed with {:?}",
        error.code()
    );
    assert_eq!(
        reply.id, error.id,
        "the reply does not carry the error's id"
    );
    let ServerFrame::Error(frame) = &reply.frame else {
        panic!("the reply to a decode error is not an error frame");
    };
    assert_eq!(frame.code, error.code());
    assert_eq!(frame.field.as_deref(), error.field());
    assert_eq!(frame.message, error.message());
    assert!(
        frame.message.len() <= MAX_ERROR_MESSAGE_BYTES,
        "an error message of {} bytes",
        frame.message.len()
    );
    if error.code() != ErrorCode::BadRequest {
        assert_eq!(frame.field, None, "only bad_request names a field");
    }
    assert_server_round_trip(&reply);
    reply
}
