//! A fake of the kubelet's plugin watcher as it registers a plugin on its
//! registration socket (Kubernetes v1.36.2,
//! pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go):
//! it dials the socket's bare path with grpc-go 1.79.3
//! (`grpc.DialContext(ctx, socketPath, ...)`, the passthrough resolver),
//! calls GetInfo with a 1 s deadline, then NotifyRegistrationStatus with
//! a 5 s deadline on the same connection.
//!
//! The HTTP/2 client is written out by hand so that the bytes are grpc-go's
//! (internal/transport/http2_client.go, controlbuf.go), not tonic's:
//! - the preface, an empty SETTINGS (default windows: no WINDOW_UPDATE),
//!   then it waits for the server's SETTINGS and acknowledges it;
//! - each call's header fields in grpc-go's order (`createHeaderFields`):
//!   `:method POST`, `:scheme http`, `:path`, `:authority` (the socket's
//!   path percent-encoded by `encodeAuthority`: every `/` as `%2F`),
//!   `content-type application/grpc`, `user-agent grpc-go/1.79.3`,
//!   `te trailers`, `grpc-accept-encoding gzip` (the kubelet links the
//!   OTLP exporter, which registers gzip), `grpc-timeout` (the deadline's
//!   remainder, `EncodeDuration`);
//! - HPACK as golang.org/x/net/http2/hpack writes it: indexed when in a
//!   table, otherwise a literal with incremental indexing (its name indexed
//!   when found), each string Huffman-coded when strictly shorter; one
//!   encoder per connection, so the second call names most fields by
//!   their dynamic table index;
//! - the message in one DATA frame with END_STREAM (a unary call);
//! - on the first DATA frame it receives, a connection WINDOW_UPDATE for
//!   it and the BDP PING (`bdpPing`); PINGs and SETTINGS are acknowledged.
//!
//! Responses are checked as grpc-go checks them: `:status 200`, a gRPC
//! content type, `grpc-status` in the trailers; the message is decoded with
//! prost.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

#[path = "grpc_go.rs"]
mod grpc_go;

use cdigen::dra::api::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// grpc-go's `encodeAuthority`: RFC 3986's unreserved characters,
/// sub-delimiters and `:[]@` kept, every other byte `%XX`.
pub fn encode_authority(target: &str) -> String {
    let keep = |c: u8| c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]@".contains(&c);
    let mut out = String::new();
    for &c in target.as_bytes() {
        if keep(c) {
            out.push(char::from(c));
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// grpc-go's `EncodeDuration` (a grpc-timeout value).
pub fn encode_duration(d: Duration) -> String {
    const MAX: u128 = 100_000_000 - 1;
    let n = d.as_nanos();
    for (unit, per) in [
        ("n", 1u128),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
    ] {
        let v = n.div_ceil(per);
        if v <= MAX {
            return format!("{v}{unit}");
        }
    }
    format!("{}M", n.div_ceil(60_000_000_000))
}

/// One connection of the watcher.
pub struct Watcher {
    stream: UnixStream,
    authority: String,
    enc: httlib_hpack::Encoder<'static>,
    dec: loona_hpack::Decoder<'static>,
    next_stream: u32,
    bdp_sent: bool,
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let l = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = vec![l[1], l[2], l[3], kind, flags];
    out.extend(stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What a call got back.
#[derive(Debug)]
struct Reply {
    headers: Vec<(String, String)>,
    trailers: Vec<(String, String)>,
    data: Vec<u8>,
}

impl Watcher {
    /// Dials `socket` as the plugin watcher does: connects, sends the
    /// preface and its SETTINGS, and waits for the server's SETTINGS.
    pub async fn dial(socket: &Path) -> Result<Watcher, String> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("dial {}: {e}", socket.display()))?;
        let mut w = Watcher {
            stream,
            authority: encode_authority(&socket.to_string_lossy()),
            enc: httlib_hpack::Encoder::default(),
            dec: loona_hpack::Decoder::new(),
            next_stream: 1,
            bdp_sent: false,
        };
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        w.stream
            .write_all(&hello)
            .await
            .map_err(|e| e.to_string())?;
        loop {
            let (kind, flags, _, payload) = w.read_frame().await?;
            if kind == SETTINGS && flags & ACK == 0 {
                w.handle_control(kind, flags, &payload).await?;
                return Ok(w);
            }
        }
    }

    /// The `:authority` this watcher sends.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    async fn read_frame(&mut self) -> Result<(u8, u8, u32, Vec<u8>), String> {
        let mut h = [0u8; 9];
        self.stream
            .read_exact(&mut h)
            .await
            .map_err(|e| format!("reading a frame: {e}"))?;
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let stream = u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]);
        let mut payload = vec![0; len];
        self.stream
            .read_exact(&mut payload)
            .await
            .map_err(|e| format!("reading a frame: {e}"))?;
        Ok((h[3], h[4], stream, payload))
    }

    /// Acknowledges SETTINGS and PING as grpc-go does.
    async fn handle_control(&mut self, kind: u8, flags: u8, payload: &[u8]) -> Result<(), String> {
        let reply = match kind {
            SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(PING, ACK, 0, payload),
            _ => return Ok(()),
        };
        self.stream
            .write_all(&reply)
            .await
            .map_err(|e| e.to_string())
    }

    /// The header fields of one call, in grpc-go's order.
    fn header_fields(&self, path: &str, deadline: Instant) -> Vec<(String, String)> {
        let left = deadline.saturating_duration_since(Instant::now());
        grpc_go::request_fields(path, &self.authority, &encode_duration(left))
    }

    /// The fields HPACK-encoded as golang.org/x/net/http2/hpack does.
    fn encode(&mut self, fields: &[(String, String)]) -> Vec<u8> {
        grpc_go::hpack_encode(&mut self.enc, fields)
    }

    /// Decodes a response header block (HEADERS and CONTINUATIONs).
    fn decode(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, String> {
        let fields = self
            .dec
            .decode(block)
            .map_err(|e| format!("bad HPACK from the server: {e}"))?;
        Ok(fields
            .into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect())
    }

    /// One unary call of `path` with `message`, within `timeout`.
    async fn call(
        &mut self,
        path: &str,
        message: &impl prost::Message,
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout(timeout, self.exchange(path, message, deadline)).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded ({path})"
            )),
        }
    }

    async fn exchange(
        &mut self,
        path: &str,
        message: &impl prost::Message,
        deadline: Instant,
    ) -> Result<Vec<u8>, String> {
        let id = self.next_stream;
        self.next_stream += 2;
        let fields = self.header_fields(path, deadline);
        let block = self.encode(&fields);
        // One frame: the block is far below grpc-go's 16 KiB split.
        let mut out = frame(HEADERS, END_HEADERS, id, &block);
        let body = message.encode_to_vec();
        let mut msg = vec![0];
        msg.extend(u32::try_from(body.len()).unwrap().to_be_bytes());
        msg.extend(body);
        out.extend(frame(DATA, END_STREAM, id, &msg));
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| e.to_string())?;
        let reply = self.read_reply(id).await?;
        let get = |fields: &[(String, String)], name: &str| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let status = get(&reply.headers, ":status");
        if status.as_deref() != Some("200") {
            return Err(format!(
                "rpc error: code = Unknown desc = unexpected HTTP status {status:?}"
            ));
        }
        let ct = get(&reply.headers, "content-type").unwrap_or_default();
        if !ct.starts_with("application/grpc") {
            return Err(format!("unexpected content-type {ct:?}"));
        }
        // A trailers-only answer carries grpc-status in its headers.
        let trailers = if reply.trailers.is_empty() {
            &reply.headers
        } else {
            &reply.trailers
        };
        match get(trailers, "grpc-status").as_deref() {
            Some("0") => {}
            Some(code) => {
                return Err(format!(
                    "rpc error: code = {code} desc = {}",
                    get(trailers, "grpc-message").unwrap_or_default()
                ));
            }
            None => return Err("rpc error: no grpc-status in the trailers".into()),
        }
        let [flag, a, b, c, d, rest @ ..] = reply.data.as_slice() else {
            return Err(format!("a response of {} bytes", reply.data.len()));
        };
        let len = usize::try_from(u32::from_be_bytes([*a, *b, *c, *d])).unwrap();
        if *flag != 0 || rest.len() != len {
            return Err(format!(
                "a bad response message: flag {flag}, {len} of {}",
                rest.len()
            ));
        }
        Ok(rest.to_vec())
    }

    /// Reads frames until stream `id` ends.
    async fn read_reply(&mut self, id: u32) -> Result<Reply, String> {
        let mut reply = Reply {
            headers: Vec::new(),
            trailers: Vec::new(),
            data: Vec::new(),
        };
        let mut block: Option<(Vec<u8>, bool)> = None;
        loop {
            let (kind, flags, stream, payload) = self.read_frame().await?;
            let ended = match kind {
                HEADERS | CONTINUATION => {
                    if stream != id {
                        return Err(format!("headers on unexpected stream {stream}"));
                    }
                    let (frag, end_stream) = if kind == HEADERS {
                        let mut p = payload.as_slice();
                        let mut pad = 0;
                        if flags & PADDED != 0 {
                            pad = usize::from(p[0]);
                            p = &p[1..];
                        }
                        if flags & PRIORITY != 0 {
                            p = &p[5..];
                        }
                        (p[..p.len() - pad].to_vec(), flags & END_STREAM != 0)
                    } else {
                        let (mut b, e) = block.take().ok_or("a stray CONTINUATION")?;
                        b.extend(payload);
                        (b, e)
                    };
                    if flags & END_HEADERS == 0 {
                        block = Some((frag, end_stream));
                        continue;
                    }
                    let fields = self.decode(&frag)?;
                    if reply.headers.is_empty() {
                        reply.headers = fields;
                    } else {
                        reply.trailers = fields;
                    }
                    end_stream
                }
                DATA if stream == id => {
                    if !payload.is_empty() && !self.bdp_sent {
                        self.bdp_sent = true;
                        let n = u32::try_from(payload.len()).unwrap();
                        let mut out = frame(WINDOW_UPDATE, 0, 0, &n.to_be_bytes());
                        out.extend(frame(PING, 0, 0, &[2, 4, 16, 16, 9, 14, 7, 7]));
                        self.stream
                            .write_all(&out)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    reply.data.extend(&payload);
                    flags & END_STREAM != 0
                }
                RST_STREAM if stream == id => {
                    let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
                    return Err(format!(
                        "rpc error: code = Internal desc = stream terminated by RST_STREAM with error code: {}",
                        match code {
                            1 => "PROTOCOL_ERROR".to_string(),
                            c => c.to_string(),
                        }
                    ));
                }
                GOAWAY => return Err("the server sent GOAWAY".into()),
                _ => {
                    self.handle_control(kind, flags, &payload).await?;
                    false
                }
            };
            if ended {
                return Ok(reply);
            }
        }
    }

    /// GetInfo, with the watcher's 1 s deadline.
    pub async fn get_info(&mut self) -> Result<PluginInfo, String> {
        let raw = self
            .call(
                "/pluginregistration.Registration/GetInfo",
                &InfoRequest {},
                Duration::from_secs(1),
            )
            .await?;
        <PluginInfo as prost::Message>::decode(raw.as_slice()).map_err(|e| e.to_string())
    }

    /// NotifyRegistrationStatus, with the watcher's 5 s deadline.
    pub async fn notify(&mut self, registered: bool, error: &str) -> Result<(), String> {
        let raw = self
            .call(
                "/pluginregistration.Registration/NotifyRegistrationStatus",
                &RegistrationStatus {
                    plugin_registered: registered,
                    error: error.into(),
                },
                Duration::from_secs(5),
            )
            .await?;
        <RegistrationStatusResponse as prost::Message>::decode(raw.as_slice())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// What the plugin watcher does with a new registration socket: dial,
/// GetInfo, then (its handler accepting `DRAPlugin`) NotifyRegistrationStatus
/// on the same connection. The plugin's info.
pub async fn register(socket: &Path) -> Result<PluginInfo, String> {
    let mut w = Watcher::dial(socket).await?;
    let info = w.get_info().await?;
    let ok = info.r#type == "DRAPlugin";
    let error = if ok {
        String::new()
    } else {
        format!(
            "RegisterPlugin error -- no handler registered for plugin type: {}",
            info.r#type
        )
    };
    w.notify(ok, &error).await?;
    Ok(info)
}
