//! What grpc-go 1.79.3 (the kubelet's) writes on the wire, shared by the
//! HTTP/2 front's unit tests and the fake plugin watcher: a call's header
//! fields and its HPACK encoding of them.

// Each user takes a different part of this module.
#![allow(dead_code)]

/// The header fields grpc-go sends for a call of `path`, in its order
/// (`internal/transport/http2_client.go`, createHeaderFields), with the
/// deadline as `grpc-timeout` wrote it.
pub fn request_fields(path: &str, authority: &str, timeout: &str) -> Vec<(String, String)> {
    [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("user-agent", "grpc-go/1.79.3"),
        ("te", "trailers"),
        ("grpc-accept-encoding", "gzip"),
        ("grpc-timeout", timeout),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

/// `fields` HPACK-encoded as golang.org/x/net/http2/hpack does: indexed
/// when in a table, otherwise literal with incremental indexing (name
/// indexed when found), each string Huffman-coded when that is strictly
/// shorter.
pub fn hpack_encode(enc: &mut httlib_hpack::Encoder<'_>, fields: &[(String, String)]) -> Vec<u8> {
    let shorter = |s: &str| {
        let mut h = Vec::new();
        httlib_huffman::encode(s.as_bytes(), &mut h).unwrap();
        h.len() < s.len()
    };
    let mut out = Vec::new();
    for (n, v) in fields {
        let mut flags = httlib_hpack::Encoder::WITH_INDEXING | httlib_hpack::Encoder::BEST_FORMAT;
        if shorter(n) {
            flags |= httlib_hpack::Encoder::HUFFMAN_NAME;
        }
        if shorter(v) {
            flags |= httlib_hpack::Encoder::HUFFMAN_VALUE;
        }
        enc.encode(
            (n.as_bytes().to_vec(), v.as_bytes().to_vec(), flags),
            &mut out,
        )
        .unwrap();
    }
    out
}
