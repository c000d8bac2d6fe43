//! A parser for glibc's linker cache, `etc/ld.so.cache`: which shared
//! library (`libnvidia-ml.so.1`) lives where in a root
//! (`/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1`), as `ldconfig -p`
//! lists it. Backends use it to find a driver's user-space libraries in a
//! driver root the way `nvidia-ctk` does. No I/O here: the caller reads the
//! file (through [`crate::root`]) and hands over its bytes.
//!
//! Three layouts exist, all read (`ldconfig -c FORMAT` writes each):
//!
//! - **new** (`glibc-ld.so.cache1.1`), the only one glibc ≥ 2.32 writes by
//!   default: a 48-byte header, 24-byte entries, then the strings. String
//!   offsets count from the start of this header.
//! - **compat** (glibc ≤ 2.31's default): an old-format table followed, at
//!   the next 8-byte boundary, by a complete new-format cache. The new part
//!   is read and the old table ignored, as the dynamic loader does. (A
//!   4-byte boundary, what a 32-bit x86 ldconfig wrote, is accepted too.)
//! - **old** (`ld.so-1.7.0`) alone: a 16-byte header and 12-byte entries,
//!   string offsets counting from the end of the entry table. Entries carry
//!   no hwcap; it reads as 0.
//!
//! Numbers are in the byte order of the system that wrote the cache. A
//! new-format header records it (flags 2: little-endian, 3: big-endian);
//! when it does not (flags 0, as older ldconfig versions wrote, and always for
//! the old format), the order in which the header's counts fit the file
//! is used, little-endian first. Flags 1 marks a cache ldconfig itself
//! declared invalid: an error, as the loader refuses it.
//!
//! Every count and offset is checked against the length of the input
//! before use: the entry table and the string table the header declares
//! must fit in the file, and each string must start inside it, end with a
//! NUL and be UTF-8. Anything else is an [`Error`] naming what is wrong and
//! at which byte offset, never a panic. Entries come back in file order,
//! as `ldconfig -p` lists them. The glibc-hwcaps extension section is not
//! read (an entry's path already names its `glibc-hwcaps/` subdirectory).

use std::fmt;

/// Mask of the library type bits of an entry's flags.
pub const FLAG_TYPE_MASK: u32 = 0x00ff;
/// Library type: a.out libc4 library.
pub const FLAG_LIBC4: u32 = 0x0000;
/// Library type: ELF library linked against no known libc.
pub const FLAG_ELF: u32 = 0x0001;
/// Library type: ELF library for libc5.
pub const FLAG_ELF_LIBC5: u32 = 0x0002;
/// Library type: ELF library for glibc (libc6).
pub const FLAG_ELF_LIBC6: u32 = 0x0003;
/// Mask of the ABI bits of an entry's flags (0: the platform default).
pub const FLAG_REQUIRED_MASK: u32 = 0xff00;
/// ABI: 64-bit SPARC.
pub const FLAG_SPARC_LIB64: u32 = 0x0100;
/// ABI: IA-64.
pub const FLAG_IA64_LIB64: u32 = 0x0200;
/// ABI: x86-64.
pub const FLAG_X8664_LIB64: u32 = 0x0300;
/// ABI: 64-bit s390.
pub const FLAG_S390_LIB64: u32 = 0x0400;
/// ABI: 64-bit PowerPC.
pub const FLAG_POWERPC_LIB64: u32 = 0x0500;
/// ABI: MIPS64 n32.
pub const FLAG_MIPS64_LIBN32: u32 = 0x0600;
/// ABI: MIPS64 n64.
pub const FLAG_MIPS64_LIBN64: u32 = 0x0700;
/// ABI: x32.
pub const FLAG_X8664_LIBX32: u32 = 0x0800;
/// ABI: 32-bit ARM, hard float.
pub const FLAG_ARM_LIBHF: u32 = 0x0900;
/// ABI: AArch64.
pub const FLAG_AARCH64_LIB64: u32 = 0x0a00;
/// ABI: 32-bit ARM, soft float.
pub const FLAG_ARM_LIBSF: u32 = 0x0b00;
/// ABI: MIPS o32 with 2008 NaN encoding.
pub const FLAG_MIPS_LIB32_NAN2008: u32 = 0x0c00;
/// ABI: MIPS64 n32 with 2008 NaN encoding.
pub const FLAG_MIPS64_LIBN32_NAN2008: u32 = 0x0d00;
/// ABI: MIPS64 n64 with 2008 NaN encoding.
pub const FLAG_MIPS64_LIBN64_NAN2008: u32 = 0x0e00;
/// ABI: RISC-V, soft float.
pub const FLAG_RISCV_FLOAT_ABI_SOFT: u32 = 0x0f00;
/// ABI: RISC-V, double-precision float.
pub const FLAG_RISCV_FLOAT_ABI_DOUBLE: u32 = 0x1000;
/// ABI: LoongArch, soft float.
pub const FLAG_LARCH_FLOAT_ABI_SOFT: u32 = 0x1100;
/// ABI: LoongArch, double-precision float.
pub const FLAG_LARCH_FLOAT_ABI_DOUBLE: u32 = 0x1200;

/// The hwcap bit marking an index into the glibc-hwcaps subdirectories.
const HWCAP_EXTENSION: u64 = 1 << 62;
/// glibc 2.33's x86 ISA level bits, ignored when testing for the above.
const HWCAP_ISA_LEVEL_MASK: u64 = (1 << 10) - 1;

const MAGIC_OLD: &[u8] = b"ld.so-1.7.0";
const MAGIC_NEW: &[u8] = b"glibc-ld.so.cache";
const VERSION_NEW: &[u8] = b"1.1";
/// Old header: 11-byte magic, 1 byte of padding, `nlibs`.
const OLD_HEADER: u64 = 16;
/// Old entry: flags, key, value.
const OLD_ENTRY: u64 = 12;
/// New header: magic, version, nlibs, len_strings, flags, padding,
/// extension_offset, 3 unused words.
const NEW_HEADER: u64 = 48;
/// New entry: flags, key, value, osversion, hwcap.
const NEW_ENTRY: u64 = 24;
/// Offsets inside the new header.
const NEW_VERSION_AT: u64 = 17;
const NEW_NLIBS_AT: u64 = 20;
const NEW_LEN_STRINGS_AT: u64 = 24;
const NEW_FLAGS_AT: u64 = 28;
/// The byte-order values of the new header's flags.
const ENDIAN_MASK: u8 = 3;
const ENDIAN_UNSET: u8 = 0;
const ENDIAN_LITTLE: u8 = 2;
const ENDIAN_BIG: u8 = 3;

/// One library in the cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The name the loader looks up: the library's soname
    /// (`libnvidia-ml.so.1`).
    pub key: String,
    /// Where the library is, as a path in the root the cache describes
    /// (`/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1`).
    pub path: String,
    /// Library type ([`FLAG_TYPE_MASK`]) and ABI ([`FLAG_REQUIRED_MASK`]).
    pub flags: u32,
    /// Hardware capabilities the library needs; 0 for none. See
    /// [`Entry::glibc_hwcaps_index`].
    pub hwcap: u64,
}

impl Entry {
    /// The ABI the library was built for.
    pub fn arch(&self) -> Arch {
        Arch::from_flags(self.flags)
    }

    /// True for an x86-64 library.
    pub fn is_x86_64(&self) -> bool {
        self.arch() == Arch::X86_64
    }

    /// True for an AArch64 library.
    pub fn is_aarch64(&self) -> bool {
        self.arch() == Arch::Aarch64
    }

    /// True for an ELF library for glibc (type [`FLAG_ELF_LIBC6`]).
    pub fn is_libc6(&self) -> bool {
        self.flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6
    }

    /// For a library in a `glibc-hwcaps/NAME/` subdirectory (glibc ≥ 2.33),
    /// the index of `NAME` in the cache's glibc-hwcaps extension section;
    /// `None` for others. The loader prefers such a library over the plain
    /// one with the same key when the CPU supports `NAME`.
    pub fn glibc_hwcaps_index(&self) -> Option<u32> {
        if (self.hwcap >> 32) & !HWCAP_ISA_LEVEL_MASK == HWCAP_EXTENSION >> 32 {
            u32::try_from(self.hwcap & 0xffff_ffff).ok()
        } else {
            None
        }
    }
}

/// The ABI of a library, from the [`FLAG_REQUIRED_MASK`] bits of its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// No ABI bits: the platform's default ABI, for which ldconfig records
    /// none (32-bit x86 on x86-64 hosts, for example).
    Default,
    /// 64-bit SPARC.
    Sparc64,
    /// IA-64.
    Ia64,
    /// x86-64.
    X86_64,
    /// 64-bit s390 (s390x).
    S390x,
    /// 64-bit PowerPC.
    Ppc64,
    /// MIPS64 n32.
    Mips64N32,
    /// MIPS64 n64.
    Mips64N64,
    /// x32.
    X32,
    /// 32-bit ARM, hard float.
    ArmHardFloat,
    /// AArch64.
    Aarch64,
    /// 32-bit ARM, soft float.
    ArmSoftFloat,
    /// MIPS o32, 2008 NaN encoding.
    Mips32Nan2008,
    /// MIPS64 n32, 2008 NaN encoding.
    Mips64N32Nan2008,
    /// MIPS64 n64, 2008 NaN encoding.
    Mips64N64Nan2008,
    /// RISC-V, soft float.
    RiscvSoftFloat,
    /// RISC-V, double-precision float.
    RiscvDoubleFloat,
    /// LoongArch, soft float.
    LoongArchSoftFloat,
    /// LoongArch, double-precision float.
    LoongArchDoubleFloat,
    /// ABI bits glibc does not define (the masked value).
    Unknown(u32),
}

impl Arch {
    /// The ABI named by an entry's flags.
    pub fn from_flags(flags: u32) -> Arch {
        match flags & FLAG_REQUIRED_MASK {
            0 => Arch::Default,
            FLAG_SPARC_LIB64 => Arch::Sparc64,
            FLAG_IA64_LIB64 => Arch::Ia64,
            FLAG_X8664_LIB64 => Arch::X86_64,
            FLAG_S390_LIB64 => Arch::S390x,
            FLAG_POWERPC_LIB64 => Arch::Ppc64,
            FLAG_MIPS64_LIBN32 => Arch::Mips64N32,
            FLAG_MIPS64_LIBN64 => Arch::Mips64N64,
            FLAG_X8664_LIBX32 => Arch::X32,
            FLAG_ARM_LIBHF => Arch::ArmHardFloat,
            FLAG_AARCH64_LIB64 => Arch::Aarch64,
            FLAG_ARM_LIBSF => Arch::ArmSoftFloat,
            FLAG_MIPS_LIB32_NAN2008 => Arch::Mips32Nan2008,
            FLAG_MIPS64_LIBN32_NAN2008 => Arch::Mips64N32Nan2008,
            FLAG_MIPS64_LIBN64_NAN2008 => Arch::Mips64N64Nan2008,
            FLAG_RISCV_FLOAT_ABI_SOFT => Arch::RiscvSoftFloat,
            FLAG_RISCV_FLOAT_ABI_DOUBLE => Arch::RiscvDoubleFloat,
            FLAG_LARCH_FLOAT_ABI_SOFT => Arch::LoongArchSoftFloat,
            FLAG_LARCH_FLOAT_ABI_DOUBLE => Arch::LoongArchDoubleFloat,
            other => Arch::Unknown(other),
        }
    }

    /// The ABI ldconfig records for this program's own 64-bit target
    /// (x86-64, AArch64, ppc64, s390x), or `None` elsewhere.
    pub fn native() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else if cfg!(target_arch = "powerpc64") {
            Some(Arch::Ppc64)
        } else if cfg!(target_arch = "s390x") {
            Some(Arch::S390x)
        } else {
            None
        }
    }
}

/// Which string of an entry an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The key (soname).
    Key,
    /// The value (path).
    Path,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Key => "key",
            Field::Path => "path",
        })
    }
}

/// Why bytes could not be read as a linker cache. Byte offsets count from
/// the start of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No bytes at all.
    #[error("empty file (expected a glibc ld.so.cache)")]
    Empty,
    /// Neither magic string.
    #[error(
        "not a glibc ld.so.cache: expected \"glibc-ld.so.cache1.1\" or \"ld.so-1.7.0\" at byte 0, found \"{found}\""
    )]
    BadMagic {
        /// The first bytes of the file, escaped.
        found: String,
    },
    /// A new-format header with a version other than 1.1.
    #[error("unsupported ld.so.cache version \"{found}\" at byte {at} (expected \"1.1\")")]
    Version {
        /// The version bytes, escaped.
        found: String,
        /// Where they are.
        at: u64,
    },
    /// A new-format header whose byte-order flag says ldconfig found the
    /// cache invalid.
    #[error(
        "byte-order flag at byte {at} is {flags:#04x}, which marks the cache invalid (expected 0x02 little-endian or 0x03 big-endian)"
    )]
    InvalidByteOrder {
        /// Where the flags byte is.
        at: u64,
        /// Its value.
        flags: u8,
    },
    /// The file ends inside a header.
    #[error("truncated: the {what} at byte {at} needs {size} bytes, the file has {len}")]
    Header {
        /// `"new-format header"` or `"old-format header"`.
        what: &'static str,
        /// Where the header starts.
        at: u64,
        /// Its size.
        size: u64,
        /// The file size.
        len: u64,
    },
    /// The entry table does not fit in the file.
    #[error(
        "{count} {format} entries of {size} bytes at byte {at} extend past the end of the file ({len} bytes)"
    )]
    Entries {
        /// `"new-format"` or `"old-format"`.
        format: &'static str,
        /// The entry count the header gives.
        count: u32,
        /// The size of one entry.
        size: u64,
        /// Where the table starts.
        at: u64,
        /// The file size.
        len: u64,
    },
    /// The string table does not fit in the file.
    #[error(
        "string table of {size} bytes at byte {at} extends past the end of the file ({len} bytes)"
    )]
    StringTable {
        /// The size the header gives.
        size: u32,
        /// Where the table starts.
        at: u64,
        /// The file size.
        len: u64,
    },
    /// A string offset points past the end of the file.
    #[error(
        "entry {index} (byte {entry_at}): {field} string at byte {at} is past the end of the file ({len} bytes)"
    )]
    StringPastEnd {
        /// The entry's index, from 0.
        index: u32,
        /// Where the entry is.
        entry_at: u64,
        /// Which string.
        field: Field,
        /// Where the string would start.
        at: u64,
        /// The file size.
        len: u64,
    },
    /// A string runs to the end of the file without a NUL.
    #[error(
        "entry {index} (byte {entry_at}): {field} string at byte {at} has no NUL terminator before the end of the file"
    )]
    Unterminated {
        /// The entry's index, from 0.
        index: u32,
        /// Where the entry is.
        entry_at: u64,
        /// Which string.
        field: Field,
        /// Where the string starts.
        at: u64,
    },
    /// A string is not UTF-8.
    #[error("entry {index} (byte {entry_at}): {field} string at byte {at} is not UTF-8")]
    NotUtf8 {
        /// The entry's index, from 0.
        index: u32,
        /// Where the entry is.
        entry_at: u64,
        /// Which string.
        field: Field,
        /// Where the string starts.
        at: u64,
    },
}

/// Parses a linker cache in any of the three layouts (see the module docs).
///
/// # Errors
/// [`Error`] for empty input, an unknown magic or version, a cache marked
/// invalid, a header, table or string that does not fit in the input, a
/// string without NUL terminator or one that is not UTF-8.
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry>, Error> {
    let input = Input(bytes);
    if bytes.is_empty() {
        return Err(Error::Empty);
    }
    if bytes.starts_with(MAGIC_NEW) || MAGIC_NEW.starts_with(bytes) {
        return parse_new(input, 0);
    }
    if bytes.starts_with(MAGIC_OLD) || MAGIC_OLD.starts_with(bytes) {
        return parse_old(input);
    }
    Err(Error::BadMagic {
        found: escape(bytes.get(..20).unwrap_or(bytes)),
    })
}

/// The bytes being parsed, read through bounds-checked accessors. All
/// positions are `u64`, so no sum of a position and a 32-bit count or
/// offset from the file can overflow.
#[derive(Clone, Copy)]
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn len(self) -> u64 {
        // usize is at most 64 bits on every target Rust supports.
        u64::try_from(self.0.len()).unwrap_or(u64::MAX)
    }

    /// `size` bytes at `at`, if all are inside the input.
    fn slice(self, at: u64, size: u64) -> Option<&'a [u8]> {
        let start = usize::try_from(at).ok()?;
        let end = usize::try_from(at.checked_add(size)?).ok()?;
        self.0.get(start..end)
    }

    /// Everything from `at` on.
    fn rest(self, at: u64) -> Option<&'a [u8]> {
        self.0.get(usize::try_from(at).ok()?..)
    }

    fn array<const N: usize>(self, at: u64) -> Option<[u8; N]> {
        self.slice(at, N as u64)?.try_into().ok()
    }
}

/// The byte order of the numbers in a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u32(self, input: Input<'_>, at: u64) -> Option<u32> {
        let b = input.array::<4>(at)?;
        Some(match self {
            Order::Little => u32::from_le_bytes(b),
            Order::Big => u32::from_be_bytes(b),
        })
    }

    fn u64(self, input: Input<'_>, at: u64) -> Option<u64> {
        let b = input.array::<8>(at)?;
        Some(match self {
            Order::Little => u64::from_le_bytes(b),
            Order::Big => u64::from_be_bytes(b),
        })
    }
}

/// Parses the new-format cache whose header starts at `base`.
fn parse_new(input: Input<'_>, base: u64) -> Result<Vec<Entry>, Error> {
    let len = input.len();
    let truncated = || Error::Header {
        what: "new-format header",
        at: base,
        size: NEW_HEADER,
        len,
    };
    input.slice(base, NEW_HEADER).ok_or_else(truncated)?;
    let version_at = base + NEW_VERSION_AT;
    let version = input
        .slice(version_at, VERSION_NEW.len() as u64)
        .ok_or_else(truncated)?;
    if version != VERSION_NEW {
        return Err(Error::Version {
            found: escape(version),
            at: version_at,
        });
    }
    let flags_at = base + NEW_FLAGS_AT;
    let [flags] = input.array::<1>(flags_at).ok_or_else(truncated)?;
    let fits = |order: Order| -> Result<(u32, u32), Error> {
        let nlibs = order
            .u32(input, base + NEW_NLIBS_AT)
            .ok_or_else(truncated)?;
        let len_strings = order
            .u32(input, base + NEW_LEN_STRINGS_AT)
            .ok_or_else(truncated)?;
        let table_at = base + NEW_HEADER;
        let strings_at = table_at + u64::from(nlibs) * NEW_ENTRY;
        if strings_at > len {
            return Err(Error::Entries {
                format: "new-format",
                count: nlibs,
                size: NEW_ENTRY,
                at: table_at,
                len,
            });
        }
        if strings_at + u64::from(len_strings) > len {
            return Err(Error::StringTable {
                size: len_strings,
                at: strings_at,
                len,
            });
        }
        Ok((nlibs, len_strings))
    };
    let (order, nlibs) = match flags & ENDIAN_MASK {
        ENDIAN_LITTLE => (Order::Little, fits(Order::Little)?.0),
        ENDIAN_BIG => (Order::Big, fits(Order::Big)?.0),
        ENDIAN_UNSET => match (fits(Order::Little), fits(Order::Big)) {
            (Ok((n, _)), _) => (Order::Little, n),
            (Err(_), Ok((n, _))) => (Order::Big, n),
            (Err(e), Err(_)) => return Err(e),
        },
        _ => {
            return Err(Error::InvalidByteOrder {
                at: flags_at,
                flags,
            });
        }
    };
    let table_at = base + NEW_HEADER;
    // Bounded by the file size: the table fits, checked above.
    let mut entries = Vec::with_capacity(usize::try_from(nlibs).unwrap_or(0));
    for index in 0..nlibs {
        let at = table_at + u64::from(index) * NEW_ENTRY;
        let word = |off: u64| order.u32(input, at + off).ok_or_else(truncated);
        let flags = word(0)?;
        let key = word(4)?;
        let value = word(8)?;
        let hwcap = order.u64(input, at + 16).ok_or_else(truncated)?;
        let string = |field, offset: u32| read_string(input, base, offset, index, at, field);
        entries.push(Entry {
            key: string(Field::Key, key)?,
            path: string(Field::Path, value)?,
            flags,
            hwcap,
        });
    }
    Ok(entries)
}

/// Parses a file starting with the old magic: the new-format cache after
/// the old table when there is one, the old table otherwise.
fn parse_old(input: Input<'_>) -> Result<Vec<Entry>, Error> {
    let len = input.len();
    let truncated = || Error::Header {
        what: "old-format header",
        at: 0,
        size: OLD_HEADER,
        len,
    };
    input.slice(0, OLD_HEADER).ok_or_else(truncated)?;
    let nlibs_at = OLD_HEADER - 4;
    let le = Order::Little.u32(input, nlibs_at).ok_or_else(truncated)?;
    let be = Order::Big.u32(input, nlibs_at).ok_or_else(truncated)?;
    let table_end = |nlibs: u32| OLD_HEADER + u64::from(nlibs) * OLD_ENTRY;
    // The new format follows at the next 8-byte boundary (4 for a 32-bit
    // x86 ldconfig); its magic says which count, and so which order, holds.
    for nlibs in [le, be] {
        let end = table_end(nlibs);
        for at in [end.next_multiple_of(8), end] {
            if input.slice(at, MAGIC_NEW.len() as u64) == Some(MAGIC_NEW) {
                return parse_new(input, at);
            }
        }
    }
    let (order, nlibs) = if table_end(le) <= len || table_end(be) > len {
        (Order::Little, le)
    } else {
        (Order::Big, be)
    };
    let strings_at = table_end(nlibs);
    if strings_at > len {
        return Err(Error::Entries {
            format: "old-format",
            count: nlibs,
            size: OLD_ENTRY,
            at: OLD_HEADER,
            len,
        });
    }
    // Bounded by the file size: the table fits, checked above.
    let mut entries = Vec::with_capacity(usize::try_from(nlibs).unwrap_or(0));
    for index in 0..nlibs {
        let at = OLD_HEADER + u64::from(index) * OLD_ENTRY;
        let word = |off: u64| order.u32(input, at + off).ok_or_else(truncated);
        let flags = word(0)?;
        let key = word(4)?;
        let value = word(8)?;
        let string = |field, offset: u32| read_string(input, strings_at, offset, index, at, field);
        entries.push(Entry {
            key: string(Field::Key, key)?,
            path: string(Field::Path, value)?,
            flags,
            hwcap: 0,
        });
    }
    Ok(entries)
}

/// The NUL-terminated UTF-8 string at `base + offset`.
fn read_string(
    input: Input<'_>,
    base: u64,
    offset: u32,
    index: u32,
    entry_at: u64,
    field: Field,
) -> Result<String, Error> {
    let at = base + u64::from(offset);
    let rest = input
        .rest(at)
        .filter(|r| !r.is_empty())
        .ok_or(Error::StringPastEnd {
            index,
            entry_at,
            field,
            at,
            len: input.len(),
        })?;
    let nul = rest
        .iter()
        .position(|b| *b == 0)
        .ok_or(Error::Unterminated {
            index,
            entry_at,
            field,
            at,
        })?;
    let text = rest.get(..nul).unwrap_or_default();
    std::str::from_utf8(text)
        .map(str::to_owned)
        .map_err(|_| Error::NotUtf8 {
            index,
            entry_at,
            field,
            at,
        })
}

/// Bytes for an error message: printable ASCII as is, the rest escaped.
fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

#[cfg(test)]
mod tests;
