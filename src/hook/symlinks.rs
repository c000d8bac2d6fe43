//! `cdigen hook create-symlinks --link TARGET::LINK ...`: the symlinks a
//! driver's files need in a container and that bind mounts cannot make
//! (`libcuda.so -> libcuda.so.1`, `libcuda.so.1 -> libcuda.so.550.90.07`,
//! DRM `by-path` names).
//!
//! Each link is created at `LINK`, a path in the container, with the text
//! `TARGET`, written as given (usually relative: `libcuda.so.1`,
//! `../card1`); its missing parent directories are created (0755). A link
//! already there with that target is fine; anything else there is the
//! image's and left alone, reported as an [`Outcome::Occupied`].

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::Error;
use super::inroot::{InRoot, Occupant, Symlink};

/// Most links one hook call creates.
pub const MAX_LINKS: usize = 1024;

/// The separator of `TARGET::LINK`.
const SEPARATOR: &[u8] = b"::";

/// One `--link TARGET::LINK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The link's text, as written.
    pub target: OsString,
    /// Where the link goes: an absolute path in the container, without
    /// `..`.
    pub link: PathBuf,
}

impl Link {
    /// Parses `TARGET::LINK`: exactly one `::`, a target of at most 4096
    /// bytes, an absolute link path of at most 4096 bytes with a file
    /// name and no `..`.
    ///
    /// # Errors
    /// [`Error::BadArg`] saying what is wrong.
    pub fn parse(arg: &OsStr) -> Result<Link, Error> {
        let bad = |why: &str| Error::BadArg {
            flag: "--link",
            value: arg.to_os_string(),
            why: why.to_string(),
        };
        let bytes = arg.as_bytes();
        let seps: Vec<usize> = bytes
            .windows(SEPARATOR.len())
            .enumerate()
            .filter(|(_, w)| *w == SEPARATOR)
            .map(|(i, _)| i)
            .collect();
        let [at] = seps.as_slice() else {
            return Err(bad("expected TARGET::LINK, with one ::"));
        };
        let (Some(target), Some(link)) = (bytes.get(..*at), bytes.get(at + SEPARATOR.len()..))
        else {
            return Err(bad("expected TARGET::LINK, with one ::"));
        };
        if target.is_empty() {
            return Err(bad("the target is empty"));
        }
        if target.len() > super::inroot::MAX_PATH || link.len() > super::inroot::MAX_PATH {
            return Err(bad("longer than 4096 bytes"));
        }
        let link = Path::new(OsStr::from_bytes(link));
        if !link.is_absolute() {
            return Err(bad("the link must be an absolute path in the container"));
        }
        if link.components().any(|c| c == Component::ParentDir) {
            return Err(bad("the link path must not contain .."));
        }
        if link.file_name().is_none() {
            return Err(bad("the link path names no file"));
        }
        Ok(Link {
            target: OsStr::from_bytes(target).to_os_string(),
            link: link.to_path_buf(),
        })
    }
}

/// Parses every `--link` argument, at most [`MAX_LINKS`].
///
/// # Errors
/// [`Error::TooMany`]; [`Error::BadArg`] for the first bad one.
pub fn parse_links(args: &[OsString]) -> Result<Vec<Link>, Error> {
    if args.len() > MAX_LINKS {
        return Err(Error::TooMany {
            flag: "--link",
            limit: MAX_LINKS,
        });
    }
    args.iter().map(|a| Link::parse(a)).collect()
}

/// What happened to one link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Created.
    Created,
    /// Already there, with the same target.
    Present,
    /// Left alone: the image has something else there. The text says what
    /// (`a regular file is there`).
    Occupied(String),
}

/// Creates every link in `root`, in order.
///
/// # Errors
/// [`Error::InRoot`] for the first link that fails for another reason
/// than something of the image's in the way (a read-only root, an I/O
/// error, a symlink loop); the links before it are made.
pub fn create_symlinks(root: &InRoot, links: &[Link]) -> Result<Vec<(Link, Outcome)>, Error> {
    let mut out = Vec::with_capacity(links.len());
    for link in links {
        let outcome = match root.symlink(&link.target, &link.link) {
            Ok(Symlink::Created) => Outcome::Created,
            Ok(Symlink::Present) => Outcome::Present,
            Ok(Symlink::Occupied(Occupant::Other(kind))) => {
                Outcome::Occupied(format!("{} is there", kind.describe()))
            }
            Ok(Symlink::Occupied(Occupant::Link(there))) => Outcome::Occupied(format!(
                "a symbolic link to {} is there",
                crate::text::path(Path::new(&there))
            )),
            // A file of the image's where a parent directory would be.
            Err(e) if e.is_not_dir() => {
                Outcome::Occupied("a file of the image is where a parent directory would be".into())
            }
            Err(e) => return Err(e.into()),
        };
        out.push((link.clone(), outcome));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
