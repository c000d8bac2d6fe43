//! The two facts cdigen needs from a shared library's ELF header: which
//! machine it is built for, and its soname (`DT_SONAME`, the name the
//! loader and `ldconfig` know it by: `libcuda.so.1` for
//! `libcuda.so.550.90.07`).
//!
//! A driver root without a linker cache (NixOS, driver containers) gives
//! only file names; the soname links a container needs come from here.
//! Libraries are untrusted input and can be large (libcuda is tens of
//! megabytes), so nothing is loaded whole: the file header, the program
//! headers, the dynamic segment and the one string are read with
//! positioned reads, each bounded, every offset checked; anything
//! malformed is an [`Error`], never a panic or a large allocation.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// `EM_X86_64`.
pub const X86_64: u16 = 62;
/// `EM_AARCH64`.
pub const AARCH64: u16 = 183;
/// `EM_PPC64`.
pub const PPC64: u16 = 21;

/// Most program headers read.
const MAX_PHNUM: u16 = 256;
/// Largest dynamic segment read.
const MAX_DYNAMIC: u64 = 64 << 10;
/// Longest soname read.
const MAX_SONAME: usize = 255;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_SONAME: u64 = 14;

/// What was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// `e_machine` ([`X86_64`], [`AARCH64`], ...).
    pub machine: u16,
    /// Whether it is a 64-bit object.
    pub is_64: bool,
    /// Its `DT_SONAME`, when it has one.
    pub soname: Option<String>,
}

impl Library {
    /// Whether it can be loaded by this program's loader (same machine,
    /// same word size).
    pub fn is_native(&self) -> bool {
        Some(self.machine) == native_machine() && self.is_64 == cfg!(target_pointer_width = "64")
    }
}

/// The machine this program is built for.
pub fn native_machine() -> Option<u16> {
    if cfg!(target_arch = "x86_64") {
        Some(X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(AARCH64)
    } else if cfg!(target_arch = "powerpc64") {
        Some(PPC64)
    } else {
        None
    }
}

/// Why a file could not be read as a shared library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading failed.
    #[error("cannot read it: {0}")]
    Io(#[from] io::Error),
    /// Not an ELF object this reader knows.
    #[error("not an ELF shared object: {0}")]
    Malformed(&'static str),
}

/// Positioned reads: a file, or bytes in tests.
pub trait ReadAt {
    /// Fills as much of `buf` as there is from `offset`; returns how much.
    ///
    /// # Errors
    /// The read's error.
    fn read_at_most(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at_most(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while let Some(rest) = buf.get_mut(done..) {
            if rest.is_empty() {
                break;
            }
            match self.read_at(rest, offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

impl ReadAt for [u8] {
    fn read_at_most(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let Some(src) = self.get(start..) else {
            return Ok(0);
        };
        let n = src.len().min(buf.len());
        if let (Some(to), Some(from)) = (buf.get_mut(..n), src.get(..n)) {
            to.copy_from_slice(from);
        }
        Ok(n)
    }
}

/// Reads exactly `len` bytes at `offset`, or says the file is short.
fn exact(r: &(impl ReadAt + ?Sized), offset: u64, len: usize) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; len];
    if r.read_at_most(&mut buf, offset)? < len {
        return Err(Error::Malformed("a header points past the end of the file"));
    }
    Ok(buf)
}

/// Fixed-width little- or big-endian fields of one object.
struct Fields {
    big: bool,
    is_64: bool,
}

impl Fields {
    fn u16(&self, b: &[u8], at: usize) -> u16 {
        let mut a = [0u8; 2];
        if let Some(s) = b.get(at..at + 2) {
            a.copy_from_slice(s);
        }
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }

    fn u32(&self, b: &[u8], at: usize) -> u32 {
        let mut a = [0u8; 4];
        if let Some(s) = b.get(at..at + 4) {
            a.copy_from_slice(s);
        }
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    fn u64(&self, b: &[u8], at: usize) -> u64 {
        let mut a = [0u8; 8];
        if let Some(s) = b.get(at..at + 8) {
            a.copy_from_slice(s);
        }
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }

    /// An address-sized field.
    fn word(&self, b: &[u8], at: usize) -> u64 {
        if self.is_64 {
            self.u64(b, at)
        } else {
            u64::from(self.u32(b, at))
        }
    }
}

/// A loadable segment: where its bytes are in the file and in memory.
struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// An ELF object's identification and file header, as far as the readers
/// here need it.
struct Header {
    f: Fields,
    e_type: u16,
    machine: u16,
    /// Where the program header table starts, each entry's size, how many.
    phoff: u64,
    phentsize: u16,
    phnum: u16,
}

/// Reads and checks the identification (magic, class, byte order) and
/// the file header of `r`.
fn header(r: &(impl ReadAt + ?Sized)) -> Result<Header, Error> {
    let mut ident = [0u8; 16];
    let n = r.read_at_most(&mut ident, 0)?;
    if ident.get(..4.min(n)) != Some(b"\x7fELF".as_slice()) {
        return Err(Error::Malformed("no ELF magic number"));
    }
    if n < ident.len() {
        return Err(Error::Malformed("a header points past the end of the file"));
    }
    let is_64 = match ident.get(4) {
        Some(1) => false,
        Some(2) => true,
        _ => return Err(Error::Malformed("unknown ELF class")),
    };
    let big = match ident.get(5) {
        Some(1) => false,
        Some(2) => true,
        _ => return Err(Error::Malformed("unknown byte order")),
    };
    let f = Fields { big, is_64 };
    let header = exact(r, 0, if is_64 { 64 } else { 52 })?;
    let (phoff, phentsize, phnum) = if is_64 {
        (f.u64(&header, 32), f.u16(&header, 54), f.u16(&header, 56))
    } else {
        (
            u64::from(f.u32(&header, 28)),
            f.u16(&header, 42),
            f.u16(&header, 44),
        )
    };
    Ok(Header {
        e_type: f.u16(&header, 16),
        machine: f.u16(&header, 18),
        f,
        phoff,
        phentsize,
        phnum,
    })
}

/// Reads the machine and soname of the ELF object `r`.
///
/// # Errors
/// [`Error`] when it cannot be read or is not a well-formed ELF object.
pub fn read(r: &(impl ReadAt + ?Sized)) -> Result<Library, Error> {
    let Header {
        f,
        machine,
        phoff,
        phentsize,
        phnum,
        ..
    } = header(r)?;
    let is_64 = f.is_64;
    let want_entsize = if is_64 { 56 } else { 32 };
    if phnum == 0 {
        return Err(Error::Malformed("no program headers"));
    }
    if phnum > MAX_PHNUM || phentsize != want_entsize {
        return Err(Error::Malformed("implausible program header table"));
    }
    let table = exact(r, phoff, usize::from(phnum) * usize::from(phentsize))?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..usize::from(phnum) {
        let at = i * usize::from(phentsize);
        let p_type = f.u32(&table, at);
        // 64-bit: type, flags, offset, vaddr, paddr, filesz; 32-bit: type,
        // offset, vaddr, paddr, filesz.
        let (offset, vaddr, filesz) = if is_64 {
            (
                f.u64(&table, at + 8),
                f.u64(&table, at + 16),
                f.u64(&table, at + 32),
            )
        } else {
            (
                u64::from(f.u32(&table, at + 4)),
                u64::from(f.u32(&table, at + 8)),
                u64::from(f.u32(&table, at + 16)),
            )
        };
        match p_type {
            PT_LOAD => loads.push(Segment {
                offset,
                vaddr,
                filesz,
            }),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let Some((dyn_off, dyn_size)) = dynamic else {
        return Ok(Library {
            machine,
            is_64,
            soname: None,
        });
    };
    if dyn_size > MAX_DYNAMIC {
        return Err(Error::Malformed("implausibly large dynamic segment"));
    }
    let entsize: usize = if is_64 { 16 } else { 8 };
    let dyn_len = usize::try_from(dyn_size).unwrap_or(0) / entsize * entsize;
    let entries = exact(r, dyn_off, dyn_len)?;
    let (mut strtab, mut soname) = (None, None);
    for i in 0..dyn_len / entsize {
        let at = i * entsize;
        let tag = f.word(&entries, at);
        let val = f.word(&entries, at + entsize / 2);
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(val),
            DT_SONAME => soname = Some(val),
            _ => {}
        }
    }
    let (Some(strtab), Some(name_at)) = (strtab, soname) else {
        return Ok(Library {
            machine,
            is_64,
            soname: None,
        });
    };
    // DT_STRTAB is an address: the load segment holding it says where it
    // is in the file.
    let addr = strtab
        .checked_add(name_at)
        .ok_or(Error::Malformed("soname address overflows"))?;
    let file_at = loads
        .iter()
        .find(|s| addr >= s.vaddr && addr - s.vaddr < s.filesz)
        .and_then(|s| s.offset.checked_add(addr - s.vaddr))
        .ok_or(Error::Malformed(
            "the soname is outside every loadable segment",
        ))?;
    let mut buf = vec![0u8; MAX_SONAME + 1];
    let n = r.read_at_most(&mut buf, file_at)?;
    let bytes = buf.get(..n).unwrap_or_default();
    let end = bytes
        .iter()
        .position(|b| *b == 0)
        .ok_or(Error::Malformed("the soname is not terminated"))?;
    let name = std::str::from_utf8(bytes.get(..end).unwrap_or_default())
        .map_err(|_| Error::Malformed("the soname is not UTF-8"))?;
    if name.is_empty() || name.contains('/') {
        return Err(Error::Malformed("the soname is empty or has a slash"));
    }
    Ok(Library {
        machine,
        is_64,
        soname: Some(name.to_string()),
    })
}

/// How an ELF executable is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linking {
    /// No program interpreter (`PT_INTERP`): the kernel runs it as it is
    /// (static or static-pie), nothing else is loaded.
    Static,
    /// It names a program interpreter (the dynamic loader), which the
    /// kernel loads from the path written in it, and which loads its
    /// libraries.
    Dynamic,
}

/// Whether the ELF executable `r` is linked statically: its header says
/// an executable (`ET_EXEC`, or `ET_DYN` for a PIE) of this program's
/// machine and word size, and no program header is `PT_INTERP`.
///
/// # Errors
/// [`Error`] when it cannot be read, is not a well-formed ELF object, or
/// is not an executable for this machine.
pub fn linking(r: &(impl ReadAt + ?Sized)) -> Result<Linking, Error> {
    let Header {
        f,
        e_type,
        machine,
        phoff,
        phentsize,
        phnum,
    } = header(r)?;
    let is_64 = f.is_64;
    if e_type != ET_EXEC && e_type != ET_DYN {
        return Err(Error::Malformed("not an executable"));
    }
    if Some(machine) != native_machine() || is_64 != cfg!(target_pointer_width = "64") {
        return Err(Error::Malformed("built for another machine"));
    }
    if phnum == 0 || phnum > MAX_PHNUM || phentsize != if is_64 { 56 } else { 32 } {
        return Err(Error::Malformed("implausible program header table"));
    }
    let table = exact(r, phoff, usize::from(phnum) * usize::from(phentsize))?;
    let interp =
        (0..usize::from(phnum)).any(|i| f.u32(&table, i * usize::from(phentsize)) == PT_INTERP);
    Ok(if interp {
        Linking::Dynamic
    } else {
        Linking::Static
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    /// A minimal 64-bit little-endian shared object: one PT_LOAD covering
    /// the file, a PT_DYNAMIC with DT_STRTAB and DT_SONAME.
    pub(crate) fn tiny(machine: u16, soname: Option<&str>) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&2u16.to_le_bytes());
        let ph_end = 64 + 2 * 56;
        let dyn_at = ph_end;
        let dyn_len = 3 * 16;
        let str_at = dyn_at + dyn_len;
        let mut strtab = vec![0u8];
        let name_off = strtab.len();
        if let Some(s) = soname {
            strtab.extend_from_slice(s.as_bytes());
            strtab.push(0);
        }
        let total = str_at + strtab.len();
        let vbase = 0x1000u64;
        let ph = |t: u32, off: u64, size: u64| {
            let mut p = vec![0u8; 56];
            p[..4].copy_from_slice(&t.to_le_bytes());
            p[8..16].copy_from_slice(&off.to_le_bytes());
            p[16..24].copy_from_slice(&(vbase + off).to_le_bytes());
            p[32..40].copy_from_slice(&size.to_le_bytes());
            p
        };
        b.extend(ph(PT_LOAD, 0, total as u64));
        b.extend(ph(PT_DYNAMIC, dyn_at as u64, dyn_len as u64));
        let entry = |tag: u64, val: u64| {
            let mut e = tag.to_le_bytes().to_vec();
            e.extend(val.to_le_bytes());
            e
        };
        b.extend(entry(DT_STRTAB, vbase + str_at as u64));
        if soname.is_some() {
            b.extend(entry(DT_SONAME, name_off as u64));
        } else {
            b.extend(entry(1, 0));
        }
        b.extend(entry(DT_NULL, 0));
        b.extend(strtab);
        b
    }

    #[test]
    fn a_soname_and_a_machine() {
        let lib = read(tiny(X86_64, Some("libcuda.so.1")).as_slice()).unwrap();
        assert_eq!(lib.soname.as_deref(), Some("libcuda.so.1"));
        assert_eq!(lib.machine, X86_64);
        assert!(lib.is_64);
        assert_eq!(read(tiny(AARCH64, None).as_slice()).unwrap().soname, None);
    }

    #[test]
    fn malformed_objects_are_errors_that_say_why() {
        let msg = |b: &[u8]| read(b).unwrap_err().to_string();
        assert_eq!(
            msg(b"#!/bin/sh\n"),
            "not an ELF shared object: no ELF magic number"
        );
        assert_eq!(
            msg(b"\x7fELF"),
            "not an ELF shared object: a header points past the end of the file"
        );
        let mut b = tiny(X86_64, Some("libx.so.1"));
        b[56..58].copy_from_slice(&9000u16.to_le_bytes());
        assert_eq!(
            msg(&b),
            "not an ELF shared object: implausible program header table"
        );
        let mut b = tiny(X86_64, Some("libx.so.1"));
        let len = b.len();
        b[len - 2] = b'/';
        assert!(msg(&b).contains("not terminated") || msg(&b).contains("slash"));
        let mut b = tiny(X86_64, Some("libx.so.1"));
        b.truncate(200);
        assert_eq!(
            msg(&b),
            "not an ELF shared object: a header points past the end of the file"
        );
    }

    #[test]
    fn a_real_library_of_this_machine() {
        // The fixture machine's driver libraries are real shared objects.
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/dgx-8gpu/root/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07");
        let lib = read(&File::open(p).unwrap()).unwrap();
        assert_eq!(lib.soname.as_deref(), Some("libcuda.so.1"));
        assert_eq!(lib.machine, X86_64);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_any_bytes(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let _ = read(b.as_slice());
        }

        #[test]
        fn never_panics_on_corrupted_objects(at in 0usize..260, byte in proptest::prelude::any::<u8>()) {
            let mut b = tiny(X86_64, Some("libnvidia-ml.so.1"));
            if let Some(x) = b.get_mut(at) {
                *x = byte;
            }
            let _ = read(b.as_slice());
        }
    }

    #[test]
    fn static_and_dynamic_executables() {
        let native = native_machine().unwrap();
        let plain = tiny(native, None);
        assert_eq!(linking(plain.as_slice()).unwrap(), Linking::Static);
        // The second program header (PT_DYNAMIC) made PT_INTERP.
        let mut interp = plain.clone();
        interp[64 + 56..64 + 60].copy_from_slice(&PT_INTERP.to_le_bytes());
        assert_eq!(linking(interp.as_slice()).unwrap(), Linking::Dynamic);
        let mut object = plain.clone();
        object[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
        assert_eq!(
            linking(object.as_slice()).unwrap_err().to_string(),
            "not an ELF shared object: not an executable"
        );
        let other = if native == X86_64 { AARCH64 } else { X86_64 };
        assert_eq!(
            linking(tiny(other, None).as_slice())
                .unwrap_err()
                .to_string(),
            "not an ELF shared object: built for another machine"
        );
        assert_eq!(
            linking(b"#!/bin/sh\nexec ldconfig.real\n".as_slice())
                .unwrap_err()
                .to_string(),
            "not an ELF shared object: no ELF magic number"
        );
        // A truncated program header table.
        assert!(linking(&plain[..100]).is_err());
    }
}
