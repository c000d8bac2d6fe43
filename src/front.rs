//! The HTTP/2 front of cdigen's kubelet-facing gRPC servers: every
//! connection to the DRA registration and service sockets and to the
//! device plugin sockets goes through it before tonic sees it.
//!
//! Why: the kubelet's plugin watcher dials the registration socket with
//! grpc-go's passthrough resolver, which sends the socket's path,
//! percent-encoded (`%2Fvar%2Flib%2F...-reg.sock`), as `:authority`; the
//! `h2` crate under tonic refuses such an authority and resets the stream
//! (hyperium/h2#487; kubernetes/kubernetes#108254), so the driver never
//! registers. The front reads what the client sends, frame by frame
//! ([`Front`]): every request's header block (HEADERS and its
//! CONTINUATIONs, padding and priority handled) is decoded with the
//! client's HPACK state (`loona-hpack`), an `:authority` that the `http`
//! crate would refuse is replaced by `localhost` (what the kubelet's other
//! gRPC clients send), and the header list is written anew as literals
//! that use no dynamic table, in frames of at most the protocol's minimum
//! maximum frame size. Every other frame passes unchanged, streamed; what
//! the server sends back is copied unchanged. A valid authority is kept.
//!
//! The client is untrusted: a connection that does not start with the
//! HTTP/2 preface within [`STALL`], a header block over [`MAX_BLOCK`]
//! bytes (encoded) or [`MAX_LIST`] bytes (decoded: an HPACK bomb), a block
//! that stalls for [`STALL`], bad HPACK, a frame between a HEADERS and its
//! CONTINUATION, or a PUSH_PROMISE is closed with a warning. Memory per
//! connection is bounded by those limits and the [`PIPE`] buffer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream};
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::{Stream, StreamExt as _};
use tonic::transport::server::{Connected, UdsConnectInfo};

/// The client connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Largest header block (HEADERS and CONTINUATIONs, as encoded) a client
/// may send: the kubelet's are a few hundred bytes.
pub const MAX_BLOCK: usize = 64 << 10;

/// Largest decoded header list (RFC 9113's size: name, value and 32 per
/// field) a block may expand to.
pub const MAX_LIST: usize = 64 << 10;

/// How long a client may take to send the preface, and to finish a header
/// block once it has started one.
pub const STALL: Duration = Duration::from_secs(10);

/// The buffer between the front and the server, each way.
pub const PIPE: usize = 64 << 10;

/// The frames the front writes are at most this long: the smallest
/// SETTINGS_MAX_FRAME_SIZE a server may have, so within any server's.
const MAX_FRAME: usize = 16_384;

/// The dynamic table size a client's encoder may use: the default, which
/// the servers behind the front never raise.
const TABLE_SIZE: usize = 4096;

const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Why a client's connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not the HTTP/2 client preface.
    #[error("not an HTTP/2 client connection preface")]
    Preface,
    /// The preface did not come in time.
    #[error("no HTTP/2 preface within {0:?}")]
    PrefaceTimeout(Duration),
    /// A header block stalled.
    #[error("a header block unfinished after {0:?}")]
    BlockTimeout(Duration),
    /// A header block over [`MAX_BLOCK`].
    #[error("a header block of more than {max} bytes on stream {0}", max = MAX_BLOCK)]
    BlockTooLarge(u32),
    /// A header list over [`MAX_LIST`] once decoded.
    #[error("a header list of more than {max} bytes decoded on stream {0}", max = MAX_LIST)]
    ListTooLarge(u32),
    /// Bad HPACK.
    #[error("bad HPACK on stream {0}: {1}")]
    Hpack(u32, String),
    /// A frame other than the CONTINUATION a header block awaits.
    #[error("a frame of type {kind} on stream {got} where stream {want} owes a CONTINUATION")]
    Interleaved {
        /// The frame's type.
        kind: u8,
        /// Its stream.
        got: u32,
        /// The stream of the unfinished block.
        want: u32,
    },
    /// A CONTINUATION with no header block open.
    #[error("a CONTINUATION on stream {0} with no header block open")]
    Orphan(u32),
    /// A HEADERS frame too short for its flags, or with more padding than
    /// payload.
    #[error("a malformed HEADERS frame on stream {0}")]
    Malformed(u32),
    /// HEADERS on stream 0.
    #[error("HEADERS on stream 0")]
    StreamZero,
    /// A client never sends PUSH_PROMISE.
    #[error("a PUSH_PROMISE from a client")]
    PushPromise,
}

/// A frame's header.
#[derive(Debug, Clone, Copy)]
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl Head {
    fn parse(b: [u8; 9]) -> Head {
        let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = b;
        Head {
            len: usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2),
            kind,
            flags,
            stream: u32::from_be_bytes([s0 & 0x7f, s1, s2, s3]),
        }
    }
}

/// Appends a frame header.
fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// A decoded header list: (name, value) pairs.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// A header block awaiting its CONTINUATIONs.
#[derive(Debug)]
struct Block {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

#[derive(Debug)]
enum State {
    /// Bytes of the preface seen.
    Preface(usize),
    /// A frame header, `got` bytes of it.
    Head { buf: [u8; 9], got: usize },
    /// A frame passing through: bytes of its payload still to come.
    Pass(usize),
    /// A HEADERS or CONTINUATION frame's payload, collected.
    Collect { head: Head, payload: Vec<u8> },
}

/// The client-to-server half of a connection, without I/O: fed what the
/// client sends, writes what the server gets.
pub struct Front {
    state: State,
    decoder: loona_hpack::Decoder<'static>,
    block: Option<Block>,
    rewritten: usize,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("state", &self.state)
            .field("block", &self.block)
            .field("rewritten", &self.rewritten)
            .finish_non_exhaustive()
    }
}

impl Default for Front {
    fn default() -> Self {
        Front::new()
    }
}

/// Splits `n` bytes (or all there are) off the front of `input`.
fn take<'a>(input: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = input.split_at_checked(n).unwrap_or((input, &[]));
    *input = rest;
    head
}

/// Whether `h2` takes `value` as an `:authority`.
pub fn valid_authority(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// The authority that replaces one `h2` would refuse.
pub const AUTHORITY: &str = "localhost";

impl Front {
    /// A connection's start: the preface is expected.
    pub fn new() -> Front {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(TABLE_SIZE);
        Front {
            state: State::Preface(0),
            decoder,
            block: None,
            rewritten: 0,
        }
    }

    /// How many `:authority` values were replaced so far.
    pub fn rewritten(&self) -> usize {
        self.rewritten
    }

    /// Whether the client is in the preface or in the middle of a header
    /// block (its time is bounded: [`STALL`]).
    pub fn in_preface(&self) -> bool {
        matches!(self.state, State::Preface(_))
    }

    /// Whether the client is at a frame boundary with no header block
    /// open, or streaming another frame's payload (no time bound).
    pub fn idle(&self) -> bool {
        self.block.is_none() && matches!(self.state, State::Head { got: 0, .. } | State::Pass(_))
    }

    /// Takes `input`, the client's next bytes, and appends to `out` what
    /// the server is to get.
    ///
    /// # Errors
    /// The connection is to be closed ([`Refused`] says why); `out` then
    /// holds what was complete before the fault.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        while !input.is_empty() {
            match &mut self.state {
                State::Preface(got) => {
                    let want = PREFACE.get(*got..).unwrap_or_default();
                    let part = take(&mut input, want.len());
                    if !want.starts_with(part) {
                        return Err(Refused::Preface);
                    }
                    *got += part.len();
                    if *got == PREFACE.len() {
                        // Passed on whole, so that what the server gets
                        // does not depend on how the bytes came.
                        out.extend_from_slice(PREFACE);
                        self.state = State::Head {
                            buf: [0; 9],
                            got: 0,
                        };
                    }
                }
                State::Head { buf, got } => {
                    let part = take(&mut input, 9 - *got);
                    if let Some(dst) = buf.get_mut(*got..*got + part.len()) {
                        dst.copy_from_slice(part);
                    }
                    *got += part.len();
                    if *got == 9 {
                        let raw = *buf;
                        self.on_head(raw, out)?;
                    }
                }
                State::Pass(left) => {
                    let part = take(&mut input, *left);
                    out.extend_from_slice(part);
                    *left -= part.len();
                    if *left == 0 {
                        self.state = State::Head {
                            buf: [0; 9],
                            got: 0,
                        };
                    }
                }
                State::Collect { head, payload } => {
                    let part = take(&mut input, head.len - payload.len());
                    payload.extend_from_slice(part);
                    if payload.len() == head.len {
                        let (head, payload) = (*head, std::mem::take(payload));
                        self.on_payload(head, &payload, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A frame header is complete.
    fn on_head(&mut self, raw: [u8; 9], out: &mut Vec<u8>) -> Result<(), Refused> {
        let h = Head::parse(raw);
        if let Some(b) = &self.block
            && (h.kind != CONTINUATION || h.stream != b.stream)
        {
            return Err(Refused::Interleaved {
                kind: h.kind,
                got: h.stream,
                want: b.stream,
            });
        }
        match h.kind {
            HEADERS | CONTINUATION => {
                let open = match (&self.block, h.kind) {
                    (None, CONTINUATION) => return Err(Refused::Orphan(h.stream)),
                    (Some(b), _) => b.fragment.len(),
                    (None, _) if h.stream == 0 => return Err(Refused::StreamZero),
                    (None, _) => 0,
                };
                if open + h.len > MAX_BLOCK {
                    return Err(Refused::BlockTooLarge(h.stream));
                }
                self.state = State::Collect {
                    head: h,
                    payload: Vec::with_capacity(h.len),
                };
                if h.len == 0 {
                    self.on_payload(h, &[], out)?;
                }
            }
            PUSH_PROMISE => return Err(Refused::PushPromise),
            _ => {
                out.extend_from_slice(&raw);
                self.state = if h.len == 0 {
                    State::Head {
                        buf: [0; 9],
                        got: 0,
                    }
                } else {
                    State::Pass(h.len)
                };
            }
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION frame's payload is complete.
    fn on_payload(&mut self, h: Head, payload: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        self.state = State::Head {
            buf: [0; 9],
            got: 0,
        };
        let mut block = match self.block.take() {
            Some(mut b) => {
                b.fragment.extend_from_slice(payload);
                b
            }
            None => {
                let mut rest = payload;
                let mut pad = 0;
                if h.flags & PADDED != 0 {
                    let [p] = take(&mut rest, 1) else {
                        return Err(Refused::Malformed(h.stream));
                    };
                    pad = usize::from(*p);
                }
                let priority = if h.flags & PRIORITY != 0 {
                    let p: [u8; 5] = take(&mut rest, 5)
                        .try_into()
                        .map_err(|_| Refused::Malformed(h.stream))?;
                    Some(p)
                } else {
                    None
                };
                let Some(fragment) = rest.len().checked_sub(pad).and_then(|n| rest.get(..n)) else {
                    return Err(Refused::Malformed(h.stream));
                };
                Block {
                    stream: h.stream,
                    end_stream: h.flags & END_STREAM != 0,
                    priority,
                    fragment: fragment.to_vec(),
                }
            }
        };
        if h.flags & END_HEADERS == 0 {
            self.block = Some(block);
            return Ok(());
        }
        let fields = self.decode(&block)?;
        let encoded = encode(&fields);
        block.fragment = encoded;
        write_block(&block, out);
        Ok(())
    }

    /// The header list of a complete block, authorities `h2` would refuse
    /// replaced.
    fn decode(&mut self, block: &Block) -> Result<Fields, Refused> {
        let mut fields = Vec::new();
        let mut size = 0usize;
        self.decoder
            .decode_with_cb(&block.fragment, |name, value| {
                size = size.saturating_add(name.len() + value.len() + 32);
                if size <= MAX_LIST {
                    fields.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| Refused::Hpack(block.stream, e.to_string()))?;
        if size > MAX_LIST {
            return Err(Refused::ListTooLarge(block.stream));
        }
        for (name, value) in &mut fields {
            if name.as_slice() == b":authority" && !valid_authority(value) {
                tracing::debug!(
                    "stream {}: :authority {} replaced by {AUTHORITY}",
                    block.stream,
                    crate::text::escape(&String::from_utf8_lossy(value))
                );
                *value = AUTHORITY.as_bytes().to_vec();
                self.rewritten += 1;
            }
        }
        Ok(fields)
    }
}

/// `fields` as HPACK literals without indexing, with new names: no table
/// state on either side.
pub fn encode(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0);
        for s in [name, value] {
            // Writing to a Vec cannot fail.
            let _ = loona_hpack::encoder::encode_integer_into(s.len(), 7, 0, &mut out);
            out.extend_from_slice(s);
        }
    }
    out
}

/// `block` (its fragment re-encoded) as a HEADERS frame and as many
/// CONTINUATIONs as [`MAX_FRAME`] needs.
fn write_block(block: &Block, out: &mut Vec<u8>) {
    let prio: &[u8] = block.priority.as_ref().map_or(&[], |p| p.as_slice());
    let mut rest = block.fragment.as_slice();
    let first = take(&mut rest, MAX_FRAME - prio.len());
    let mut flags = if block.end_stream { END_STREAM } else { 0 };
    if block.priority.is_some() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    put_head(out, prio.len() + first.len(), HEADERS, flags, block.stream);
    out.extend_from_slice(prio);
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let part = take(&mut rest, MAX_FRAME);
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        put_head(out, part.len(), CONTINUATION, flags, block.stream);
        out.extend_from_slice(part);
    }
}

/// A client connection as the gRPC server sees it: the front's output,
/// with the client socket's peer credentials.
#[derive(Debug)]
pub struct Fronted {
    io: DuplexStream,
    info: UdsConnectInfo,
}

impl Fronted {
    /// Puts the front before `client`: a task pumps both ways until either
    /// side closes. `what` names the socket in warnings. Must be called
    /// within a tokio runtime.
    pub fn new(client: UnixStream, what: &'static str) -> Fronted {
        let info = client.connect_info();
        let (ours, theirs) = tokio::io::duplex(PIPE);
        tokio::spawn(pump_with(client, ours, what, STALL));
        Fronted { io: theirs, info }
    }
}

impl AsyncRead for Fronted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Fronted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Connected for Fronted {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> UdsConnectInfo {
        self.info.clone()
    }
}

/// The connections to `listener`, each through the front: what a tonic
/// server's `serve_with_incoming*` takes. `what` names the socket in
/// warnings.
pub fn incoming(
    listener: UnixListener,
    what: &'static str,
) -> impl Stream<Item = io::Result<Fronted>> + Send + 'static {
    tokio_stream::wrappers::UnixListenerStream::new(listener)
        .map(move |c| c.map(|c| Fronted::new(c, what)))
}

/// Why a pump stopped early.
enum Stop {
    Io(io::Error),
    Refused(Refused),
}

/// Runs one connection: client to server through a [`Front`], server to
/// client unchanged; ends when the server side closes, or when the client
/// is refused (with a warning). `stall` bounds the preface and each header
/// block.
async fn pump_with(client: UnixStream, server: DuplexStream, what: &'static str, stall: Duration) {
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = tokio::io::split(server);
    let down = async {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
        let _ = client_tx.shutdown().await;
    };
    tokio::pin!(down);
    let up = forward(&mut client_rx, &mut server_tx, stall);
    tokio::select! {
        () = &mut down => {}
        r = up => match r {
            Ok(()) => down.await,
            Err(Stop::Refused(e)) => {
                tracing::warn!("{what}: closing a client's connection: {e}");
            }
            Err(Stop::Io(e)) => tracing::debug!("{what}: connection ended: {e}"),
        },
    }
}

/// Copies the client's bytes to the server through a [`Front`] until the
/// client's end of stream (then shuts the server side's input).
async fn forward(
    client: &mut (impl AsyncRead + Unpin),
    server: &mut (impl AsyncWrite + Unpin),
    stall: Duration,
) -> Result<(), Stop> {
    let mut front = Front::new();
    let mut buf = vec![0u8; 16 << 10];
    let mut out = Vec::new();
    let mut busy_since = Some(tokio::time::Instant::now());
    loop {
        let n = match busy_since {
            Some(t) => match tokio::time::timeout_at(t + stall, client.read(&mut buf)).await {
                Ok(r) => r.map_err(Stop::Io)?,
                Err(_) if front.in_preface() => {
                    return Err(Stop::Refused(Refused::PrefaceTimeout(stall)));
                }
                Err(_) => return Err(Stop::Refused(Refused::BlockTimeout(stall))),
            },
            None => client.read(&mut buf).await.map_err(Stop::Io)?,
        };
        let Some(got) = buf.get(..n).filter(|g| !g.is_empty()) else {
            let _ = server.shutdown().await;
            return Ok(());
        };
        out.clear();
        let fed = front.feed(got, &mut out);
        server.write_all(&out).await.map_err(Stop::Io)?;
        fed.map_err(Stop::Refused)?;
        busy_since = if front.idle() {
            None
        } else {
            busy_since.or_else(|| Some(tokio::time::Instant::now()))
        };
    }
}

#[cfg(test)]
mod tests;
