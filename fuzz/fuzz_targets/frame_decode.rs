//! Arbitrary bytes through the line codec, cut into arbitrary reads, and
//! every line through both frame decoders.
//!
//! Input layout: byte 0 picks the line limit (below 128: the default
//! 64 KiB; otherwise `2 * (byte - 128)`, so 0..=254 and over-long lines are
//! easy to reach), byte 1 seeds the chunking ([`framing::chunk_lengths`]),
//! the rest is the stream.
//!
//! Asserts: nothing panics; the codec yields exactly the lines its rules
//! give for the whole stream, however it is cut (so `TooLarge` at most
//! once, then refusal, and no line over the limit — checked on the way in
//! [`framing::decode_in_chunks`]); every line that decodes as a client or
//! a server frame re-encodes into one line that decodes to the same frame;
//! every line that does not gives an `error` reply with a decode code, the
//! error's id, and a bounded message, which survives the wire too; and the
//! client decoder's one-pass reading of tool frames agrees with its general
//! path on every line (the same envelope or the same error).

#![no_main]

use cgc_fresh_fuzz::framing::{self, Framed};
use cgc_fresh_fuzz::round_trip;
use cgc_fresh_proto::{
    decode_client_frame, decode_client_frame_general, decode_server_frame, DEFAULT_MAX_LINE_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [limit_byte, chunk_seed, stream @ ..] = data else {
        return;
    };
    let limit = if *limit_byte < 128 {
        DEFAULT_MAX_LINE_BYTES
    } else {
        2 * usize::from(limit_byte - 128)
    };

    let framed = framing::decode_in_chunks(stream, limit, framing::chunk_lengths(*chunk_seed));
    let expected: Framed = framing::expected_lines(stream, limit);
    assert_eq!(framed, expected, "the codec's lines differ from its rules");

    for line in &framed.lines {
        let client = decode_client_frame(line);
        assert_eq!(
            client,
            decode_client_frame_general(line),
            "the one-pass reader and the general decoder disagree"
        );
        match client {
            Ok(envelope) => round_trip::assert_client_round_trip(&envelope),
            Err(error) => {
                round_trip::checked_error_reply(&error);
            }
        }
        match decode_server_frame(line) {
            Ok(envelope) => round_trip::assert_server_round_trip(&envelope),
            Err(error) => {
                round_trip::checked_error_reply(&error);
            }
        }
    }
});
