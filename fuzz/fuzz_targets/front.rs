//! The HTTP/2 front of the kubelet-facing sockets (`cdigen::front`): a
//! client's bytes, frames and HPACK header blocks. The first byte picks
//! the piece size the input is fed in (and whether the preface is
//! prepended, so most inputs reach the frames).
//!
//! Asserts: no panic; the same output and verdict whatever the pieces;
//! the output never outgrows the input by more than the decoded header
//! list bound allows.
#![no_main]

use cdigen::front::{Front, MAX_LIST, PREFACE};
use libfuzzer_sys::fuzz_target;

fn run(input: &[u8], piece: usize) -> (Vec<u8>, Result<(), String>) {
    let mut front = Front::new();
    let mut out = Vec::new();
    for part in input.chunks(piece) {
        if let Err(e) = front.feed(part, &mut out) {
            assert!(!e.to_string().is_empty());
            return (out, Err(e.to_string()));
        }
    }
    (out, Ok(()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::new();
    if first & 0x80 == 0 {
        input.extend_from_slice(PREFACE);
    }
    input.extend_from_slice(rest);
    let piece = usize::from(first & 0x7f) + 1;
    let whole = run(&input, input.len().max(1));
    let pieces = run(&input, piece);
    assert_eq!(whole, pieces);
    assert!(whole.0.len() <= input.len() + 2 * MAX_LIST);
});
