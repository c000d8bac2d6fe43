//! Tests of the linker cache parser: against real caches written by the
//! system's `ldconfig` in all three layouts (the authority on the format),
//! every prefix of them, hand-built corrupt caches with their exact error
//! messages, and properties over arbitrary bytes.

use super::*;

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use proptest::prelude::*;
use tempfile::TempDir;

// ------------------------------------------------- hand-built caches

/// A library to put in a hand-built cache.
#[derive(Debug, Clone)]
struct Lib {
    flags: u32,
    key: String,
    path: String,
    hwcap: u64,
}

fn lib(key: &str, path: &str) -> Lib {
    Lib {
        flags: FLAG_ELF_LIBC6 | FLAG_X8664_LIB64,
        key: key.into(),
        path: path.into(),
        hwcap: 0,
    }
}

/// The three layouts `ldconfig -c` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    New,
    Compat,
    Old,
}

fn put32(out: &mut Vec<u8>, order: Order, v: u32) {
    out.extend(match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    });
}

fn put64(out: &mut Vec<u8>, order: Order, v: u64) {
    out.extend(match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    });
}

/// Strings `key\0path\0` for each library, and each one's offsets in them.
fn strings(libs: &[Lib]) -> (Vec<u8>, Vec<(u32, u32)>) {
    let mut table = Vec::new();
    let mut offsets = Vec::new();
    for l in libs {
        let key = table.len() as u32;
        table.extend(l.key.as_bytes());
        table.push(0);
        let path = table.len() as u32;
        table.extend(l.path.as_bytes());
        table.push(0);
        offsets.push((key, path));
    }
    (table, offsets)
}

/// A new-format cache as ldconfig lays it out, `endian` in its flags.
fn new_cache(libs: &[Lib], order: Order, endian: u8) -> Vec<u8> {
    let (table, offsets) = strings(libs);
    let strings_at = (48 + 24 * libs.len()) as u32;
    let mut out = b"glibc-ld.so.cache1.1".to_vec();
    put32(&mut out, order, libs.len() as u32);
    put32(&mut out, order, table.len() as u32);
    out.extend([endian, 0, 0, 0]);
    out.extend([0; 16]); // extension_offset, unused
    for (l, (key, path)) in libs.iter().zip(&offsets) {
        put32(&mut out, order, l.flags);
        put32(&mut out, order, strings_at + key);
        put32(&mut out, order, strings_at + path);
        put32(&mut out, order, 0);
        put64(&mut out, order, l.hwcap);
    }
    out.extend(table);
    out
}

/// An old-format table, followed for `Layout::Compat` by a new-format
/// cache at the next multiple of `align`, holding the strings of both.
fn old_cache(libs: &[Lib], order: Order, layout: Layout, align: usize) -> Vec<u8> {
    let mut out = b"ld.so-1.7.0\0".to_vec();
    put32(&mut out, order, libs.len() as u32);
    let old_end = 16 + 12 * libs.len();
    let new_at = old_end.next_multiple_of(align);
    let (table, offsets) = strings(libs);
    // Old string offsets count from the end of the old table.
    let skip = if layout == Layout::Compat {
        (new_at - old_end + 48 + 24 * libs.len()) as u32
    } else {
        0
    };
    for (l, (key, path)) in libs.iter().zip(&offsets) {
        put32(&mut out, order, l.flags);
        put32(&mut out, order, skip + key);
        put32(&mut out, order, skip + path);
    }
    if layout == Layout::Compat {
        out.resize(new_at, 0);
        out.extend(new_cache(libs, order, ENDIAN_UNSET));
    } else {
        out.extend(table);
    }
    out
}

fn build(libs: &[Lib], layout: Layout, order: Order) -> Vec<u8> {
    match layout {
        Layout::New => new_cache(
            libs,
            order,
            match order {
                Order::Little => ENDIAN_LITTLE,
                Order::Big => ENDIAN_BIG,
            },
        ),
        Layout::Compat | Layout::Old => old_cache(libs, order, layout, 8),
    }
}

/// What `parse` should return for hand-built libraries.
fn expected(libs: &[Lib], layout: Layout) -> Vec<Entry> {
    libs.iter()
        .map(|l| Entry {
            key: l.key.clone(),
            path: l.path.clone(),
            flags: l.flags,
            hwcap: if layout == Layout::Old { 0 } else { l.hwcap },
        })
        .collect()
}

fn err(bytes: &[u8]) -> String {
    match parse(bytes) {
        Ok(entries) => format!("parsed {entries:?}"),
        Err(e) => e.to_string(),
    }
}

fn sample() -> Vec<Lib> {
    vec![
        lib(
            "libnvidia-ml.so.1",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        ),
        Lib {
            flags: FLAG_ELF_LIBC6 | FLAG_X8664_LIB64,
            hwcap: HWCAP_EXTENSION | 2,
            ..lib(
                "libcuda.so.1",
                "/usr/lib/glibc-hwcaps/x86-64-v3/libcuda.so.1",
            )
        },
        Lib {
            flags: FLAG_ELF_LIBC6,
            ..lib("libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1")
        },
    ]
}

// ------------------------------------------------- hand-built: good

#[test]
fn every_layout_and_byte_order_reads_the_same() {
    let libs = sample();
    for layout in [Layout::New, Layout::Compat, Layout::Old] {
        for order in [Order::Little, Order::Big] {
            let bytes = build(&libs, layout, order);
            assert_eq!(
                parse(&bytes),
                Ok(expected(&libs, layout)),
                "{layout:?} {order:?}"
            );
        }
    }
}

#[test]
fn unset_byte_order_is_the_one_that_fits() {
    let libs = sample();
    for order in [Order::Little, Order::Big] {
        let bytes = new_cache(&libs, order, ENDIAN_UNSET);
        assert_eq!(parse(&bytes), Ok(expected(&libs, Layout::New)), "{order:?}");
    }
}

#[test]
fn compat_new_part_on_a_4_byte_boundary_is_found() {
    // 1 old entry: the old table ends at byte 28, a 32-bit x86 ldconfig
    // put the new header there, not at 32.
    let libs = vec![lib("libc.so.6", "/lib/libc.so.6")];
    let bytes = old_cache(&libs, Order::Little, Layout::Compat, 4);
    assert_eq!(bytes.get(28..45), Some(MAGIC_NEW));
    assert_eq!(parse(&bytes), Ok(expected(&libs, Layout::Compat)));
}

#[test]
fn compat_reads_the_new_part_not_the_old_table() {
    let libs = sample();
    let mut bytes = build(&libs, Layout::Compat, Order::Little);
    // Break the old table's first key offset: the loader never reads it.
    bytes[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(parse(&bytes), Ok(expected(&libs, Layout::Compat)));
}

#[test]
fn empty_cache_and_empty_strings() {
    for layout in [Layout::New, Layout::Compat, Layout::Old] {
        assert_eq!(parse(&build(&[], layout, Order::Little)), Ok(vec![]));
    }
    let libs = vec![lib("", "")];
    assert_eq!(
        parse(&build(&libs, Layout::New, Order::Little)),
        Ok(expected(&libs, Layout::New))
    );
}

#[test]
fn flags_classify() {
    let e = |flags: u32, hwcap: u64| Entry {
        key: "k".into(),
        path: "/p".into(),
        flags,
        hwcap,
    };
    let x = e(0x0303, 0);
    assert!(x.is_x86_64() && x.is_libc6() && !x.is_aarch64());
    assert_eq!(x.arch(), Arch::X86_64);
    let a = e(0x0a03, 0);
    assert!(a.is_aarch64() && a.is_libc6() && !a.is_x86_64());
    let i386 = e(0x0003, 0);
    assert_eq!(i386.arch(), Arch::Default);
    assert!(i386.is_libc6() && !i386.is_x86_64());
    assert!(!e(0x0301, 0).is_libc6());
    assert_eq!(e(0x0301, 0).arch(), Arch::X86_64);
    for (flags, arch) in [
        (FLAG_SPARC_LIB64, Arch::Sparc64),
        (FLAG_IA64_LIB64, Arch::Ia64),
        (FLAG_S390_LIB64, Arch::S390x),
        (FLAG_POWERPC_LIB64, Arch::Ppc64),
        (FLAG_MIPS64_LIBN32, Arch::Mips64N32),
        (FLAG_MIPS64_LIBN64, Arch::Mips64N64),
        (FLAG_X8664_LIBX32, Arch::X32),
        (FLAG_ARM_LIBHF, Arch::ArmHardFloat),
        (FLAG_ARM_LIBSF, Arch::ArmSoftFloat),
        (FLAG_MIPS_LIB32_NAN2008, Arch::Mips32Nan2008),
        (FLAG_MIPS64_LIBN32_NAN2008, Arch::Mips64N32Nan2008),
        (FLAG_MIPS64_LIBN64_NAN2008, Arch::Mips64N64Nan2008),
        (FLAG_RISCV_FLOAT_ABI_SOFT, Arch::RiscvSoftFloat),
        (FLAG_RISCV_FLOAT_ABI_DOUBLE, Arch::RiscvDoubleFloat),
        (FLAG_LARCH_FLOAT_ABI_SOFT, Arch::LoongArchSoftFloat),
        (FLAG_LARCH_FLOAT_ABI_DOUBLE, Arch::LoongArchDoubleFloat),
        (0x1300, Arch::Unknown(0x1300)),
    ] {
        assert_eq!(Arch::from_flags(flags | FLAG_ELF_LIBC6), arch);
    }
    // glibc-hwcaps index: bit 62, ignoring glibc 2.33's ISA level bits.
    assert_eq!(e(0x0303, (1 << 62) | 7).glibc_hwcaps_index(), Some(7));
    assert_eq!(
        e(0x0303, (1 << 62) | (3 << 32) | 1).glibc_hwcaps_index(),
        Some(1)
    );
    assert_eq!(e(0x0303, 0).glibc_hwcaps_index(), None);
    assert_eq!(e(0x0303, (1 << 63) | (1 << 62)).glibc_hwcaps_index(), None);
    assert_eq!(e(0x0303, 0x8).glibc_hwcaps_index(), None);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(Arch::native(), Some(Arch::X86_64));
    }
}

// ------------------------------------------------- hand-built: bad

#[test]
fn empty_input_and_wrong_magic() {
    assert_eq!(err(b""), "empty file (expected a glibc ld.so.cache)");
    assert_eq!(
        err(b"\x7fELF\x02\x01\x01\0"),
        r#"not a glibc ld.so.cache: expected "glibc-ld.so.cache1.1" or "ld.so-1.7.0" at byte 0, found "\x7fELF\x02\x01\x01\x00""#
    );
    assert_eq!(
        err(b"# ld.so.conf: include /etc/ld.so.conf.d/*.conf and much more"),
        r##"not a glibc ld.so.cache: expected "glibc-ld.so.cache1.1" or "ld.so-1.7.0" at byte 0, found "# ld.so.conf: includ""##
    );
    assert_eq!(
        err(b"glibc-ld.so.cachX"),
        r#"not a glibc ld.so.cache: expected "glibc-ld.so.cache1.1" or "ld.so-1.7.0" at byte 0, found "glibc-ld.so.cachX""#
    );
}

#[test]
fn truncated_headers() {
    assert_eq!(
        err(b"g"),
        "truncated: the new-format header at byte 0 needs 48 bytes, the file has 1"
    );
    assert_eq!(
        err(b"glibc-ld.so.cache1.1"),
        "truncated: the new-format header at byte 0 needs 48 bytes, the file has 20"
    );
    assert_eq!(
        err(b"ld.so-1."),
        "truncated: the old-format header at byte 0 needs 16 bytes, the file has 8"
    );
    // A compat file cut inside its new header.
    let bytes = build(&sample(), Layout::Compat, Order::Little);
    // 3 old entries end at byte 52; the new header is at 56.
    assert_eq!(bytes.get(56..73), Some(MAGIC_NEW));
    assert_eq!(
        err(&bytes[..80]),
        "truncated: the new-format header at byte 56 needs 48 bytes, the file has 80"
    );
}

#[test]
fn bad_version_and_byte_order() {
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    bytes[17..20].copy_from_slice(b"2.\n");
    assert_eq!(
        err(&bytes),
        r#"unsupported ld.so.cache version "2.\n" at byte 17 (expected "1.1")"#
    );
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    bytes[28] = 1;
    assert_eq!(
        err(&bytes),
        "byte-order flag at byte 28 is 0x01, which marks the cache invalid (expected 0x02 little-endian or 0x03 big-endian)"
    );
    // The flag is believed: a little-endian file flagged big does not fit.
    bytes[28] = ENDIAN_BIG;
    assert_eq!(
        err(&bytes),
        "50331648 new-format entries of 24 bytes at byte 48 extend past the end of the file (290 bytes)"
    );
    // Unused flag bits are ignored.
    bytes[28] = 0xf0 | ENDIAN_LITTLE;
    assert!(parse(&bytes).is_ok());
}

#[test]
fn counts_past_the_end() {
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    let len = bytes.len();
    bytes[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "4294967295 new-format entries of 24 bytes at byte 48 extend past the end of the file ({len} bytes)"
        )
    );
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    bytes[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "string table of 4294967295 bytes at byte 120 extends past the end of the file ({len} bytes)"
        )
    );
    // One byte short.
    let bytes = build(&sample(), Layout::New, Order::Little);
    assert_eq!(
        err(&bytes[..len - 1]),
        format!(
            "string table of 170 bytes at byte 120 extends past the end of the file ({} bytes)",
            len - 1
        )
    );
    // Neither byte order fits an old-only count: reported little-endian.
    let mut bytes = build(&sample(), Layout::Old, Order::Little);
    let len = bytes.len();
    bytes[12..16].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    assert_eq!(
        err(&bytes),
        format!(
            "2147483647 old-format entries of 12 bytes at byte 16 extend past the end of the file ({len} bytes)"
        )
    );
}

#[test]
fn string_offsets_past_the_end() {
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    let len = bytes.len();
    // Entry 1's key offset (entry at 48 + 24 = 72, key at +4).
    bytes[76..80].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "entry 1 (byte 72): key string at byte 4294967295 is past the end of the file ({len} bytes)"
        )
    );
    // Exactly the end of the file is past it too.
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    bytes[56..60].copy_from_slice(&(len as u32).to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "entry 0 (byte 48): path string at byte {len} is past the end of the file ({len} bytes)"
        )
    );
    // In a compat file, offsets count from the new header (here at 56) and
    // errors give file offsets.
    let mut bytes = build(&sample(), Layout::Compat, Order::Little);
    let len = bytes.len() as u64;
    bytes[56 + 48 + 4..56 + 48 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "entry 0 (byte 104): key string at byte {} is past the end of the file ({len} bytes)",
            56 + u64::from(u32::MAX)
        )
    );
    // Old format: offsets count from the end of the old table (byte 52).
    let mut bytes = build(&sample(), Layout::Old, Order::Little);
    let len = bytes.len();
    bytes[16 + 12 * 2 + 8..16 + 12 * 2 + 12].copy_from_slice(&1000u32.to_le_bytes());
    assert_eq!(
        err(&bytes),
        format!(
            "entry 2 (byte 40): path string at byte 1052 is past the end of the file ({len} bytes)"
        )
    );
}

#[test]
fn unterminated_and_non_utf8_strings() {
    // The last path loses its NUL (and the string table its last byte).
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    bytes.pop();
    let len_strings = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    bytes[24..28].copy_from_slice(&(len_strings - 1).to_le_bytes());
    let at = bytes.len() - "/usr/lib/i386-linux-gnu/libcuda.so.1".len();
    assert_eq!(
        err(&bytes),
        format!(
            "entry 2 (byte 96): path string at byte {at} has no NUL terminator before the end of the file"
        )
    );
    // A key with a byte that is not UTF-8.
    let mut bytes = build(&sample(), Layout::New, Order::Little);
    assert_eq!(&bytes[120..123], b"lib");
    bytes[121] = 0xff;
    assert_eq!(
        err(&bytes),
        "entry 0 (byte 48): key string at byte 120 is not UTF-8"
    );
    let mut bytes = build(&sample(), Layout::Old, Order::Little);
    let path_at = 52 + "libnvidia-ml.so.1".len() + 1;
    bytes[path_at + 1] = 0xc3; // a lead byte without continuation
    assert_eq!(
        err(&bytes),
        format!("entry 0 (byte 16): path string at byte {path_at} is not UTF-8")
    );
}

// ------------------------------------------------- real caches

/// A cache `ldconfig -c FORMAT` wrote, and what `ldconfig -p` printed.
struct Real {
    layout: Layout,
    bytes: Vec<u8>,
    printed: String,
}

/// The soname → path pairs every real cache must hold: the libraries
/// [`real_caches`] builds (ldconfig lists the `.so` dev link too).
const REAL_PAIRS: &[(&str, &str)] = &[
    ("libnvidia-ml.so.1", "/opt/nvidia/lib/libnvidia-ml.so.1"),
    ("libnvidia-ml.so", "/opt/nvidia/lib/libnvidia-ml.so"),
    ("libcuda.so.1", "/opt/nvidia/lib/libcuda.so.1"),
    (
        "libcuda.so.1",
        "/opt/nvidia/lib/glibc-hwcaps/x86-64-v3/libcuda.so.1",
    ),
    ("libcuda.so.1", "/opt/other/libcuda.so.1"),
    (
        "libnvidia-ptxjitcompiler.so.1",
        "/opt/nvidia/lib/libnvidia-ptxjitcompiler.so.1",
    ),
    ("libnosoname.so", "/opt/nvidia/lib/libnosoname.so"),
    ("libdrïver.so.1", "/opt/drïver/libdrïver.so.1"),
];

/// A directory name long enough to push string offsets past a byte.
fn deep_dir() -> String {
    format!("/opt/{}", "d".repeat(200))
}

fn ldconfig() -> PathBuf {
    ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "ldconfig not found at /sbin/ldconfig or /usr/sbin/ldconfig: \
                 the real-cache tests need glibc's (Debian package libc-bin)"
            )
        })
}

/// Runs a command, failing the test with its output when it fails.
fn run(cmd: &mut Command, install: &str) -> String {
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("{:?} not found: {install}", cmd.get_program())
        }
        Err(e) => panic!("cannot run {cmd:?}: {e}"),
    };
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Builds a tiny ELF shared object with the system C compiler. No libc is
/// linked, so the compiler alone (and binutils) is enough.
fn shared_object(src: &Path, out: &Path, soname: Option<&str>) {
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut cmd = Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-nostdlib", "-o"])
        .arg(out)
        .arg(src);
    if let Some(soname) = soname {
        cmd.arg(format!("-Wl,-soname,{soname}"));
    }
    run(
        &mut cmd,
        "the real-cache tests build shared objects with the system C compiler (Debian package gcc)",
    );
}

/// A driver root with fake NVIDIA libraries, cached by the system's
/// `ldconfig -r ROOT` (which needs no privileges: paths are resolved under
/// ROOT and the cache records host paths) in each layout. Built once.
fn real_caches() -> &'static [Real] {
    static REAL: OnceLock<Vec<Real>> = OnceLock::new();
    REAL.get_or_init(|| {
        let ldconfig = ldconfig();
        let tmp = TempDir::new().unwrap();
        let root = tmp.path().join("root");
        let src = tmp.path().join("x.c");
        fs::write(&src, "int nvmlInit(void) { return 0; }\n").unwrap();
        let under = |host: &str| root.join(host.trim_start_matches('/'));
        let nv = "/opt/nvidia/lib";
        for (file, soname) in [
            ("libnvidia-ml.so.570.86.15", "libnvidia-ml.so.1"),
            ("libcuda.so.570.86.15", "libcuda.so.1"),
            (
                "libnvidia-ptxjitcompiler.so.570.86.15",
                "libnvidia-ptxjitcompiler.so.1",
            ),
        ] {
            shared_object(&src, &under(&format!("{nv}/{file}")), Some(soname));
            symlink(file, under(&format!("{nv}/{soname}"))).unwrap();
        }
        symlink("libnvidia-ml.so.1", under(&format!("{nv}/libnvidia-ml.so"))).unwrap();
        shared_object(
            &src,
            &under(&format!("{nv}/glibc-hwcaps/x86-64-v3/libcuda.so.1")),
            Some("libcuda.so.1"),
        );
        shared_object(&src, &under(&format!("{nv}/libnosoname.so")), None);
        shared_object(
            &src,
            &under("/opt/other/libcuda.so.1"),
            Some("libcuda.so.1"),
        );
        shared_object(
            &src,
            &under("/opt/drïver/libdrïver.so.1"),
            Some("libdrïver.so.1"),
        );
        let deep = deep_dir();
        shared_object(
            &src,
            &under(&format!("{deep}/libdeep.so.1")),
            Some("libdeep.so.1"),
        );
        fs::create_dir_all(under("/etc")).unwrap();
        fs::write(
            under("/etc/ld.so.conf"),
            format!("{nv}\n/opt/other\n/opt/drïver\n{deep}\n"),
        )
        .unwrap();

        [
            (Layout::New, "new"),
            (Layout::Compat, "compat"),
            (Layout::Old, "old"),
        ]
        .into_iter()
        .map(|(layout, format)| {
            let cache = format!("/etc/ld.so.cache.{format}");
            // -X: leave the links as built; -i: no aux cache.
            run(
                Command::new(&ldconfig)
                    .args(["-X", "-i", "-c", format, "-f", "/etc/ld.so.conf", "-C"])
                    .arg(&cache)
                    .arg("-r")
                    .arg(&root),
                "",
            );
            let disk = under(&cache);
            let printed = run(Command::new(&ldconfig).arg("-p").arg("-C").arg(&disk), "");
            Real {
                layout,
                bytes: fs::read(&disk).unwrap(),
                printed,
            }
        })
        .collect()
    })
}

/// ldconfig's words for an entry's flags (`libc6,x86-64`), as its
/// `print_entry` writes them.
fn ldconfig_flags(e: &Entry) -> String {
    let kind = match e.flags & FLAG_TYPE_MASK {
        FLAG_LIBC4 => "libc4".to_string(),
        FLAG_ELF => "ELF".to_string(),
        FLAG_ELF_LIBC5 => "libc5".to_string(),
        FLAG_ELF_LIBC6 => "libc6".to_string(),
        other => format!("unknown({other:#x})"),
    };
    let abi = match e.arch() {
        Arch::Default => String::new(),
        Arch::Sparc64 | Arch::S390x | Arch::Ppc64 | Arch::Mips64N64 => ",64bit".into(),
        Arch::Ia64 => ",IA-64".into(),
        Arch::X86_64 => ",x86-64".into(),
        Arch::Mips64N32 => ",N32".into(),
        Arch::X32 => ",x32".into(),
        Arch::ArmHardFloat => ",hard-float".into(),
        Arch::Aarch64 => ",AArch64".into(),
        Arch::ArmSoftFloat | Arch::RiscvSoftFloat | Arch::LoongArchSoftFloat => {
            ",soft-float".into()
        }
        Arch::Mips32Nan2008 => ",nan2008".into(),
        Arch::Mips64N32Nan2008 => ",N32,nan2008".into(),
        Arch::Mips64N64Nan2008 => ",64bit,nan2008".into(),
        Arch::RiscvDoubleFloat | Arch::LoongArchDoubleFloat => ",double-float".into(),
        Arch::Unknown(v) => format!(",{v}"),
    };
    kind + &abi
}

/// One `ldconfig -p` line, `\tKEY (FLAGS[, hwcap: H]) => PATH`, split.
#[derive(Debug, PartialEq, Eq)]
struct Printed {
    key: String,
    flags: String,
    hwcap: Option<String>,
    path: String,
}

/// The count in `ldconfig -p`'s first line and the entries it lists.
fn printed(text: &str) -> (usize, Vec<Printed>) {
    let mut lines = text.lines();
    let first = lines.next().expect("ldconfig -p printed nothing");
    let count = first
        .split_once(" libs found in cache ")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line from ldconfig -p: {first:?}"));
    let entries = lines
        .filter_map(|l| l.strip_prefix('\t'))
        .map(|l| {
            let (key, rest) = l.split_once(" (").expect("KEY (");
            let (desc, path) = rest.rsplit_once(") => ").expect(") => PATH");
            let (flags, hwcap) = match desc.split_once(", hwcap: ") {
                Some((f, h)) => (f, Some(h.to_string())),
                None => (desc, None),
            };
            Printed {
                key: key.into(),
                flags: flags.into(),
                hwcap,
                path: path.into(),
            }
        })
        .collect();
    (count, entries)
}

#[test]
fn real_caches_read_as_ldconfig_prints_them() {
    let deep = format!("{}/libdeep.so.1", deep_dir());
    let mut want: BTreeSet<(&str, &str)> = REAL_PAIRS.iter().copied().collect();
    want.insert(("libdeep.so.1", &deep));
    for real in real_caches() {
        let layout = real.layout;
        let entries = parse(&real.bytes).unwrap_or_else(|e| panic!("{layout:?}: {e}"));
        let (count, lines) = printed(&real.printed);
        assert_eq!(entries.len(), count, "{layout:?}");
        assert_eq!(lines.len(), count, "{layout:?}:\n{}", real.printed);
        for (e, p) in entries.iter().zip(&lines) {
            let ours = Printed {
                key: e.key.clone(),
                flags: ldconfig_flags(e),
                hwcap: p.hwcap.clone(),
                path: e.path.clone(),
            };
            assert_eq!(&ours, p, "{layout:?}");
            // ldconfig shows a hwcap exactly when there is one.
            assert_eq!(e.hwcap != 0, p.hwcap.is_some(), "{layout:?} {e:?}");
            let in_hwcaps_dir = e.path.contains("/glibc-hwcaps/x86-64-v3/");
            if layout == Layout::Old {
                assert_eq!(e.hwcap, 0);
            } else {
                assert_eq!(e.glibc_hwcaps_index().is_some(), in_hwcaps_dir, "{e:?}");
            }
            if layout == Layout::New && in_hwcaps_dir {
                assert_eq!(p.hwcap.as_deref(), Some("\"x86-64-v3\""));
            }
            if let Some(native) = Arch::native() {
                assert_eq!(e.arch(), native, "{layout:?} {e:?}");
            }
            if cfg!(target_arch = "x86_64") {
                assert!(e.is_x86_64() && e.is_libc6(), "{e:?}");
                assert_eq!(e.flags, 0x0303);
            }
        }
        let got: BTreeSet<(&str, &str)> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.path.as_str()))
            .collect();
        assert_eq!(got, want, "{layout:?}");
        assert_eq!(entries.len(), want.len(), "{layout:?}: duplicates");
    }
    // The layouts are what they claim.
    let magics: Vec<_> = real_caches()
        .iter()
        .map(|r| (r.layout, r.bytes.starts_with(MAGIC_NEW)))
        .collect();
    assert_eq!(
        magics,
        [
            (Layout::New, true),
            (Layout::Compat, false),
            (Layout::Old, false)
        ]
    );
    let compat = &real_caches()[1].bytes;
    let old_count = u32::from_le_bytes(compat[12..16].try_into().unwrap()) as usize;
    let new_at = (16 + 12 * old_count).next_multiple_of(8);
    assert_eq!(compat.get(new_at..new_at + 17), Some(MAGIC_NEW));
}

#[test]
fn real_caches_agree_with_the_hand_built_layout() {
    // The hand-built caches of the other tests lay strings out as ldconfig
    // does: rebuilding the real new-format entries reads back the same.
    let real = &real_caches()[0];
    let entries = parse(&real.bytes).unwrap();
    let libs: Vec<Lib> = entries
        .iter()
        .map(|e| Lib {
            flags: e.flags,
            key: e.key.clone(),
            path: e.path.clone(),
            hwcap: e.hwcap,
        })
        .collect();
    for layout in [Layout::New, Layout::Compat, Layout::Old] {
        assert_eq!(
            parse(&build(&libs, layout, Order::Little)),
            Ok(expected(&libs, layout))
        );
    }
}

#[test]
fn real_new_cache_swapped_to_big_endian_reads_the_same() {
    let real = &real_caches()[0];
    let le = &real.bytes;
    assert_eq!(le[28] & ENDIAN_MASK, ENDIAN_LITTLE, "written little-endian");
    let nlibs = u32::from_le_bytes(le[20..24].try_into().unwrap()) as usize;
    let mut be = le.clone();
    let swap = |b: &mut Vec<u8>, at: usize, n: usize| b[at..at + n].reverse();
    for at in [20, 24, 32] {
        swap(&mut be, at, 4);
    }
    for i in 0..nlibs {
        let at = 48 + 24 * i;
        for w in 0..4 {
            swap(&mut be, at + 4 * w, 4);
        }
        swap(&mut be, at + 16, 8);
    }
    be[28] = (be[28] & !ENDIAN_MASK) | ENDIAN_BIG;
    let want = parse(le).unwrap();
    assert_eq!(parse(&be), Ok(want.clone()));
    // Without the flag, the counts still only fit big-endian.
    be[28] &= !ENDIAN_MASK;
    assert_eq!(parse(&be), Ok(want));
}

#[test]
fn every_prefix_of_a_real_cache_is_an_error_until_the_strings_end() {
    for real in real_caches() {
        let bytes = &real.bytes;
        let full = parse(bytes).unwrap();
        // Where the last string ends: past the new string table, or, for
        // the old layout, the furthest NUL any entry's strings need.
        let needed = match real.layout {
            Layout::Old => {
                let n = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
                let base = 16 + 12 * n;
                (0..n)
                    .flat_map(|i| [16 + 12 * i + 4, 16 + 12 * i + 8])
                    .map(|at| {
                        let s = base
                            + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                        s + bytes[s..].iter().position(|b| *b == 0).unwrap() + 1
                    })
                    .max()
                    .unwrap()
            }
            Layout::New | Layout::Compat => {
                let at = bytes
                    .windows(MAGIC_NEW.len())
                    .position(|w| w == MAGIC_NEW)
                    .unwrap();
                let word = |o: usize| {
                    u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap()) as usize
                };
                at + 48 + 24 * word(20) + word(24)
            }
        };
        assert!(needed <= bytes.len());
        for n in 0..=bytes.len() {
            match parse(&bytes[..n]) {
                Ok(entries) => {
                    assert!(n >= needed, "{:?}: prefix {n} parsed", real.layout);
                    assert_eq!(entries, full);
                }
                Err(e) => assert!(n < needed, "{:?}: prefix {n}: {e}", real.layout),
            }
        }
    }
}

// ------------------------------------------------- properties

fn arb_lib() -> impl Strategy<Value = Lib> {
    (
        any::<u32>(),
        "[^\\x00]{0,24}",
        "[^\\x00]{0,40}",
        any::<u64>(),
    )
        .prop_map(|(flags, key, path, hwcap)| Lib {
            flags,
            key,
            path,
            hwcap,
        })
}

fn arb_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::New), Just(Layout::Compat), Just(Layout::Old)]
}

fn arb_order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::Little), Just(Order::Big)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_magic_never_panic(
        magic in prop_oneof![
            Just(b"glibc-ld.so.cache1.1".to_vec()),
            Just(b"ld.so-1.7.0\0".to_vec()),
        ],
        rest in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = magic;
        bytes.extend(rest);
        let _ = parse(&bytes);
    }

    #[test]
    fn hand_built_caches_read_back(
        libs in prop::collection::vec(arb_lib(), 0..8),
        layout in arb_layout(),
        order in arb_order(),
    ) {
        prop_assert_eq!(parse(&build(&libs, layout, order)), Ok(expected(&libs, layout)));
    }

    #[test]
    fn corrupted_caches_never_panic(
        libs in prop::collection::vec(arb_lib(), 0..6),
        layout in arb_layout(),
        order in arb_order(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = build(&libs, layout, order);
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let _ = parse(&bytes);
        let _ = parse(&bytes[..cut.index(bytes.len() + 1)]);
    }
}
