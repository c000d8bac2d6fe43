//! Host-derived text made safe to print: one escaping rule for every
//! string that reaches a terminal or the journal.
//!
//! Device names, `pci.ids` names, USB strings, spec file names and file
//! contents come from the host, and anyone who can name a device or drop a
//! file can put control characters in them: an escape sequence that
//! rewrites the terminal, or a newline that forges a log line. Human output
//! therefore writes such strings through [`Escaped`] (or [`escape`]), and
//! paths through [`path`], which also shows the bytes of a name that is not
//! UTF-8 (`\xff`) instead of replacing them. Every log record is escaped the
//! same way by [`LogFields`], whatever code emitted it, so a record is
//! always one line.
//!
//! What is escaped, and how:
//!
//! - `\n`, `\r`, `\t` as themselves (`\n`);
//! - the other C0 controls and DEL as `\xNN` (`\x1b` for ESC);
//! - the C1 controls (U+0080–U+009F, which some terminals take as escape
//!   sequences), the bidirectional formatting characters (U+061C,
//!   U+200E–U+200F, U+202A–U+202E, U+2066–U+2069, which reorder what is
//!   shown) and the line and paragraph separators (U+2028, U+2029) as
//!   `\u{NNNN}`;
//! - in paths, each byte of an invalid UTF-8 sequence as `\xNN`.
//!
//! A backslash is left as it is (udev's own `\x20` escapes in `/dev` link
//! names stay readable), so `\n` in the output may also be a backslash and
//! an `n` in the name: the escaping guarantees safety, not reversibility.
//! Machine output (`-o json|yaml`) is not escaped: its serializers quote
//! every control character, and paths go through [`lossy_path`].

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

/// Whether `c` is written escaped (see the module documentation).
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Writes `c`, escaped when [`needs_escape`] says so.
fn write_char(out: &mut dyn fmt::Write, c: char) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if c.is_ascii_control() => write!(out, "\\x{:02x}", u32::from(c)),
        c if needs_escape(c) => write!(out, "\\u{{{:x}}}", u32::from(c)),
        c => out.write_char(c),
    }
}

/// Writes `s` with every character [`needs_escape`] says so escaped.
fn write_str(out: &mut dyn fmt::Write, s: &str) -> fmt::Result {
    let mut rest = s;
    while let Some(at) = rest.find(needs_escape) {
        let (clean, tail) = rest.split_at(at);
        out.write_str(clean)?;
        let mut chars = tail.chars();
        if let Some(c) = chars.next() {
            write_char(out, c)?;
        }
        rest = chars.as_str();
    }
    out.write_str(rest)
}

/// A string shown escaped: `format!("{}", Escaped(name))`.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_str(f, self.0)
    }
}

/// `s` escaped, borrowed when nothing needed escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    if s.contains(needs_escape) {
        Cow::Owned(Escaped(s).to_string())
    } else {
        Cow::Borrowed(s)
    }
}

/// A value read from an untrusted file, for a message: quoted, escaped
/// as Rust escapes a string, and cut at `max` characters (`"…"…`).
pub fn quoted(s: &str, max: usize) -> String {
    let mut out = String::from("\"");
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push_str("\"…");
            return out;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

/// A path shown escaped, the bytes of a non-UTF-8 name as `\xNN`: what
/// human output and errors print instead of [`Path::display`].
#[derive(Debug, Clone, Copy)]
pub struct EscapedPath<'a>(&'a Path);

/// `p` for human output: escaped, and with the bytes of a non-UTF-8 name
/// shown (`\xff`) rather than replaced.
pub fn path(p: &Path) -> EscapedPath<'_> {
    EscapedPath(p)
}

impl fmt::Display for EscapedPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.as_os_str().as_encoded_bytes().utf8_chunks() {
            write_str(f, chunk.valid())?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// Serializes a path as a string, lossily (U+FFFD for the bytes of a
/// non-UTF-8 name), for `#[serde(serialize_with)]`: serde's own impl fails
/// on such a path, which would break a JSON document half-way.
pub fn lossy_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// [`lossy_path`] for an optional path (`None` as null).
pub fn lossy_path_opt<P: AsRef<Path>, S: serde::Serializer>(
    p: &Option<P>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => lossy_path(p.as_ref(), s),
        None => s.serialize_none(),
    }
}

/// A [`fmt::Write`] that escapes everything written through it.
struct EscapingWriter<'a>(&'a mut dyn fmt::Write);

impl fmt::Write for EscapingWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_str(self.0, s)
    }
}

/// The field formatter of cdigen's log output: tracing's default
/// (`message`, then `name=value` pairs), with every field escaped. Control
/// characters cannot reach the terminal or the journal through a log
/// record, and each record is one line, whatever a message or a value
/// contains. The level and the terminal's colours, written around the
/// fields by the event formatter, are not affected.
#[derive(Debug, Default)]
pub struct LogFields(tracing_subscriber::fmt::format::DefaultFields);

impl LogFields {
    /// The escaping field formatter.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<'writer> tracing_subscriber::fmt::FormatFields<'writer> for LogFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut escaping = EscapingWriter(&mut writer);
        self.0.format_fields(
            tracing_subscriber::fmt::format::Writer::new(&mut escaping),
            fields,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;

    use super::*;

    #[test]
    fn control_characters_are_escaped_visibly() {
        assert_eq!(
            escape("a\nb\rc\td\x1b[31me\x07\x7f\0"),
            "a\\nb\\rc\\td\\x1b[31me\\x07\\x7f\\x00"
        );
        assert_eq!(escape("\u{9b}31m\u{85}"), "\\u{9b}31m\\u{85}");
        assert_eq!(
            escape("\u{202e}gpj.exe\u{2066}\u{200f}\u{061c}\u{2028}\u{2029}"),
            "\\u{202e}gpj.exe\\u{2066}\\u{200f}\\u{61c}\\u{2028}\\u{2029}"
        );
    }

    #[test]
    fn clean_text_is_borrowed_and_unchanged() {
        for s in ["", "card1", "Intel Corporation [Arc] é 日本", "My\\x20Disk"] {
            assert!(matches!(escape(s), Cow::Borrowed(b) if b == s), "{s}");
        }
    }

    #[test]
    fn paths_show_the_bytes_of_non_utf8_names() {
        let p = Path::new(OsStr::from_bytes(b"/etc/cdi/a\xff\xfeb\n.json"));
        assert_eq!(path(p).to_string(), "/etc/cdi/a\\xff\\xfeb\\n.json");
        assert_eq!(
            path(Path::new("/dev/dri/card1")).to_string(),
            "/dev/dri/card1"
        );
    }

    /// What a subscriber with [`LogFields`] writes for the events `emit`
    /// sends.
    fn logged(emit: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_target(false)
            .without_time()
            .fmt_fields(LogFields::new())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn log_records_are_one_line_with_every_field_escaped() {
        let name = "card1\n ERROR forged\r\x1b[2K";
        let got = logged(|| {
            tracing::warn!("{name}: gone");
            tracing::info!(device = name, "event");
            tracing::error!(device = ?name, "debug-formatted");
            let span = tracing::info_span!("pass", file = name);
            let _in = span.enter();
            tracing::warn!("in a span");
        });
        let want = [
            r" WARN card1\n ERROR forged\r\x1b[2K: gone",
            r#" INFO event device="card1\n ERROR forged\r\u{1b}[2K""#,
            r#"ERROR debug-formatted device="card1\n ERROR forged\r\u{1b}[2K""#,
            r#" WARN pass{file="card1\n ERROR forged\r\u{1b}[2K"}: in a span"#,
        ];
        assert_eq!(got, format!("{}\n", want.join("\n")));
        assert_eq!(got.lines().count(), 4);
        assert!(!got.contains(['\r', '\x1b']));
    }

    #[test]
    fn paths_serialize_lossily() {
        #[derive(serde::Serialize)]
        struct T<'a> {
            #[serde(serialize_with = "lossy_path")]
            p: &'a Path,
            #[serde(serialize_with = "lossy_path_opt")]
            o: Option<&'a Path>,
        }
        let bad = Path::new(OsStr::from_bytes(b"a\xffb\n"));
        let t = T {
            p: bad,
            o: Some(bad),
        };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"p":"a�b\n","o":"a�b\n"}"#
        );
        let t = T { p: bad, o: None };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"p":"a�b\n","o":null}"#
        );
    }
}
