#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use proptest::prelude::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

#[path = "../../tests/support/grpc_go.rs"]
mod grpc_go;
use grpc_go::hpack_encode;

/// The kubelet plugin watcher's authority for a registration socket, as
/// grpc-go writes it (`encodeAuthority` of the passthrough target).
const WATCHER_AUTHORITY: &str =
    "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fdra.cdigen.io-reg.sock";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn start() -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    v.extend(frame(0x4, 0, 0, &[]));
    v
}

/// The header fields grpc-go 1.79.3 sends for a call of `path` with a
/// deadline, in its order.
fn request(path: &str, authority: &str) -> Vec<(String, String)> {
    grpc_go::request_fields(path, authority, "999871u")
}

fn pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

/// Feeds `input` in chunks of `chunk` bytes.
fn run(input: &[u8], chunk: usize) -> (Vec<u8>, Result<(), Refused>) {
    let mut front = Front::new();
    let mut out = Vec::new();
    for part in input.chunks(chunk.max(1)) {
        if let Err(e) = front.feed(part, &mut out) {
            return (out, Err(e));
        }
    }
    (out, Ok(()))
}

/// An output frame.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The frames after the preface; every one within [`MAX_FRAME`] when it
/// is a header frame the front wrote.
fn frames(out: &[u8]) -> Vec<Out> {
    assert_eq!(&out[..24], PREFACE);
    let mut rest = &out[24..];
    let mut v = Vec::new();
    while !rest.is_empty() {
        let h = Head::parse(rest[..9].try_into().unwrap());
        v.push(Out {
            kind: h.kind,
            flags: h.flags,
            stream: h.stream,
            payload: rest[9..9 + h.len].to_vec(),
        });
        rest = &rest[9 + h.len..];
    }
    v
}

/// (stream, END_STREAM, priority, fields) of each header block in `out`,
/// decoded by a fresh decoder that must never need its dynamic table.
type Decoded = (u32, bool, Option<Vec<u8>>, Vec<(String, String)>);

fn blocks(out: &[u8]) -> Vec<Decoded> {
    let mut v = Vec::new();
    // (stream, END_STREAM, priority, fragment) of the block being read.
    type Open = (u32, bool, Option<Vec<u8>>, Vec<u8>);
    let mut open: Option<Open> = None;
    for f in frames(out) {
        match f.kind {
            HEADERS => {
                assert!(open.is_none());
                assert!(f.payload.len() <= MAX_FRAME);
                assert_eq!(f.flags & PADDED, 0);
                let (prio, frag) = if f.flags & PRIORITY != 0 {
                    (Some(f.payload[..5].to_vec()), f.payload[5..].to_vec())
                } else {
                    (None, f.payload.clone())
                };
                open = Some((f.stream, f.flags & END_STREAM != 0, prio, frag));
            }
            CONTINUATION => {
                assert!(f.payload.len() <= MAX_FRAME);
                let o = open.as_mut().unwrap();
                assert_eq!(o.0, f.stream);
                o.3.extend(f.payload.clone());
            }
            _ => {
                assert!(open.is_none());
                continue;
            }
        }
        if f.flags & END_HEADERS != 0 {
            let (s, e, p, frag) = open.take().unwrap();
            // No dynamic table: a new decoder per block reads it.
            let fields = loona_hpack::Decoder::new()
                .decode(&frag)
                .unwrap()
                .into_iter()
                .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
                .collect();
            v.push((s, e, p, fields));
        }
    }
    assert!(open.is_none());
    v
}

fn with_authority(fields: &[(String, String)], authority: &str) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| {
            let v = if n == ":authority" { authority } else { v };
            (n.clone(), v.to_string())
        })
        .collect()
}

#[test]
fn the_plugin_watchers_authority_is_replaced_across_two_calls() {
    let mut enc = httlib_hpack::Encoder::default();
    let get_info = request(
        "/pluginregistration.Registration/GetInfo",
        WATCHER_AUTHORITY,
    );
    let notify = request(
        "/pluginregistration.Registration/NotifyRegistrationStatus",
        WATCHER_AUTHORITY,
    );
    let b1 = hpack_encode(&mut enc, &get_info);
    let b2 = hpack_encode(&mut enc, &notify);
    // The second block names the authority by its dynamic table index
    // only: the front must keep the client's table.
    // Table after the first: 62 grpc-timeout ... 67 :authority, 68 :path;
    // the new :path goes in first, so the authority is 68 by then.
    // Every field after the new :path is a dynamic table index.
    assert!(
        b2.ends_with(&[0xc4, 0xc3, 0xc2, 0xc1, 0xc0, 0xbf]),
        "{b2:02x?}"
    );
    assert!(b2.len() + 40 < b1.len(), "{} {}", b1.len(), b2.len());
    let mut input = start();
    input.extend(frame(HEADERS, END_HEADERS, 1, &b1));
    let data = frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]);
    input.extend(&data);
    input.extend(frame(HEADERS, END_HEADERS, 3, &b2));
    input.extend(frame(0x0, END_STREAM, 3, &[0, 0, 0, 0, 2, 8, 1]));
    for chunk in [1, 7, 4096] {
        let (out, r) = run(&input, chunk);
        r.unwrap();
        let got = blocks(&out);
        assert_eq!(
            got,
            vec![
                (1, false, None, with_authority(&get_info, "localhost")),
                (3, false, None, with_authority(&notify, "localhost")),
            ]
        );
        let fs = frames(&out);
        assert_eq!(
            fs[0],
            Out {
                kind: 0x4,
                flags: 0,
                stream: 0,
                payload: vec![]
            }
        );
        // DATA passes unchanged.
        assert_eq!(fs[2].payload, [0, 0, 0, 0, 0]);
        assert_eq!(fs[2].flags, END_STREAM);
    }
}

#[test]
fn a_valid_authority_is_kept_and_nothing_else_changes() {
    for authority in ["localhost", "dra.sock:0", "[::1]:80"] {
        let fields = request("/v1.DRAPlugin/NodePrepareResources", authority);
        let mut enc = httlib_hpack::Encoder::default();
        let mut input = start();
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &hpack_encode(&mut enc, &fields),
        ));
        let (out, r) = run(&input, 100);
        r.unwrap();
        assert_eq!(blocks(&out), vec![(1, false, None, fields)]);
    }
    let mut front = Front::new();
    let mut out = Vec::new();
    front.feed(&start(), &mut out).unwrap();
    assert_eq!(front.rewritten(), 0);
    assert!(!valid_authority(WATCHER_AUTHORITY.as_bytes()));
    assert!(!valid_authority(b""));
}

#[test]
fn continuation_padding_and_priority_are_read() {
    let fields = request("/p", WATCHER_AUTHORITY);
    let block = loona_hpack::Encoder::new().encode(
        pairs(&fields)
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    );
    let (a, rest) = block.split_at(10);
    let (b, c) = rest.split_at(20);
    // HEADERS padded (7 bytes) with a priority, then two CONTINUATIONs.
    let mut p = vec![7];
    p.extend([0x80, 0, 0, 0, 15]);
    p.extend(a);
    p.extend([0; 7]);
    let mut input = start();
    input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 5, &p));
    input.extend(frame(CONTINUATION, 0, 5, b));
    input.extend(frame(CONTINUATION, END_HEADERS, 5, c));
    input.extend(frame(0x8, 0, 0, &[0, 0, 1, 0]));
    for chunk in [1, 3, 1000] {
        let (out, r) = run(&input, chunk);
        r.unwrap();
        assert_eq!(
            blocks(&out),
            vec![(
                5,
                true,
                Some(vec![0x80, 0, 0, 0, 15]),
                with_authority(&fields, "localhost")
            )]
        );
        // The WINDOW_UPDATE after it, unchanged.
        assert!(out.ends_with(&frame(0x8, 0, 0, &[0, 0, 1, 0])));
    }
}

#[test]
fn a_large_header_list_is_written_in_frames_the_server_takes() {
    let big = "x".repeat(40_000);
    let fields = vec![
        (":method".to_string(), "POST".to_string()),
        (":authority".to_string(), WATCHER_AUTHORITY.to_string()),
        ("x-big".to_string(), big),
    ];
    let block = loona_hpack::Encoder::new().encode(
        pairs(&fields)
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    );
    let mut input = start();
    let (a, b) = block.split_at(16_000);
    input.extend(frame(HEADERS, 0, 1, a));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, b));
    let (out, r) = run(&input, 5000);
    r.unwrap();
    assert_eq!(
        blocks(&out),
        vec![(1, false, None, with_authority(&fields, "localhost"))]
    );
    let kinds: Vec<u8> = frames(&out).iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [0x4, HEADERS, CONTINUATION, CONTINUATION]);
}

#[test]
fn other_frames_stream_through_unbuffered() {
    let mut front = Front::new();
    let mut out = Vec::new();
    front.feed(&start(), &mut out).unwrap();
    // A 1 MiB DATA frame (the server refuses its size, not the front):
    // each piece goes out as it comes.
    let mut head = Vec::new();
    put_head(&mut head, 1 << 20, 0x0, 0, 1);
    out.clear();
    front.feed(&head, &mut out).unwrap();
    assert_eq!(out, head);
    for _ in 0..64 {
        out.clear();
        front.feed(&[7; 16 << 10], &mut out).unwrap();
        assert_eq!(out.len(), 16 << 10);
        assert!(front.idle());
    }
    let ping = frame(0x6, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    out.clear();
    front.feed(&ping, &mut out).unwrap();
    assert_eq!(out, ping);
}

#[test]
fn an_oversized_or_endless_header_block_is_refused() {
    let mut input = start();
    input.extend(frame(HEADERS, 0, 1, &vec![0; MAX_BLOCK + 1]));
    // Refused from its frame header, before its payload is read.
    let (_, r) = run(&input[..24 + 9 + 9 + 1], 4096);
    assert_eq!(r, Err(Refused::BlockTooLarge(1)));
    // A never-ending CONTINUATION.
    let mut input = start();
    input.extend(frame(HEADERS, 0, 1, &[0x82]));
    for _ in 0..100 {
        input.extend(frame(CONTINUATION, 0, 1, &[0x82; 1000]));
    }
    let (_, r) = run(&input, 4096);
    assert_eq!(r, Err(Refused::BlockTooLarge(1)));
    assert_eq!(
        Refused::BlockTooLarge(1).to_string(),
        "a header block of more than 65536 bytes on stream 1"
    );
}

#[test]
fn an_hpack_bomb_is_refused() {
    // One 4000-byte value into the table, then 1000 references to it:
    // 4 MB decoded from 4 KB.
    let mut block = Vec::new();
    block.push(0x40);
    block.push(1);
    block.push(b'x');
    let _ = loona_hpack::encoder::encode_integer_into(4000, 7, 0, &mut block);
    block.extend(vec![b'a'; 4000]);
    block.extend(vec![0x80 | 62; 1000]);
    let mut input = start();
    input.extend(frame(HEADERS, END_HEADERS, 1, &block));
    let (_, r) = run(&input, 4096);
    assert_eq!(r, Err(Refused::ListTooLarge(1)));
    // A table size over the default.
    let mut input = start();
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &[0x3f, 0xe1, 0xff, 0x03, 0x82],
    ));
    let (_, r) = run(&input, 4096);
    assert_eq!(
        r,
        Err(Refused::Hpack(
            1,
            "Dynamic table size exceeds the maximum size".into()
        ))
    );
}

#[test]
fn garbage_is_refused() {
    let (out, r) = run(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", 1);
    assert_eq!(r, Err(Refused::Preface));
    assert!(out.is_empty());
    assert_eq!(
        Refused::Preface.to_string(),
        "not an HTTP/2 client connection preface"
    );
    let refused = |frames: &[Vec<u8>]| {
        let mut input = start();
        for f in frames {
            input.extend(f);
        }
        run(&input, 4096).1
    };
    // Bad HPACK: an index past both tables.
    assert_eq!(
        refused(&[frame(HEADERS, END_HEADERS, 1, &[0xff, 0x7f])]),
        Err(Refused::Hpack(1, "Header index out of bounds".into()))
    );
    // A frame between HEADERS and its CONTINUATION.
    assert_eq!(
        refused(&[frame(HEADERS, 0, 1, &[0x82]), frame(0x6, 0, 0, &[0; 8]),]),
        Err(Refused::Interleaved {
            kind: 6,
            got: 0,
            want: 1
        })
    );
    assert_eq!(
        refused(&[
            frame(HEADERS, 0, 1, &[0x82]),
            frame(CONTINUATION, END_HEADERS, 3, &[0x84]),
        ]),
        Err(Refused::Interleaved {
            kind: 9,
            got: 3,
            want: 1
        })
    );
    assert_eq!(
        refused(&[frame(CONTINUATION, END_HEADERS, 1, &[0x82])]),
        Err(Refused::Orphan(1))
    );
    assert_eq!(
        refused(&[frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2])]),
        Err(Refused::PushPromise)
    );
    assert_eq!(
        refused(&[frame(HEADERS, END_HEADERS, 0, &[0x82])]),
        Err(Refused::StreamZero)
    );
    // Padding longer than the payload; a priority cut short.
    assert_eq!(
        refused(&[frame(HEADERS, END_HEADERS | PADDED, 1, &[9, 0x82])]),
        Err(Refused::Malformed(1))
    );
    assert_eq!(
        refused(&[frame(HEADERS, END_HEADERS | PRIORITY, 1, &[0, 0])]),
        Err(Refused::Malformed(1))
    );
    assert_eq!(
        refused(&[frame(HEADERS, END_HEADERS | PADDED, 1, &[])]),
        Err(Refused::Malformed(1))
    );
}

/// A client on one end of a socket pair, the front's pump on the other,
/// the server's end of the pipe returned.
async fn pumped(stall: Duration) -> (UnixStream, DuplexStream, tokio::task::JoinHandle<()>) {
    let (client, theirs) = UnixStream::pair().unwrap();
    let (ours, server) = tokio::io::duplex(PIPE);
    let task = tokio::spawn(pump_with(theirs, ours, "test", stall));
    (client, server, task)
}

#[tokio::test]
async fn a_silent_or_stalling_client_is_closed() {
    let stall = Duration::from_millis(100);
    // No preface.
    let (mut client, _server, task) = pumped(stall).await;
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
    task.await.unwrap();
    // Half a header block.
    let (mut client, mut server, task) = pumped(stall).await;
    let mut input = start();
    input.extend(frame(HEADERS, 0, 1, &[0x82]));
    client.write_all(&input).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let mut got = Vec::new();
    server.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, start());
    // An idle client after its preface is not closed.
    let (mut client, mut server, task) = pumped(stall).await;
    client.write_all(&start()).await.unwrap();
    let mut got = vec![0; start().len()];
    server.read_exact(&mut got).await.unwrap();
    tokio::time::sleep(stall * 3).await;
    assert!(!task.is_finished());
    // The server's bytes reach the client unchanged.
    server.write_all(b"\0\0\0\x04\0\0\0\0\0").await.unwrap();
    let mut back = [0u8; 9];
    client.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"\0\0\0\x04\0\0\0\0\0");
    // The server closing ends it.
    drop(server);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// A header list's framing as a client may choose it.
#[derive(Debug, Clone)]
struct Framing {
    padding: Option<u8>,
    priority: Option<[u8; 5]>,
    /// Where the block is cut into HEADERS and CONTINUATIONs.
    cuts: Vec<usize>,
}

fn framing() -> impl Strategy<Value = Framing> {
    (
        proptest::option::of(any::<u8>()),
        proptest::option::of(any::<[u8; 5]>()),
        proptest::collection::vec(0usize..400, 0..4),
    )
        .prop_map(|(padding, priority, mut cuts)| {
            cuts.sort_unstable();
            Framing {
                padding,
                priority,
                cuts,
            }
        })
}

fn field() -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            Just(":authority".to_string()),
            Just(":path".to_string()),
            "[a-z-]{1,12}",
        ],
        prop_oneof![
            Just(WATCHER_AUTHORITY.to_string()),
            Just("localhost".to_string()),
            "[ -~]{0,40}",
        ],
    )
}

/// `block` framed as `f` says, on `stream`.
fn framed(block: &[u8], f: &Framing, stream: u32, end_stream: bool) -> Vec<u8> {
    let mut parts = Vec::new();
    let mut last = 0;
    for &c in &f.cuts {
        let c = c.min(block.len()).max(last);
        parts.push(&block[last..c]);
        last = c;
    }
    parts.push(&block[last..]);
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let end = if i + 1 == parts.len() { END_HEADERS } else { 0 };
        if i == 0 {
            let mut flags = end | if end_stream { END_STREAM } else { 0 };
            let mut p = Vec::new();
            if let Some(pad) = f.padding {
                flags |= PADDED;
                p.push(pad);
            }
            if let Some(prio) = f.priority {
                flags |= PRIORITY;
                p.extend(prio);
            }
            p.extend(*part);
            p.extend(vec![0; usize::from(f.padding.unwrap_or(0))]);
            out.extend(frame(HEADERS, flags, stream, &p));
        } else {
            out.extend(frame(CONTINUATION, end, stream, part));
        }
    }
    out
}

proptest! {
    /// Any header lists, encoded with a dynamic table across requests
    /// (Huffman or not), framed any way, fed in any pieces: the server
    /// gets the same lists, invalid authorities replaced, priorities kept.
    #[test]
    fn any_framing_and_chunking_reads_the_same(
        reqs in proptest::collection::vec(
            (proptest::collection::vec(field(), 1..8), framing(), any::<bool>()),
            1..4,
        ),
        chunk in 1usize..300,
    ) {
        let mut enc = httlib_hpack::Encoder::default();
        let mut input = start();
        let mut want = Vec::new();
        for (i, (fields, f, end_stream)) in reqs.iter().enumerate() {
            let stream = 2 * u32::try_from(i).unwrap() + 1;
            let block = hpack_encode(&mut enc, fields);
            input.extend(framed(&block, f, stream, *end_stream));
            input.extend(frame(0x0, END_STREAM, stream, b"\0\0\0\0\0"));
            let fixed = fields
                .iter()
                .map(|(n, v)| {
                    let bad = n == ":authority" && !valid_authority(v.as_bytes());
                    (n.clone(), if bad { "localhost".to_string() } else { v.clone() })
                })
                .collect();
            want.push((stream, *end_stream, f.priority.map(|p| p.to_vec()), fixed));
        }
        let (out, r) = run(&input, chunk);
        prop_assert_eq!(r, Ok(()));
        prop_assert_eq!(blocks(&out), want);
    }

    /// Arbitrary bytes after the preface: never a panic, and the output
    /// never outgrows what the limits allow.
    #[test]
    fn arbitrary_frames_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..2000),
        chunk in 1usize..64,
    ) {
        let mut input = PREFACE.to_vec();
        input.extend(&body);
        let (out, r) = run(&input, chunk);
        prop_assert!(out.len() <= input.len() + 2 * MAX_LIST);
        // The same output and verdict however the bytes are cut.
        prop_assert_eq!((out, r), run(&input, input.len()));
    }
}
