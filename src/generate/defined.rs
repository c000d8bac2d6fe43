//! What the spec files of a run's directories define, read once per run:
//! the names each file in the output directory and in the other spec
//! directories runtimes read defines, for the check that no two files
//! define one device ([`Defined::conflicts`]).
//!
//! A run reads every file once, however many generators it plans, and
//! keeps the view current as it writes ([`Defined::wrote`]) and removes
//! ([`Defined::removed`]) its own files: a generator written earlier in
//! the run is seen by the later ones exactly as a fresh read would see it.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{Planned, coexist};
use crate::cdi::dirs::{Input, Known, scan, scan_known};
use crate::write;

/// Another file defining a device a generator would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The device (`vendor/class=name`).
    pub name: String,
    /// The other file.
    pub other: PathBuf,
    /// Whether it is in the output directory (else in another spec
    /// directory runtimes read).
    pub same_dir: bool,
    /// The generator that wrote it, when cdigen did (only in the output
    /// directory: cdigen's files elsewhere are not clashes).
    pub owner: Option<String>,
    /// For a file cdigen did not write, the tool that writes it, when
    /// recognized.
    pub producer: Option<coexist::Producer>,
    /// The generator whose names it defines.
    pub generator: String,
}

impl Clash {
    /// The refusal this clash means for the file at `path`.
    pub fn error(self, path: PathBuf) -> super::Error {
        match self.owner {
            Some(owner) => super::Error::Conflict {
                path,
                name: self.name,
                other: self.other,
                owner,
            },
            None => super::Error::Competing {
                path,
                name: self.name,
                other: self.other,
                same_dir: self.same_dir,
                producer: self.producer,
                generator: self.generator,
            },
        }
    }
}

/// One spec file and what it defines.
#[derive(Debug, Clone)]
struct File {
    path: PathBuf,
    name: OsString,
    /// In the output directory.
    same_dir: bool,
    /// The generator cdigen's state records it for, in its directory.
    recorded: Option<String>,
    /// Whether runtimes load it.
    loaded: bool,
    /// Its kind, when it parsed.
    kind: Option<String>,
    /// Its devices, qualified (`vendor/class=name`).
    names: Vec<String>,
}

/// The spec files of the output directory and of the other spec
/// directories runtimes read, in scan order, with what each defines.
#[derive(Debug, Clone)]
pub struct Defined {
    dir: PathBuf,
    files: Vec<File>,
}

impl Defined {
    /// Reads every spec file in `dir` (the output directory) and in
    /// `spec_dirs` (a directory that is `dir` again is read once). A state
    /// file that cannot be read records nothing: its directory's files
    /// count as another tool's (generate would not write in that
    /// directory either, and says so there).
    pub fn read(dir: &Path, spec_dirs: &[PathBuf]) -> Defined {
        Self::read_planned(dir, spec_dirs, &[])
    }

    /// [`Defined::read`], where a file of the output directory that holds
    /// the very bytes `plans` would write there is not parsed: a planned
    /// spec was validated, and its bytes parse to it (tested for every
    /// fixture), so what the file defines is what the plan says. An
    /// unchanged run parses none of its own specs again.
    pub fn read_planned(dir: &Path, spec_dirs: &[PathBuf], plans: &[Planned]) -> Defined {
        let known = |path: &Path, bytes: &[u8]| {
            let name = path.file_name()?;
            let p = plans
                .iter()
                .find(|p| OsStr::new(&p.file) == name && p.bytes == bytes)?;
            let spec = p.spec.as_ref()?;
            Some(Known {
                kind: spec.kind.clone(),
                devices: spec.devices.iter().map(|d| d.name.clone()).collect(),
            })
        };
        let mut files = Vec::new();
        let mut scanned: Vec<&Path> = vec![dir];
        let dirs = std::iter::once(dir).chain(spec_dirs.iter().map(PathBuf::as_path));
        for (i, d) in dirs.enumerate() {
            let same_dir = i == 0;
            if !same_dir {
                if scanned.iter().any(|s| coexist::same_dir(s, d)) {
                    continue;
                }
                scanned.push(d);
            }
            let own = write::Ownership::read(d).unwrap_or_default();
            let input = [Input {
                path: d.to_path_buf(),
                explicit: false,
            }];
            let view = if same_dir {
                scan_known(&input, &known)
            } else {
                scan(&input)
            };
            for f in view.files {
                let Some(name) = f.path.file_name().map(OsStr::to_os_string) else {
                    continue;
                };
                let recorded = name.to_str().and_then(|n| own.owner(n)).map(str::to_string);
                let names = match &f.kind {
                    Some(kind) => f.devices.iter().map(|d| format!("{kind}={d}")).collect(),
                    None => Vec::new(),
                };
                files.push(File {
                    path: f.path,
                    name,
                    same_dir,
                    recorded,
                    loaded: f.loaded,
                    kind: f.kind,
                    names,
                });
            }
        }
        Defined {
            dir: dir.to_path_buf(),
            files,
        }
    }

    /// The devices of `planned` that another file defines, in scan order:
    /// in the output directory, every file other than `planned.file` and
    /// those in `owned` (this generator's own), whether written by another
    /// tool or by another of cdigen's generators; in the other spec
    /// directories, the files cdigen did not write there (its state file
    /// there does not record them): another tool's, which runtimes would
    /// weigh against ours.
    pub fn conflicts(&self, planned: &Planned, owned: &BTreeSet<String>) -> Vec<Clash> {
        let wanted: BTreeSet<String> = planned.names().into_iter().collect();
        let mut found = Vec::new();
        for f in &self.files {
            if f.same_dir {
                // By the name's bytes: a name that is not UTF-8 is another
                // file, never one of ours (runtimes load it all the same).
                let ours = f.name == OsStr::new(&planned.file)
                    || f.name.to_str().is_some_and(|n| owned.contains(n));
                if ours {
                    continue;
                }
            } else if f.recorded.is_some() || !f.loaded {
                // cdigen's file there: shadowing, which `check` reports;
                // and a file runtimes do not load defines nothing.
                continue;
            }
            let Some(kind) = &f.kind else { continue };
            let producer = f
                .recorded
                .is_none()
                .then(|| coexist::Producer::recognize(&f.path, kind))
                .flatten();
            for q in f.names.iter().filter(|q| wanted.contains(*q)) {
                found.push(Clash {
                    name: q.clone(),
                    other: f.path.clone(),
                    same_dir: f.same_dir,
                    owner: f.recorded.clone(),
                    producer,
                    generator: planned.generator.clone(),
                });
            }
        }
        found
    }

    /// The first of [`Defined::conflicts`], as the error refusing
    /// `planned`.
    ///
    /// # Errors
    /// [`super::Error::Conflict`] or [`super::Error::Competing`].
    pub fn check(&self, planned: &Planned, owned: &BTreeSet<String>) -> Result<(), super::Error> {
        match self.conflicts(planned, owned).into_iter().next() {
            Some(c) => Err(c.error(self.dir.join(&planned.file))),
            None => Ok(()),
        }
    }

    /// Records that `planned`'s spec is now its file in the output
    /// directory, written by its generator.
    pub fn wrote(&mut self, planned: &Planned) {
        let Some(spec) = &planned.spec else { return };
        let name = OsString::from(&planned.file);
        self.removed(&planned.file);
        let file = File {
            path: self.dir.join(&planned.file),
            name,
            same_dir: true,
            recorded: Some(planned.generator.clone()),
            loaded: true,
            kind: Some(spec.kind.clone()),
            names: planned.names(),
        };
        // Scan order: the output directory first, by name.
        let at = self
            .files
            .iter()
            .position(|f| !f.same_dir || f.name > file.name)
            .unwrap_or(self.files.len());
        self.files.insert(at, file);
    }

    /// Records that the file `name` of the output directory is gone.
    pub fn removed(&mut self, name: &str) {
        self.files
            .retain(|f| !(f.same_dir && f.name == OsStr::new(name)));
    }
}
