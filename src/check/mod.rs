//! `cdigen check`: compares what is on disk with what `generate` would
//! write now, and says why they differ. Cron jobs, monitoring and `watch`
//! call it to know whether the specs are current.
//!
//! It sits after planning in the pipeline (discovery → [`generate::plan_all`])
//! and in place of the writer: it reads the spec and device-info
//! directories, the ownership state ([`Ownership`], read without the lock)
//! and the runtime's other spec directories, and writes nothing, ever.
//!
//! What it reports ([`Kind`]): files `generate` would create (`missing`),
//! change (`stale`, with the reasons: a device gone or new, a node whose
//! major:minor changed or that no longer exists, else the first
//! difference), remove (`orphan`), or refuse to touch (`foreign`); and how
//! runtimes would see the devices: defined twice in one directory
//! (`conflict`), also defined by a file another tool wrote in one of the
//! spec directories (`competing`, naming the tool and how to stop it:
//! [`crate::generate::coexist`]), overridden by a later spec directory
//! (`shadowed`), or overriding an earlier one (`shadows`, a warning: ours
//! is the one used). And, in any producer's spec runtimes load from those
//! directories, a hook that would let a container run code as root on the
//! host (`unsafe-hook`), or whose program is not there to run, under the
//! root (`missing-hook`): [`crate::cdi::hook_check`].
//!
//! [`generate::plan_all`]: crate::generate::plan_all

pub mod diff;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

pub use crate::cdi::dirs::Severity;
use crate::cdi::dirs::{Input, scan};
use crate::cdi::{self, Format, Spec};
use crate::generate::coexist::same_dir;
use crate::generate::{self, Planned, Plans};
use crate::root::HostRoot;
use crate::write::{self, LeftAlone, OnDisk, Ownership, Stale};

/// The directories to check.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// Where `generate` writes specs (`--output-dir`).
    pub output_dir: PathBuf,
    /// Where `generate` writes device-info files (`--devinfo-dir`).
    pub devinfo_dir: PathBuf,
    /// The spec directories runtimes read, lowest priority first (a later
    /// one wins); the output directory is normally one of them.
    pub spec_dirs: Vec<PathBuf>,
}

/// What a finding is about. Every kind is an error (the files are not
/// current, or a hook is unsafe or cannot run) except `shadows`, `unowned`
/// and `not-loaded`, which are warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Generate would write the file; it is not on disk.
    Missing,
    /// The file cdigen wrote differs from what generate would write now.
    Stale,
    /// A file cdigen wrote that generate would now remove (or, changed
    /// since, leave alone and forget).
    Orphan,
    /// A file with the name generate writes that cdigen did not write
    /// (or not a regular file): generate refuses to replace it.
    Foreign,
    /// Another file in the same directory defines one of our devices:
    /// generate refuses to write, and runtimes drop every definition. Also
    /// a device defined twice in another spec directory, which runtimes
    /// drop everywhere, ours included.
    Conflict,
    /// A file cdigen did not write (another tool's, such as nvidia-ctk's
    /// `nvidia.yaml`), in the output directory or another spec directory,
    /// defines one of our devices: generate refuses to write, and the
    /// reason says which tool writes it and how to stop it.
    Competing,
    /// A later spec directory defines one of our devices: runtimes use
    /// that definition, not ours.
    Shadowed,
    /// Warning: ours overrides the same device in an earlier spec
    /// directory (runtimes use ours).
    Shadows,
    /// Warning: the file is current but cdigen has no record of writing
    /// that content, so generate will refuse to update it when it changes.
    Unowned,
    /// Warning: the output directory is not one of the spec directories,
    /// so runtimes reading only those do not see its devices.
    NotLoaded,
    /// A file or directory that cannot be read or parsed.
    Unreadable,
    /// A generator that cannot produce its spec now.
    Failed,
    /// A hook in a spec runtimes load, whoever wrote it, that lets a
    /// container run code as root on the host: no `env`, or a program
    /// others could change ([`crate::cdi::hook_check`]). An error, so that
    /// a monitor turns red: any image given those devices can take the
    /// host.
    UnsafeHook,
    /// A hook's program does not exist on the host (under the root) or
    /// is not executable: runtimes fail to start every container given
    /// those devices. An error: the spec is broken for containers.
    MissingHook,
}

impl Kind {
    /// The word used in output (`missing`, `not-loaded`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Missing => "missing",
            Kind::Stale => "stale",
            Kind::Orphan => "orphan",
            Kind::Foreign => "foreign",
            Kind::Conflict => "conflict",
            Kind::Competing => "competing",
            Kind::Shadowed => "shadowed",
            Kind::Shadows => "shadows",
            Kind::Unowned => "unowned",
            Kind::NotLoaded => "not-loaded",
            Kind::Unreadable => "unreadable",
            Kind::Failed => "failed",
            Kind::UnsafeHook => "unsafe-hook",
            Kind::MissingHook => "missing-hook",
        }
    }

    /// Whether the kind makes the files not current.
    pub fn severity(self) -> Severity {
        match self {
            Kind::Shadows | Kind::Unowned | Kind::NotLoaded => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub kind: Kind,
    /// `error` or `warning` (from the kind).
    pub severity: Severity,
    /// The file (or directory) concerned.
    #[serde(serialize_with = "crate::text::lossy_path")]
    pub file: PathBuf,
    /// The generator whose file it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    /// The device (`vendor/class=name`), when the finding is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The other file involved (conflicts, shadowing).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::text::lossy_path_opt"
    )]
    pub other: Option<PathBuf>,
    /// What is wrong, for a person to act on.
    pub reason: String,
}

/// How many files were compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    /// Spec files: those generate would write, and those it would remove.
    pub specs: usize,
    /// Device-info files, likewise.
    pub device_info: usize,
}

/// The result of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// True when no finding is an error: what is on disk is what generate
    /// would write, and runtimes see it.
    pub current: bool,
    /// Files compared.
    pub checked: Checked,
    /// Every finding, in order: per-directory problems, failed generators,
    /// then each generator's specs and device-info files.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Number of findings of `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// Compares the files in `dirs` with `plans` (what generate would write
/// now), reading `root` to tell whether a device node still exists. Reads
/// only: never creates, locks or changes a file.
pub fn run(root: &HostRoot, plans: &Plans, dirs: &Dirs) -> Report {
    let mut c = Checker {
        root,
        findings: Vec::new(),
        checked: Checked::default(),
    };
    let specs = c.ownership(&dirs.output_dir);
    let any_devinfo = plans.planned.iter().any(|p| p.device_info);
    let devinfo = if any_devinfo {
        c.ownership(&dirs.devinfo_dir)
    } else {
        None
    };
    let view = if plans.planned.iter().any(|p| p.spec.is_some()) {
        c.runtime_view(dirs)
    } else {
        None
    };
    for f in &plans.failed {
        c.push(
            Kind::Failed,
            dirs.output_dir.join(&f.file),
            Some(&f.generator),
            None,
            None,
            format!("{}; its files are left as they are", error_chain(&f.error)),
        );
    }
    // Read once for every generator: check writes nothing in between.
    let defined = specs
        .is_some()
        .then(|| generate::Defined::read(&dirs.output_dir, &dirs.spec_dirs));
    for p in &plans.planned {
        if let (Some(own), Some(defined)) = (&specs, &defined) {
            c.spec(&dirs.output_dir, defined, own, p);
            if let Some(view) = &view {
                c.shadowing(&dirs.output_dir, view, p);
            }
        }
        if p.device_info
            && let Some(own) = &devinfo
        {
            c.devinfo(&dirs.devinfo_dir, own, p);
        }
    }
    c.hooks(dirs);
    let current = !c.findings.iter().any(|f| f.severity == Severity::Error);
    Report {
        current,
        checked: c.checked,
        findings: c.findings,
    }
}

/// The runtime's other spec directories, with the devices each defines.
struct RuntimeView {
    /// Position of the output directory among the spec directories.
    ours: usize,
    /// Other directories: (position, directory, name → files defining it).
    others: Vec<(usize, PathBuf, BTreeMap<String, Vec<PathBuf>>)>,
}

struct Checker<'a> {
    root: &'a HostRoot,
    findings: Vec<Finding>,
    checked: Checked,
}

impl Checker<'_> {
    fn push(
        &mut self,
        kind: Kind,
        file: PathBuf,
        generator: Option<&str>,
        device: Option<String>,
        other: Option<PathBuf>,
        reason: String,
    ) {
        self.findings.push(Finding {
            kind,
            severity: kind.severity(),
            file,
            generator: generator.map(str::to_string),
            device,
            other,
            reason,
        });
    }

    /// The hooks of every spec runtimes load from the output and spec
    /// directories, any producer's: `unsafe-hook` and `missing-hook`.
    fn hooks(&mut self, dirs: &Dirs) {
        let mut inputs: Vec<Input> = dirs
            .spec_dirs
            .iter()
            .map(|d| Input {
                path: d.clone(),
                explicit: false,
            })
            .collect();
        if !dirs.spec_dirs.iter().any(|d| same_dir(d, &dirs.output_dir)) {
            inputs.push(Input {
                path: dirs.output_dir.clone(),
                explicit: false,
            });
        }
        let view = scan(&inputs);
        for f in &view.files {
            let Some(spec) = &f.spec else { continue };
            let root = self.root;
            for h in cdi::hook_check::inspect(spec, &|p| root.program(p)) {
                let kind = if h.missing {
                    Kind::MissingHook
                } else {
                    Kind::UnsafeHook
                };
                let device = h.device.map(|d| format!("{}={d}", spec.kind));
                self.push(
                    kind,
                    f.path.clone(),
                    None,
                    device,
                    None,
                    format!("{}: {}", h.location, h.message),
                );
            }
        }
    }

    /// The ownership state of `dir`, or `None` (and a finding) when it
    /// cannot be read: generate would not write there either.
    fn ownership(&mut self, dir: &Path) -> Option<Ownership> {
        match Ownership::read(dir) {
            Ok(o) => Some(o),
            Err(e) => {
                let reason = match &e {
                    write::Error::BadState { reason, .. } => format!(
                        "corrupt state file: {reason}; generate will not write in {} until it is removed",
                        dir.display()
                    ),
                    write::Error::Io { source, .. } => format!("cannot read: {source}"),
                    write::Error::Read(e) => format!("cannot read: {}", e.reason()),
                    other => other.to_string(),
                };
                self.push(
                    Kind::Unreadable,
                    dir.join(write::STATE_FILE),
                    None,
                    None,
                    None,
                    reason,
                );
                None
            }
        }
    }

    /// Whether a node path named in a spec on disk no longer exists on the
    /// host. Only absolute `/dev` paths are looked up, and only when the
    /// root has a `/dev` to look at.
    fn node_gone(&self, path: &str) -> bool {
        let p = Path::new(path);
        let plain = p.starts_with("/dev")
            && !p
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
        plain && self.root.has_devfs() && matches!(self.root.dev_entry(p), Ok(None))
    }

    /// The content of a file generate would write, or `None` with the
    /// finding when there is none to compare: `missing` (the reason given)
    /// when absent, foreign when not a regular file, or unreadable.
    fn on_disk(&mut self, path: &Path, g: Option<&str>, missing: String) -> Option<Vec<u8>> {
        let (kind, reason) = match write::on_disk(path) {
            Ok(OnDisk::Bytes(b)) => return Some(b),
            Err(e) => {
                self.unreadable(path.to_path_buf(), g, &e);
                return None;
            }
            Ok(OnDisk::Absent) => (Kind::Missing, missing),
            Ok(OnDisk::NotRegular(what)) => (
                Kind::Foreign,
                format!("{what}, not a regular file: generate will not replace it"),
            ),
        };
        self.push(kind, path.to_path_buf(), g, None, None, reason);
        None
    }

    /// One generator's spec file, and the files of its it would remove;
    /// the files of other tools in `spec_dirs` that define its devices.
    fn spec(&mut self, dir: &Path, defined: &generate::Defined, own: &Ownership, p: &Planned) {
        let g = Some(p.generator.as_str());
        if let Some(spec) = &p.spec {
            self.checked.specs += 1;
            let path = dir.join(&p.file);
            let missing = format!(
                "not on disk: generate would write it ({})",
                plural(spec.devices.len(), "device")
            );
            if let Some(old) = self.on_disk(&path, g, missing) {
                self.compare_spec(&path, own, p, spec, &old);
            }
            let mine: BTreeSet<String> = own.owned_by(&p.generator).into_iter().collect();
            for c in defined.conflicts(p, &mine) {
                let (kind, reason) = if c.owner.is_some() {
                    (
                        Kind::Conflict,
                        format!(
                            "also defined in {} in the same directory: runtimes drop both definitions, and generate will not write this file",
                            c.other.display()
                        ),
                    )
                } else {
                    (
                        Kind::Competing,
                        format!(
                            "also defined in {}, which cdigen did not write: {}, and generate will not write this file; {}",
                            c.other.display(),
                            generate::consequence(c.same_dir),
                            generate::coexist::fix(c.producer, &c.other, &c.generator)
                        ),
                    )
                };
                self.push(
                    kind,
                    dir.join(&p.file),
                    g,
                    Some(c.name),
                    Some(c.other),
                    reason,
                );
            }
        }
        let keep: BTreeSet<String> = p
            .spec
            .as_ref()
            .map(|_| p.file.clone())
            .into_iter()
            .collect();
        let why = if p.spec.is_some() {
            format!("generator {:?} now writes {}", p.generator, p.file)
        } else {
            format!("generator {:?} selects no device now", p.generator)
        };
        self.orphans(dir, own, &keep, &p.generator, &why, true);
    }

    /// A spec on disk that is not what generate would write.
    fn compare_spec(&mut self, path: &Path, own: &Ownership, p: &Planned, spec: &Spec, old: &[u8]) {
        let g = Some(p.generator.as_str());
        if old == p.bytes.as_slice() {
            self.unowned_check(path, own, &p.file, g, old);
            return;
        }
        let edited = match own.owner(&p.file) {
            None => {
                self.push(
                    Kind::Foreign,
                    path.to_path_buf(),
                    g,
                    None,
                    None,
                    "not written by cdigen: generate will not overwrite it (remove it or move it away)"
                        .into(),
                );
                return;
            }
            Some(_) => !own.owns(&p.file, old),
        };
        if edited {
            self.push(
                Kind::Stale,
                path.to_path_buf(),
                g,
                None,
                None,
                "changed since cdigen wrote it: generate will not overwrite it (remove it or move it away)"
                    .into(),
            );
        }
        let format = Format::from_path(path).unwrap_or(Format::Yaml);
        let reasons = match cdi::codec::parse(old, format) {
            Ok(on_disk) => {
                let gone = |n: &str| self.node_gone(n);
                let mut r: Vec<(Option<String>, String)> =
                    diff::spec_reasons(&on_disk, spec, &gone)
                        .into_iter()
                        .map(|r| (r.device, r.text))
                        .collect();
                if r.is_empty() {
                    let d = diff::text_difference(old, &p.bytes)
                        .unwrap_or_else(|| "the bytes differ".into());
                    r.push((None, format!("content differs: {d}")));
                }
                r
            }
            Err(e) => vec![(None, format!("the file on disk cannot be parsed: {e}"))],
        };
        for (device, text) in reasons {
            self.push(Kind::Stale, path.to_path_buf(), g, device, None, text);
        }
    }

    /// A current file whose content cdigen has no record of writing.
    fn unowned_check(
        &mut self,
        path: &Path,
        own: &Ownership,
        name: &str,
        g: Option<&str>,
        bytes: &[u8],
    ) {
        if !own.owns(name, bytes) {
            self.push(
                Kind::Unowned,
                path.to_path_buf(),
                g,
                None,
                None,
                "current, but cdigen has no record of writing it: generate will refuse to update it when it changes"
                    .into(),
            );
        }
    }

    /// The files `generator` wrote that generate would no longer write,
    /// decided as generate decides ([`Ownership::stale`]).
    fn orphans(
        &mut self,
        dir: &Path,
        own: &Ownership,
        keep: &BTreeSet<String>,
        generator: &str,
        why: &str,
        spec: bool,
    ) {
        let g = Some(generator);
        let stale = match own.stale(dir, generator, keep) {
            Ok(s) => s,
            Err(e) => return self.unreadable(dir.to_path_buf(), g, &e),
        };
        for (name, decision) in stale {
            let reason = match decision {
                // Generate just forgets it.
                Stale::Gone => continue,
                Stale::Remove => format!("{why}: generate would remove it"),
                Stale::LeftAlone(LeftAlone::NotRegular(what)) => format!(
                    "{why}, but it is {what}, not a regular file: generate will leave it alone and forget it; remove it by hand"
                ),
                Stale::LeftAlone(LeftAlone::Changed) => format!(
                    "{why}, but it was changed since cdigen wrote it: generate will leave it alone and forget it; remove it by hand"
                ),
            };
            if spec {
                self.checked.specs += 1;
            } else {
                self.checked.device_info += 1;
            }
            self.push(Kind::Orphan, dir.join(&name), g, None, None, reason);
        }
    }

    fn unreadable(&mut self, path: PathBuf, g: Option<&str>, e: &write::Error) {
        let reason = match e {
            write::Error::Read(e) => format!("cannot read: {}", e.reason()),
            other => format!("cannot read: {}", error_chain(other)),
        };
        self.push(Kind::Unreadable, path, g, None, None, reason);
    }

    /// One generator's device-info files.
    fn devinfo(&mut self, dir: &Path, own: &Ownership, p: &Planned) {
        let g = Some(p.generator.as_str());
        let mut keep = BTreeSet::new();
        for (name, bytes) in &p.devinfo {
            keep.insert(name.as_str());
            self.checked.device_info += 1;
            let path = dir.join(name);
            let Some(old) = self.on_disk(&path, g, "not on disk: generate would write it".into())
            else {
                continue;
            };
            if old == *bytes {
                self.unowned_check(&path, own, name, g, &old);
                continue;
            }
            let reason = match own.owner(name) {
                None => {
                    self.push(
                        Kind::Foreign,
                        path,
                        g,
                        None,
                        None,
                        "not written by cdigen: generate will not overwrite it (remove it or move it away)".into(),
                    );
                    continue;
                }
                Some(_) if !own.owns(name, &old) => {
                    "changed since cdigen wrote it: generate will not overwrite it (remove it or move it away)".to_string()
                }
                Some(_) => devinfo_difference(&old, bytes),
            };
            self.push(Kind::Stale, path, g, None, None, reason);
        }
        let why = format!(
            "its device is gone (generator {:?} no longer selects it)",
            p.generator
        );
        let keep: BTreeSet<String> = keep.into_iter().map(str::to_string).collect();
        self.orphans(dir, own, &keep, &p.generator, &why, false);
    }

    /// The runtime's spec directories other than the output directory, or
    /// `None` (and a warning) when the output directory is not one of them.
    fn runtime_view(&mut self, dirs: &Dirs) -> Option<RuntimeView> {
        let Some(ours) = dirs
            .spec_dirs
            .iter()
            .rposition(|d| same_dir(d, &dirs.output_dir))
        else {
            let listed: Vec<String> = dirs
                .spec_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            self.push(
                Kind::NotLoaded,
                dirs.output_dir.clone(),
                None,
                None,
                None,
                format!(
                    "not one of the spec directories ({}): runtimes that read only those do not see these devices (name the runtime's directories with --spec-dir)",
                    listed.join(", ")
                ),
            );
            return None;
        };
        let mut others = Vec::new();
        let mut seen: Vec<&Path> = vec![&dirs.output_dir];
        for (i, d) in dirs.spec_dirs.iter().enumerate() {
            if seen.iter().any(|s| same_dir(s, d)) {
                continue;
            }
            seen.push(d);
            let view = scan(&[Input {
                path: d.clone(),
                explicit: false,
            }]);
            for e in &view.input_errors {
                self.push(Kind::Unreadable, d.clone(), None, None, None, e.clone());
            }
            // Other tools' files there are `competing` findings (see
            // `spec`); cdigen's own are weighed here.
            let own = Ownership::read(d).unwrap_or_default();
            let cdigens = |f: &&crate::cdi::dirs::FileReport| {
                f.path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| own.owner(n).is_some())
            };
            let mut names: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
            for f in view.files.iter().filter(|f| f.loaded).filter(cdigens) {
                let Some(kind) = &f.kind else { continue };
                for dev in &f.devices {
                    names
                        .entry(format!("{kind}={dev}"))
                        .or_default()
                        .push(f.path.clone());
                }
            }
            others.push((i, d.clone(), names));
        }
        Some(RuntimeView { ours, others })
    }

    /// How the devices of `p` fare against the other spec directories.
    fn shadowing(&mut self, dir: &Path, view: &RuntimeView, p: &Planned) {
        let path = dir.join(&p.file);
        let g = Some(p.generator.as_str());
        for name in p.names() {
            for (i, other_dir, names) in &view.others {
                match names.get(&name).map(Vec::as_slice) {
                    None | Some([]) => {}
                    Some([one]) if *i > view.ours => self.push(
                        Kind::Shadowed,
                        path.clone(),
                        g,
                        Some(name.clone()),
                        Some(one.clone()),
                        format!(
                            "overridden by {}: a later spec directory wins, so runtimes use that definition, not this one",
                            one.display()
                        ),
                    ),
                    Some([one]) => self.push(
                        Kind::Shadows,
                        path.clone(),
                        g,
                        Some(name.clone()),
                        Some(one.clone()),
                        format!(
                            "overrides the definition in {} (an earlier spec directory): runtimes use this one",
                            one.display()
                        ),
                    ),
                    Some(many) => {
                        let files: Vec<String> =
                            many.iter().map(|f| f.display().to_string()).collect();
                        self.push(
                            Kind::Conflict,
                            path.clone(),
                            g,
                            Some(name.clone()),
                            many.first().cloned(),
                            format!(
                                "defined twice in {} ({}): runtimes drop every definition of it, this one included",
                                other_dir.display(),
                                files.join(", ")
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Why a device-info file cdigen wrote differs from the one generate
/// would write.
fn devinfo_difference(old: &[u8], new: &[u8]) -> String {
    let parsed: Result<serde_json::Value, _> = serde_json::from_slice(old);
    let found = match (parsed, serde_json::from_slice::<serde_json::Value>(new)) {
        (Ok(a), Ok(b)) => diff::first_difference(&a, &b),
        (Err(e), _) => return format!("the file on disk cannot be parsed: {e}"),
        (_, Err(_)) => None,
    };
    let d = found
        .or_else(|| diff::text_difference(old, new))
        .unwrap_or_else(|| "the bytes differ".into());
    format!("content differs: {d}")
}

/// An error and its causes, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// `1 device`, `2 devices`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests;
