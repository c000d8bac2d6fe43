//! The view runtimes build of spec directories: which files load, which
//! devices resolve, and what goes wrong across files.
//!
//! Mirrors the reference library's cache: directories are read in
//! priority order (later wins), non-recursively, loading only `*.json` and
//! `*.yaml`. A device defined in two files of one directory is dropped by
//! runtimes (both definitions), and a device in a higher-priority
//! directory shadows the same device in a lower one. `cdigen validate`,
//! `cdigen list` and `cdigen inject` are built on this.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::codec::Format;
use super::name::{Kind, QualifiedName};
use super::spec::Spec;
use super::{parse_file, read_file, validate};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file (or a device in it) will not work, or a hook of it lets a
    /// container run code as root on the host.
    Error,
    /// Works, but probably not as intended.
    Warning,
}

/// One finding about a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Where in the file (empty for the whole file).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// What is wrong and what was expected.
    pub message: String,
}

/// What was found in one file.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The file (written lossily where it is not UTF-8).
    #[serde(serialize_with = "crate::text::lossy_path")]
    pub path: PathBuf,
    /// Its kind, when it parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its device names, when it parsed.
    pub devices: Vec<String>,
    /// Everything wrong with it, errors first.
    pub findings: Vec<Finding>,
    /// Whether runtimes load it: a `*.json` or `*.yaml` file valid on its
    /// own (its devices may still be dropped as conflicting).
    #[serde(skip)]
    pub loaded: bool,
    /// The spec, when runtimes load it (what `inject` applies).
    #[serde(skip)]
    pub spec: Option<Spec>,
    /// Which input (an index into the inputs scanned) the file comes from:
    /// files of one input share a priority.
    #[serde(skip)]
    pub input: usize,
}

impl FileReport {
    /// True when the file has an error.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// A device a runtime would resolve, with the file it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedDevice {
    /// `vendor/class=name`.
    pub name: String,
    /// The spec file defining it (written lossily where it is not UTF-8).
    #[serde(serialize_with = "crate::text::lossy_path")]
    pub path: PathBuf,
    /// That file's report: an index into [`Scan::files`].
    #[serde(skip)]
    pub file: usize,
}

/// The result of scanning spec directories and files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scan {
    /// One report per file, in scan order.
    pub files: Vec<FileReport>,
    /// Problems with the inputs themselves (a missing path given explicitly).
    pub input_errors: Vec<String>,
    /// Devices a runtime would resolve, sorted by name.
    pub devices: Vec<ResolvedDevice>,
}

impl Scan {
    /// True when any file or input has an error.
    pub fn has_errors(&self) -> bool {
        !self.input_errors.is_empty() || self.files.iter().any(FileReport::has_errors)
    }
}

/// One input of a scan.
#[derive(Debug, Clone)]
pub struct Input {
    /// A directory or a single file.
    pub path: PathBuf,
    /// Whether the user named it (a missing explicit path is an error; a
    /// missing default directory is skipped, as runtimes do).
    pub explicit: bool,
}

struct Loaded {
    report_index: usize,
    kind: Kind,
    names: Vec<String>,
}

/// What a file defines, known to the caller of [`scan_known`] without
/// parsing it.
#[derive(Debug, Clone)]
pub struct Known {
    /// Its kind (`vendor/class`).
    pub kind: String,
    /// Its device names.
    pub devices: Vec<String>,
}

/// Scans inputs in priority order (later wins). Directories are grouped as
/// runtimes group them; a file given on its own is a group of one.
pub fn scan(inputs: &[Input]) -> Scan {
    scan_known(inputs, &|_, _| None)
}

/// [`scan`], taking a file whose path and bytes `known` recognizes as
/// defining what it says, unparsed: a spec valid on its own (`loaded`),
/// whose report has no findings of its own and no `spec`. For a caller
/// holding the bytes of a spec it validated and that parse to what it
/// says (`generate`, for its own files, which it has just planned): those
/// bytes would parse to the same, so only the other files are parsed.
pub fn scan_known(inputs: &[Input], known: &dyn Fn(&Path, &[u8]) -> Option<Known>) -> Scan {
    let mut out = Scan::default();
    // Resolved devices so far: name -> (path, group index, report index).
    let mut resolved: BTreeMap<String, (PathBuf, usize, usize)> = BTreeMap::new();
    let mut conflicted: Vec<String> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for (group, input) in inputs.iter().enumerate() {
        // The same path twice would shadow itself.
        if seen.contains(&input.path) {
            continue;
        }
        seen.push(input.path.clone());
        let files = match list_spec_files(&input.path) {
            Ok(files) => files,
            Err(e) => {
                if input.explicit || e.kind() != std::io::ErrorKind::NotFound {
                    out.input_errors.push(format!(
                        "cannot read {}: {e}",
                        crate::text::path(&input.path)
                    ));
                }
                continue;
            }
        };
        let mut loaded: Vec<Loaded> = Vec::new();
        for path in files {
            if let Some(l) = load_one(&mut out, path, group, known) {
                loaded.push(l);
            }
        }
        // Same device in two files of one group: runtimes drop it.
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for l in &loaded {
            for n in &l.names {
                by_name
                    .entry(format!("{}={n}", l.kind))
                    .or_default()
                    .push(l.report_index);
            }
        }
        for (name, idx) in &by_name {
            if idx.len() > 1 {
                conflicted.push(name.clone());
                for &i in idx {
                    let others: Vec<String> = idx
                        .iter()
                        .filter(|&&j| j != i)
                        .filter_map(|&j| out.files.get(j))
                        .map(|f| crate::text::path(&f.path).to_string())
                        .collect();
                    if let Some(f) = out.files.get_mut(i) {
                        f.findings.push(Finding {
                            severity: Severity::Error,
                            location: format!("device {name:?}"),
                            message: format!(
                                "also defined in {} in the same directory: runtimes drop every \
                                 definition of a conflicting device",
                                others.join(", ")
                            ),
                        });
                    }
                }
                continue;
            }
            let Some(&i) = idx.first() else { continue };
            let Some(path) = out.files.get(i).map(|f| f.path.clone()) else {
                continue;
            };
            if let Some((lower, lower_group, _)) =
                resolved.insert(name.clone(), (path.clone(), group, i))
                && lower_group != group
                && let Some(f) = out.files.iter_mut().find(|f| f.path == lower)
            {
                f.findings.push(Finding {
                    severity: Severity::Warning,
                    location: format!("device {name:?}"),
                    message: format!(
                        "shadowed by {} (a later spec directory wins)",
                        crate::text::path(&path)
                    ),
                });
            }
        }
    }
    for name in conflicted {
        resolved.remove(&name);
    }
    let mut devices: Vec<ResolvedDevice> = resolved
        .into_iter()
        .map(|(name, (path, _, file))| ResolvedDevice { name, path, file })
        .collect();
    devices.sort_by(|a, b| super::codec::natural_cmp(&a.name, &b.name));
    out.devices = devices;
    for f in &mut out.files {
        f.findings.sort_by_key(|x| x.severity);
    }
    out
}

/// Loads and validates one file, recording its report. Returns what it
/// defines when it is valid (runtimes use only valid files). A file that
/// is not a regular file (a symlink is followed to one, as runtimes do)
/// is reported and never opened ([`crate::fsio`]).
fn load_one(
    out: &mut Scan,
    path: PathBuf,
    input: usize,
    known: &dyn Fn(&Path, &[u8]) -> Option<Known>,
) -> Option<Loaded> {
    let mut report = FileReport {
        path: path.clone(),
        kind: None,
        devices: Vec::new(),
        findings: Vec::new(),
        loaded: false,
        spec: None,
        input,
    };
    if Format::from_path(&path).is_none() {
        report.findings.push(Finding {
            severity: Severity::Warning,
            location: String::new(),
            message: "ignored by runtimes: only *.json and *.yaml files are loaded".into(),
        });
        out.files.push(report);
        return None;
    }
    let read = read_file(&path);
    if let Ok(bytes) = &read
        && let Some(k) = known(&path, bytes)
        && let Ok(kind) = Kind::parse(&k.kind)
    {
        report.kind = Some(k.kind);
        report.devices = k.devices;
        report.loaded = true;
        let loaded = Loaded {
            report_index: out.files.len(),
            kind,
            names: report.devices.clone(),
        };
        out.files.push(report);
        return Some(loaded);
    }
    let spec: Option<Spec> = match read.and_then(|bytes| parse_file(&path, &bytes)) {
        Ok(spec) => Some(spec),
        Err(e) => {
            let message = match &e {
                super::LoadError::Parse { cause, .. } => cause.to_string(),
                super::LoadError::File(e @ crate::fsio::Error::Io { .. }) => {
                    format!("cannot read: {}", e.reason())
                }
                super::LoadError::File(e) => e.reason(),
                other => std::error::Error::source(other)
                    .map_or_else(|| other.to_string(), |s| format!("cannot read: {s}")),
            };
            report.findings.push(Finding {
                severity: Severity::Error,
                location: String::new(),
                message,
            });
            None
        }
    };
    let mut result = None;
    if let Some(spec) = spec {
        report.kind = Some(spec.kind.clone());
        report.devices = spec.devices.iter().map(|d| d.name.clone()).collect();
        let problems = validate(&spec);
        for p in &problems {
            report.findings.push(Finding {
                severity: Severity::Error,
                location: p.location.clone(),
                message: p.message.clone(),
            });
        }
        if let Some(c) = super::validate::env_collision(&spec) {
            let q = |s: &str| crate::text::quoted(s, 80);
            report.findings.push(Finding {
                severity: Severity::Warning,
                location: format!("devices {} and {}", q(&c.first), q(&c.second)),
                message: format!(
                    "both set {} (to {} and {}): runtimes merge the env of the devices a \
                     container gets by variable name, so a container given both sees only one \
                     of the values",
                    q(&c.variable),
                    q(&c.first_value),
                    q(&c.second_value)
                ),
            });
        }
        // The hooks of a spec runtimes load: run as root on the host.
        if problems.is_empty() {
            // A program missing is an error too: every container given
            // the device fails to start.
            for h in super::hook_check::inspect(&spec, &crate::trust::program) {
                report.findings.push(Finding {
                    severity: Severity::Error,
                    location: h.location,
                    message: h.message,
                });
            }
        }
        if problems.is_empty()
            && let Ok(kind) = Kind::parse(&spec.kind)
        {
            report.loaded = true;
            result = Some(Loaded {
                report_index: out.files.len(),
                kind,
                names: report.devices.clone(),
            });
            report.spec = Some(spec);
        }
    }
    out.files.push(report);
    result
}

/// Whether a file name, by its bytes, is a spec name or looks like a
/// misnamed one (`*.yml`).
fn wanted_name(name: &std::ffi::OsStr) -> bool {
    let name = name.as_bytes();
    [&b".json"[..], b".yaml", b".yml"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// The files of an input that matter: a directory's entries whose names
/// are spec names or look like misnamed ones (`*.yml`), subdirectories
/// left out, sorted by name; or a single file. Whether each may be read
/// is decided when it is read.
fn list_spec_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        if !wanted_name(&entry.file_name()) {
            continue;
        }
        // A real subdirectory is skipped, as runtimes skip it.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = entry.path();
        files.push(p);
    }
    files.sort();
    Ok(files)
}

/// Every device name a spec defines, qualified. Invalid names are skipped.
pub fn qualified_names(spec: &Spec) -> Vec<QualifiedName> {
    let Ok(kind) = Kind::parse(&spec.kind) else {
        return Vec::new();
    };
    spec.devices
        .iter()
        .filter_map(|d| QualifiedName::new(kind.clone(), &d.name).ok())
        .collect()
}
