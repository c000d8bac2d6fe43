//! Whether a host program may be run as root: the rule for the programs OCI
//! hooks name (the `path` of a spec's hooks, checked by `validate`, `check`
//! and `inject`) and for the programs `cdigen hook` runs (`--ldconfig`).
//!
//! A program is trusted when its path is absolute and every entry on the
//! way to it, from `/` down and through every symlink, could be changed by
//! no one but root: each directory, each symlink and the file itself is
//! owned by root (or by the user checking, who could change them anyway),
//! the file and the directories are writable by no group or other user,
//! and the file is a regular file. A directory writable by others is
//! accepted when it is sticky (`/tmp`): others may add names there, but not
//! replace or rename one they do not own. The parent directories are
//! checked because whoever can write one can put another file at the name.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed on the way (as the kernel's `ELOOP` limit).
const MAX_LINKS: usize = 40;

/// Why a program is not trusted; each names the entry at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// Not an absolute path: a runtime resolves it from the hook's working
    /// directory, the container's root filesystem.
    Relative,
    /// It (or a directory on the way) does not exist.
    Missing {
        /// The entry missing.
        at: PathBuf,
        /// The cause, as text.
        cause: String,
    },
    /// Not a regular file (or a directory on the way is not a directory).
    Kind {
        /// The entry.
        at: PathBuf,
        /// `a directory`, `not a directory`, ...
        what: String,
    },
    /// Owned by another user than root.
    Owner {
        /// The entry.
        at: PathBuf,
        /// Its owner.
        uid: u32,
    },
    /// Writable by its group or by others.
    Writable {
        /// The entry.
        at: PathBuf,
        /// `its group`, `others`.
        by: &'static str,
    },
    /// A regular file no one may execute (no `x` bit).
    NotExecutable {
        /// The file.
        at: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// More than [`MAX_LINKS`] symlinks.
    Loop {
        /// The entry where the limit was reached.
        at: PathBuf,
    },
    /// An entry could not be examined.
    Io {
        /// The entry.
        at: PathBuf,
        /// The cause, as text.
        cause: String,
    },
}

impl Untrusted {
    /// Whether the program is simply not there to run: missing, or not
    /// executable (a runtime fails the container's start; no one else's
    /// code runs).
    pub fn is_missing(&self) -> bool {
        matches!(
            self,
            Untrusted::Missing { .. } | Untrusted::NotExecutable { .. }
        )
    }
}

impl Untrusted {
    /// The reason for `path` as asked for: without the entry's name when
    /// the entry at fault is `path` itself.
    pub fn reason_for(&self, path: &Path) -> String {
        let text = self.to_string();
        let shown = crate::text::path(path).to_string();
        text.strip_prefix(&format!("{shown}: "))
            .or_else(|| text.strip_prefix(&format!("{shown} ")))
            .unwrap_or(&text)
            .to_string()
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = |p: &Path| crate::text::path(p).to_string();
        match self {
            Untrusted::Relative => write!(
                f,
                "not an absolute path (it would be looked up from the hook's working directory, \
                 the container's root filesystem)"
            ),
            Untrusted::Missing { at, cause } => write!(f, "{}: {cause}", p(at)),
            Untrusted::Kind { at, what } => write!(f, "{}: {what}", p(at)),
            Untrusted::Owner { at, uid } => {
                write!(f, "{} is owned by uid {uid}, not root", p(at))
            }
            Untrusted::Writable { at, by } => write!(f, "{} is writable by {by}", p(at)),
            Untrusted::NotExecutable { at, mode } => {
                write!(f, "{} is not executable (mode {mode:04o})", p(at))
            }
            Untrusted::Loop { at } => write!(f, "{}: more than {MAX_LINKS} symlinks", p(at)),
            Untrusted::Io { at, cause } => write!(f, "{}: {cause}", p(at)),
        }
    }
}

/// Checks that `path` names a program only root could have put there (see
/// the module docs); returns where it is, symlinks resolved.
///
/// # Errors
/// [`Untrusted`], naming the first entry at fault.
pub fn program(path: &Path) -> Result<PathBuf, Untrusted> {
    program_in(Path::new("/"), path)
}

/// [`program`] for the host whose `/` is the directory `root` (`--root`:
/// a DaemonSet's `/host`, a fixture): `path` and the symlinks on the way
/// are resolved in that tree, never above `root`, and the entries are
/// checked there, from `root` down. Errors and the result name host paths
/// (as seen from `root`).
///
/// # Errors
/// As [`program`].
pub fn program_in(root: &Path, path: &Path) -> Result<PathBuf, Untrusted> {
    if !path.is_absolute() {
        return Err(Untrusted::Relative);
    }
    let me = rustix::process::geteuid().as_raw();
    let owner_ok = |uid: u32| uid == 0 || uid == me;
    // `at` is the host path; `real` where it is here.
    let real = |at: &Path| root.join(at.strip_prefix("/").unwrap_or(at));
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, path);
    let mut at = PathBuf::from("/");
    let top = fs::metadata(real(&at)).map_err(|e| io_error(&at, &e))?;
    check_dir(&at, &top, owner_ok)?;
    let mut links = 0;
    let mut file = false;
    while let Some(name) = todo.pop() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = fs::symlink_metadata(real(&next)).map_err(|e| io_error(&next, &e))?;
        if meta.file_type().is_symlink() {
            if !owner_ok(meta.uid()) {
                return Err(Untrusted::Owner {
                    at: next,
                    uid: meta.uid(),
                });
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(Untrusted::Loop { at: next });
            }
            let target = fs::read_link(real(&next)).map_err(|e| io_error(&next, &e))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            push_components(&mut todo, &target);
            continue;
        }
        if todo.is_empty() {
            if !meta.is_file() {
                return Err(Untrusted::Kind {
                    at: next,
                    what: format!("{}, not a program", crate::fsio::describe(meta.file_type())),
                });
            }
            if !owner_ok(meta.uid()) {
                return Err(Untrusted::Owner {
                    at: next,
                    uid: meta.uid(),
                });
            }
            writable(&next, meta.mode(), false)?;
            if meta.mode() & 0o111 == 0 {
                return Err(Untrusted::NotExecutable {
                    at: next,
                    mode: meta.mode() & 0o7777,
                });
            }
            file = true;
        } else if meta.is_dir() {
            check_dir(&next, &meta, owner_ok)?;
        } else {
            return Err(Untrusted::Kind {
                at: next,
                what: format!(
                    "{}, not a directory",
                    crate::fsio::describe(meta.file_type())
                ),
            });
        }
        at = next;
    }
    if !file {
        return Err(Untrusted::Kind {
            at,
            what: "a directory, not a program".into(),
        });
    }
    Ok(at)
}

/// Pushes the components of `p` on `todo` so that the first pops first
/// (`/` and `.` dropped).
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    let names: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    todo.extend(names.into_iter().rev());
}

fn check_dir(
    at: &Path,
    meta: &fs::Metadata,
    owner_ok: impl Fn(u32) -> bool,
) -> Result<(), Untrusted> {
    if !owner_ok(meta.uid()) {
        return Err(Untrusted::Owner {
            at: at.to_path_buf(),
            uid: meta.uid(),
        });
    }
    writable(at, meta.mode(), true)
}

/// Refuses a mode writable by group or others (for a directory, unless
/// sticky).
fn writable(at: &Path, mode: u32, dir: bool) -> Result<(), Untrusted> {
    if dir && mode & 0o1000 != 0 {
        return Ok(());
    }
    let by = if mode & 0o002 != 0 {
        "others"
    } else if mode & 0o020 != 0 {
        "its group"
    } else {
        return Ok(());
    };
    Err(Untrusted::Writable {
        at: at.to_path_buf(),
        by,
    })
}

fn io_error(at: &Path, e: &io::Error) -> Untrusted {
    if e.kind() == io::ErrorKind::NotFound {
        Untrusted::Missing {
            at: at.to_path_buf(),
            cause: e.to_string(),
        }
    } else {
        Untrusted::Io {
            at: at.to_path_buf(),
            cause: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    /// A program in a fresh directory (0755) of a temp dir.
    fn program_in(dir: &Path) -> PathBuf {
        let bin = dir.join("bin");
        fs::create_dir(&bin).unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        let p = bin.join("hook");
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_system_program_is_trusted() {
        assert!(program(Path::new("/bin/sh")).is_ok());
    }

    #[test]
    fn relative_missing_and_directories_are_not() {
        assert_eq!(program(Path::new("ldconfig")), Err(Untrusted::Relative));
        assert_eq!(program(Path::new("./bin/sh")), Err(Untrusted::Relative));
        let e = program(Path::new("/nonexistent/ldconfig")).unwrap_err();
        assert!(e.is_missing());
        assert_eq!(
            e.to_string(),
            "/nonexistent: No such file or directory (os error 2)"
        );
        assert_eq!(
            program(Path::new("/")).unwrap_err().to_string(),
            "/: a directory, not a program"
        );
        assert_eq!(
            program(Path::new("/etc")).unwrap_err().to_string(),
            "/etc: a directory, not a program"
        );
    }

    #[test]
    fn writable_files_and_directories_are_not() {
        let t = tempfile::tempdir().unwrap();
        let p = program_in(t.path());
        assert_eq!(program(&p).unwrap(), p);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o775)).unwrap();
        assert_eq!(
            program(&p).unwrap_err().to_string(),
            format!("{} is writable by its group", p.display())
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o757)).unwrap();
        assert_eq!(
            program(&p).unwrap_err().to_string(),
            format!("{} is writable by others", p.display())
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        let bin = p.parent().unwrap();
        fs::set_permissions(bin, fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(
            program(&p).unwrap_err().to_string(),
            format!("{} is writable by others", bin.display())
        );
        // Sticky: others cannot replace the program.
        fs::set_permissions(bin, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(program(&p).is_ok());
    }

    #[test]
    fn symlinks_are_followed_and_checked() {
        let t = tempfile::tempdir().unwrap();
        let p = program_in(t.path());
        let link = t.path().join("link");
        symlink("bin/../bin/hook", &link).unwrap();
        assert_eq!(program(&link).unwrap(), p);
        // Through a link to a directory writable by others.
        let open = t.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        fs::copy(&p, open.join("hook")).unwrap();
        let link2 = t.path().join("link2");
        symlink(open.join("hook"), &link2).unwrap();
        assert_eq!(
            program(&link2).unwrap_err().to_string(),
            format!("{} is writable by others", open.display())
        );
        let looped = t.path().join("loop");
        symlink("loop", &looped).unwrap();
        assert!(matches!(program(&looped), Err(Untrusted::Loop { .. })));
    }

    #[test]
    fn a_file_or_link_owned_by_another_user_is_not() {
        if !is_root() {
            println!("skipped: needs root (chown)");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let p = program_in(t.path());
        std::os::unix::fs::chown(&p, Some(1000), None).unwrap();
        assert_eq!(
            program(&p).unwrap_err().to_string(),
            format!("{} is owned by uid 1000, not root", p.display())
        );
        std::os::unix::fs::chown(&p, Some(0), None).unwrap();
        let bin = p.parent().unwrap();
        std::os::unix::fs::chown(bin, Some(1000), None).unwrap();
        assert_eq!(
            program(&p).unwrap_err().to_string(),
            format!("{} is owned by uid 1000, not root", bin.display())
        );
        std::os::unix::fs::chown(bin, Some(0), None).unwrap();
        let link = t.path().join("link");
        symlink(&p, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(1000), None).unwrap();
        assert_eq!(
            program(&link).unwrap_err().to_string(),
            format!("{} is owned by uid 1000, not root", link.display())
        );
    }

    #[test]
    fn a_file_no_one_may_execute_is_not_a_program() {
        let t = tempfile::tempdir().unwrap();
        let p = program_in(t.path());
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        let e = program(&p).unwrap_err();
        assert!(e.is_missing());
        assert_eq!(
            e.to_string(),
            format!("{} is not executable (mode 0644)", p.display())
        );
    }

    #[test]
    fn under_a_root_paths_and_links_resolve_in_that_tree() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        program_in(root);
        // /bin/hook of that host; an absolute link stays in it, and so
        // does a `..` above its `/`.
        symlink("/bin/hook", root.join("abs")).unwrap();
        symlink("../../../bin/hook", root.join("up")).unwrap();
        for p in ["/bin/hook", "/abs", "/up", "/../bin/hook"] {
            assert_eq!(
                super::program_in(root, Path::new(p)).unwrap(),
                Path::new("/bin/hook"),
                "{p}"
            );
        }
        // This machine's /bin/sh is not that host's: named as the host's.
        let e = super::program_in(root, Path::new("/usr/bin/cdigen-hook")).unwrap_err();
        assert!(e.is_missing());
        assert_eq!(
            e.to_string(),
            "/usr: No such file or directory (os error 2)"
        );
    }
}
