//! Device health beyond presence: the codes of every reason a device is
//! unhealthy, their taint effects, the admin's `--ignore-health` setting,
//! and the vendor-neutral signals sysfs has for a PCI function.
//!
//! The signals ([`pci`]), read through the root for every device every
//! [`POLL`], and after a pass for the devices it found new or changed
//! ([`super::inventory::Read`]):
//!
//! - PCIe AER counters (`aer_dev_fatal`, `aer_dev_nonfatal`; the kernel's
//!   `Documentation/ABI/testing/sysfs-bus-pci-devices-aer-stats`: lines
//!   `NAME COUNT`, then `TOTAL_ERR_FATAL N`). They are cumulative since
//!   the kernel created the function: the first reading is the baseline
//!   ([`Baseline`]), and the device is unhealthy once a total rises above
//!   it ([`Code::AerFatal`], [`Code::AerNonFatal`]). It stays so until
//!   the function is re-created (its counters restart below the baseline,
//!   which then starts again) or cdigen restarts: the baseline is kept in
//!   memory only, so a restart takes the counts as they are then (that is
//!   how an admin clears the taint after checking the device).
//!   Correctable errors (`aer_dev_correctable`) are the link recovering
//!   by itself, common on healthy links: not a signal.
//! - The link: `current_link_width` below `max_link_width`
//!   ([`Code::LinkWidthDegraded`]), `current_link_speed` below
//!   `max_link_speed` ([`Code::LinkSpeedDegraded`], ignored by default:
//!   GPUs and NICs lower their link speed while idle to save power).
//!   `Unknown` or `0` is no reading.
//! - The function itself: its directory, there when cdigen last looked,
//!   gone ([`Code::FunctionRemoved`]; the next pass drops the device, or
//!   keeps it as [`Code::GoneWhileAllocated`]).
//!
//! A VF whose own file is missing or says nothing (VFs often have no AER
//! capability and no link of their own) is judged by its PF's
//! (`physfn/...`): the PF's link and errors are the VF's. A PF's files are
//! read once a pass, for all its VFs.
//!
//! A file that cannot be read or parsed (too large, not text, garbage) is
//! skipped with a warning naming it (once per file; then at debug level):
//! no signal, never a panic.
//!
//! Vendor signals come from elsewhere, through [`VendorHealth`]: NVIDIA
//! XID events from NVML ([`super::xid`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::model::Device;
use crate::root::HostRoot;

/// How often the signals of every device are read.
pub const POLL: Duration = Duration::from_secs(10);

/// The most bytes an AER counter file may have (the kernel's are a few
/// hundred).
pub const MAX_AER_FILE: u64 = 8192;

/// The most bytes a link attribute may have.
const MAX_LINK_FILE: u64 = 256;

/// Why a device is unhealthy, as a short code: the value of its taint
/// (`<driver>/unhealthy=<code>`) and what `--ignore-health` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// A device node is missing from `/dev`.
    DeviceNodeMissing,
    /// A device node has other numbers than the kernel's.
    DeviceNodeMismatch,
    /// A device node's path is no device node.
    NotADeviceNode,
    /// A device node cannot be read.
    DeviceNodeUnreadable,
    /// A PCI device with no driver bound.
    NoDriverBound,
    /// Gone from the host while a pod holds it.
    GoneWhileAllocated,
    /// The PCI function's sysfs directory is gone.
    FunctionRemoved,
    /// A fatal PCIe AER counter rose.
    AerFatal,
    /// A non-fatal (uncorrectable) PCIe AER counter rose.
    AerNonFatal,
    /// The PCIe link runs on fewer lanes than it can.
    LinkWidthDegraded,
    /// The PCIe link runs slower than it can.
    LinkSpeedDegraded,
    /// NVML reported an NVIDIA XID error (`NvidiaXid79`). `None` only in
    /// `--ignore-health`: every XID (`NvidiaXid`).
    NvidiaXid(Option<u64>),
    /// NVML says the GPU is lost (`NVML_ERROR_GPU_IS_LOST`: fallen off
    /// the bus or otherwise inaccessible).
    NvidiaGpuLost,
    /// Anything else.
    Unhealthy,
}

impl Code {
    /// Every code (the XIDs as the one `NvidiaXid`).
    pub const ALL: [Code; 14] = [
        Code::DeviceNodeMissing,
        Code::DeviceNodeMismatch,
        Code::NotADeviceNode,
        Code::DeviceNodeUnreadable,
        Code::NoDriverBound,
        Code::GoneWhileAllocated,
        Code::FunctionRemoved,
        Code::AerFatal,
        Code::AerNonFatal,
        Code::LinkWidthDegraded,
        Code::LinkSpeedDegraded,
        Code::NvidiaXid(None),
        Code::NvidiaGpuLost,
        Code::Unhealthy,
    ];

    /// The code as taints and `--ignore-health` write it (a label value:
    /// `NvidiaXid79` is at most 29 characters).
    pub fn as_str(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Code::DeviceNodeMissing => "DeviceNodeMissing",
            Code::DeviceNodeMismatch => "DeviceNodeMismatch",
            Code::NotADeviceNode => "NotADeviceNode",
            Code::DeviceNodeUnreadable => "DeviceNodeUnreadable",
            Code::NoDriverBound => "NoDriverBound",
            Code::GoneWhileAllocated => "GoneWhileAllocated",
            Code::FunctionRemoved => "FunctionRemoved",
            Code::AerFatal => "AERFatal",
            Code::AerNonFatal => "AERNonFatal",
            Code::LinkWidthDegraded => "LinkWidthDegraded",
            Code::LinkSpeedDegraded => "LinkSpeedDegraded",
            Code::NvidiaXid(None) => "NvidiaXid",
            Code::NvidiaXid(Some(n)) => return Cow::Owned(format!("NvidiaXid{n}")),
            Code::NvidiaGpuLost => "NvidiaGpuLost",
            Code::Unhealthy => "Unhealthy",
        })
    }

    /// The effect of its taint: `NoExecute` (pods holding the device are
    /// evicted) only for a fatal AER error, after which the kernel resets
    /// the link and whatever ran on the device has lost its state; every
    /// other code only keeps new claims off the device (`NoSchedule`):
    /// eviction cannot be undone, and a missing node, a slower link, a
    /// non-fatal error or an XID (a contained ECC error ends only the
    /// process that hit it; NVIDIA's own drivers taint XIDs and a lost
    /// GPU `NoSchedule`) may leave a running workload working.
    pub fn effect(self) -> Effect {
        match self {
            Code::AerFatal => Effect::NoExecute,
            _ => Effect::NoSchedule,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl std::str::FromStr for Code {
    type Err = String;

    /// A code by its name, in any case; `NvidiaXid<N>` for XID N (a
    /// decimal number).
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(n) = t
            .get(..9)
            .filter(|p| p.eq_ignore_ascii_case("NvidiaXid"))
            .and_then(|_| t.get(9..))
            .filter(|n| !n.is_empty() && n.len() <= 20 && n.bytes().all(|b| b.is_ascii_digit()))
            && let Ok(n) = n.parse::<u64>()
        {
            return Ok(Code::NvidiaXid(Some(n)));
        }
        Code::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| {
                let all: Vec<String> = Code::ALL
                    .iter()
                    .map(|c| match c {
                        Code::NvidiaXid(None) => "NvidiaXid<N>".to_string(),
                        c => c.as_str().into_owned(),
                    })
                    .collect();
                format!(
                    "{} is not a health code (one of {})",
                    crate::text::quoted(s, 64),
                    all.join(", ")
                )
            })
    }
}

/// A DRA device taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// New claims do not get the device.
    NoSchedule,
    /// Pods of the claims that hold it are evicted too.
    NoExecute,
}

impl Effect {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::NoSchedule => "NoSchedule",
            Effect::NoExecute => "NoExecute",
        }
    }
}

/// One reason a device is unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its code.
    pub code: Code,
    /// What was seen, in words.
    pub detail: String,
}

/// Why a device is unhealthy: at least one problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The problems, in the order found.
    pub problems: Vec<Problem>,
}

impl Unhealthy {
    /// One problem.
    pub fn new(code: Code, detail: impl Into<String>) -> Unhealthy {
        Unhealthy {
            problems: vec![Problem {
                code,
                detail: detail.into(),
            }],
        }
    }

    /// The problems' codes, each once, in order.
    pub fn codes(&self) -> Vec<Code> {
        let mut out: Vec<Code> = Vec::new();
        for p in &self.problems {
            if !out.contains(&p.code) {
                out.push(p.code);
            }
        }
        out
    }

    /// The same problems, each detail prefixed with `prefix: `.
    pub fn prefixed(&self, prefix: &str) -> Unhealthy {
        Unhealthy {
            problems: self
                .problems
                .iter()
                .map(|p| Problem {
                    code: p.code,
                    detail: format!("{prefix}: {}", p.detail),
                })
                .collect(),
        }
    }
}

impl fmt::Display for Unhealthy {
    /// The details, joined by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&p.detail)?;
        }
        Ok(())
    }
}

impl From<&str> for Unhealthy {
    /// A reason with no code of its own ([`Code::Unhealthy`]).
    fn from(why: &str) -> Unhealthy {
        Unhealthy::new(Code::Unhealthy, why)
    }
}

/// A source of vendor health signals (NVIDIA XID events:
/// [`super::xid::XidHealth`]), asked about each device of a pass.
pub trait VendorHealth: fmt::Debug + Send + Sync {
    /// The problems it knows of `d`.
    fn problems(&self, d: &Device) -> Vec<Problem>;
}

/// What the admin set: the codes not acted on (`--ignore-health`); the
/// files already warned about; the vendor health sources.
#[derive(Debug, Clone)]
pub struct Checks {
    ignore: BTreeSet<Code>,
    warned: Arc<Mutex<BTreeSet<PathBuf>>>,
    vendor: Vec<Arc<dyn VendorHealth>>,
}

/// The XIDs NVIDIA's device plugin and DRA driver leave out: errors of
/// the application on the GPU, not of the GPU (NVIDIA's XID catalog): 13
/// graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
/// processing, 45 preemptive cleanup after previous errors, 68 video
/// processor exception, 109 context switch timeout.
pub const APPLICATION_XIDS: [u64; 6] = [13, 31, 43, 45, 68, 109];

/// What `--ignore-health` is when not given (and what `default` in it
/// stands for): a slower link, and the [`APPLICATION_XIDS`].
pub const DEFAULT_IGNORE: &str =
    "LinkSpeedDegraded,NvidiaXid13,NvidiaXid31,NvidiaXid43,NvidiaXid45,NvidiaXid68,NvidiaXid109";

impl Default for Checks {
    /// [`DEFAULT_IGNORE`] ignored.
    fn default() -> Checks {
        Checks::ignoring(default_ignore())
    }
}

/// The codes of [`DEFAULT_IGNORE`].
fn default_ignore() -> impl Iterator<Item = Code> {
    std::iter::once(Code::LinkSpeedDegraded).chain(
        APPLICATION_XIDS
            .into_iter()
            .map(|x| Code::NvidiaXid(Some(x))),
    )
}

impl Checks {
    /// Checks ignoring `codes`.
    pub fn ignoring(codes: impl IntoIterator<Item = Code>) -> Checks {
        Checks {
            ignore: codes.into_iter().collect(),
            warned: Arc::default(),
            vendor: Vec::new(),
        }
    }

    /// The same, also asking `source` about each device.
    #[must_use]
    pub fn with_vendor(mut self, source: Arc<dyn VendorHealth>) -> Checks {
        self.vendor.push(source);
        self
    }

    /// The codes ignored.
    pub fn ignored(&self) -> &BTreeSet<Code> {
        &self.ignore
    }

    /// Whether `code` is ignored: named, or an XID when `NvidiaXid` is.
    pub fn ignores(&self, code: Code) -> bool {
        self.ignore.contains(&code)
            || matches!(code, Code::NvidiaXid(Some(_)))
                && self.ignore.contains(&Code::NvidiaXid(None))
    }

    /// What the vendor sources know of `d`.
    pub fn vendor_problems(&self, d: &Device) -> Vec<Problem> {
        self.vendor.iter().flat_map(|v| v.problems(d)).collect()
    }

    /// `problems` without the ignored ones (each said at debug level);
    /// `None` when none is left.
    pub fn judge(&self, device: &str, problems: Vec<Problem>) -> Option<Unhealthy> {
        let problems: Vec<Problem> = problems
            .into_iter()
            .filter(|p| {
                let ignored = self.ignores(p.code);
                if ignored {
                    tracing::debug!(
                        "device {device}: ignoring {} (--ignore-health): {}",
                        p.code,
                        p.detail
                    );
                }
                !ignored
            })
            .collect();
        (!problems.is_empty()).then_some(Unhealthy { problems })
    }

    /// Warns about `file` once, then at debug level.
    fn warn(&self, file: &Path, why: &str) {
        let first = self
            .warned
            .lock()
            .map(|mut w| w.insert(file.to_path_buf()))
            .unwrap_or(true);
        if first {
            tracing::warn!(
                "{}: {why}; not used as a health signal",
                crate::text::escape(&file.display().to_string())
            );
        } else {
            tracing::debug!("{}: {why}", file.display());
        }
    }
}

/// Parses a `--ignore-health` list: codes separated by commas (any case),
/// `default` among them for [`DEFAULT_IGNORE`]'s, or `none`.
///
/// # Errors
/// A name that is no code, naming it and the codes.
pub fn parse_ignore(s: &str) -> Result<BTreeSet<Code>, String> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(BTreeSet::new());
    }
    let mut out = BTreeSet::new();
    for name in s.split(',') {
        if name.trim().eq_ignore_ascii_case("default") {
            out.extend(default_ignore());
        } else {
            out.insert(name.parse()?);
        }
    }
    Ok(out)
}

/// An AER counter file's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AerCounts {
    /// The file's total line (`TOTAL_ERR_FATAL`), else the sum of its
    /// counts.
    pub total: u64,
    /// Each error's count, by its name (`Surprise Down Error`).
    pub by_name: BTreeMap<String, u64>,
}

/// Parses an AER counter file: lines `NAME COUNT` (the name may have
/// spaces), one of them `<total_key> N`. The kernel notes that one
/// message may report several errors, so the total is its own line; a
/// file without one is summed.
///
/// # Errors
/// A line that does not end in a count, or no line at all.
pub fn parse_aer(text: &str, total_key: &str) -> Result<AerCounts, String> {
    let mut counts = AerCounts::default();
    let mut total = None;
    let mut any = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || {
            format!(
                "line {}: {} is not NAME COUNT",
                n + 1,
                crate::text::quoted(line, 80)
            )
        };
        let (name, count) = line.rsplit_once(char::is_whitespace).ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count: u64 = count.parse().map_err(|_| bad())?;
        any = true;
        if name == total_key {
            total = Some(count);
        } else {
            let c = counts.by_name.entry(name.to_string()).or_default();
            *c = c.saturating_add(count);
        }
    }
    if !any {
        return Err("no counts".into());
    }
    counts.total = total.unwrap_or_else(|| {
        counts
            .by_name
            .values()
            .fold(0u64, |a, b| a.saturating_add(*b))
    });
    Ok(counts)
}

/// Parses `current_link_speed`/`max_link_speed` (`16.0 GT/s PCIe`,
/// `2.5 GT/s`, `8 GT/s`) into MT/s; `Ok(None)` for `Unknown`.
///
/// # Errors
/// Anything else.
pub fn parse_link_speed(s: &str) -> Result<Option<u32>, String> {
    let s = s.trim();
    if s.starts_with("Unknown") {
        return Ok(None);
    }
    let bad = || format!("{} is not a link speed", crate::text::quoted(s, 64));
    let mut words = s.split_whitespace();
    let number = words.next().ok_or_else(bad)?;
    if words.next() != Some("GT/s") {
        return Err(bad());
    }
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 4 || frac.len() > 3 || !digits(int) || !digits(frac) {
        return Err(bad());
    }
    let int: u32 = int.parse().map_err(|_| bad())?;
    let frac: u32 = format!("{frac:0<3}").parse().map_err(|_| bad())?;
    let mts = int * 1000 + frac;
    Ok((mts > 0).then_some(mts))
}

/// Parses `current_link_width`/`max_link_width` (`16`, also `x16`);
/// `Ok(None)` for `0` (no link).
///
/// # Errors
/// Anything else.
pub fn parse_link_width(s: &str) -> Result<Option<u32>, String> {
    let t = s.trim();
    let t = t.strip_prefix('x').unwrap_or(t);
    if t.is_empty() || t.len() > 3 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{} is not a link width",
            crate::text::quoted(s.trim(), 64)
        ));
    }
    let w: u32 = t
        .parse()
        .map_err(|_| format!("{t:?} is not a link width"))?;
    Ok((w > 0).then_some(w))
}

/// What a check is measured against: the AER counts first seen, by
/// counter file (host path), and the functions' directories seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    aer: BTreeMap<PathBuf, AerCounts>,
    functions: BTreeSet<PathBuf>,
}

impl Baseline {
    /// How many counter files it holds.
    pub fn counter_files(&self) -> usize {
        self.aer.len()
    }
}

/// One health check over the devices of a pass: the admin's settings, the
/// last baseline, and the one being made (of the files read now).
#[derive(Debug)]
pub struct Pass<'a> {
    checks: &'a Checks,
    previous: &'a Baseline,
    next: Baseline,
    /// What each PF's files said, by its real directory: read once a
    /// pass for all its VFs.
    pfs: BTreeMap<PathBuf, PfSignals>,
}

/// A PF's signals, as far as its VFs needed them: each AER file's
/// counts and the link (`None`: not read yet; `Some(None)`: nothing
/// there).
#[derive(Debug, Default)]
struct PfSignals {
    aer: BTreeMap<&'static str, Option<AerCounts>>,
    link: Option<Option<(Reading, Reading)>>,
}

/// A link's (width, speed) readings: (current, max) each.
type Reading = (Option<u32>, Option<u32>);

impl<'a> Pass<'a> {
    /// A check against `previous`.
    pub fn new(checks: &'a Checks, previous: &'a Baseline) -> Pass<'a> {
        Pass {
            checks,
            previous,
            next: Baseline::default(),
            pfs: BTreeMap::new(),
        }
    }

    /// A check against `previous` that keeps its baseline of the files
    /// it does not read again ([`super::inventory::Read::Changed`]).
    pub fn carrying(checks: &'a Checks, previous: &'a Baseline) -> Pass<'a> {
        Pass {
            next: previous.clone(),
            ..Pass::new(checks, previous)
        }
    }

    /// The admin's settings.
    pub fn checks(&self) -> &Checks {
        self.checks
    }

    /// The baseline of the files read in this pass.
    pub fn finish(self) -> Baseline {
        self.next
    }

    /// The problems the sysfs signals of `d` show (none for a device that
    /// is no PCI function).
    pub fn pci(&mut self, root: &HostRoot, d: &Device) -> Vec<Problem> {
        let mut out = Vec::new();
        if d.pci.is_none() || !d.sysfs_path.starts_with("/sys/devices/") {
            return out;
        }
        let dir = Path::new(&d.sysfs_path);
        if !root.exists(dir) {
            if self.previous.functions.contains(dir) {
                self.next.functions.insert(dir.to_path_buf());
                out.push(Problem {
                    code: Code::FunctionRemoved,
                    detail: format!("{} is gone", d.sysfs_path),
                });
            }
            return out;
        }
        self.next.functions.insert(dir.to_path_buf());
        let pf = dir.join("physfn");
        // The PF's files as its real directory has them: its VFs share
        // one reading a pass.
        let pf = root.resolve(&pf).ok().map(|real| (pf, real));
        for (file, key, code, what) in [
            ("aer_dev_fatal", "TOTAL_ERR_FATAL", Code::AerFatal, "fatal"),
            (
                "aer_dev_nonfatal",
                "TOTAL_ERR_NONFATAL",
                Code::AerNonFatal,
                "non-fatal",
            ),
        ] {
            let own = dir.join(file);
            let counts = match self.aer(root, &own, key) {
                Some(c) => Some((own, c)),
                None => pf.as_ref().and_then(|(pf, real)| {
                    let theirs = pf.join(file);
                    self.pf_aer(root, real, &theirs, file, key)
                        .map(|c| (theirs, c))
                }),
            };
            if let Some((path, now)) = counts
                && let Some(p) = self.rise(&path, now, key, code, what)
            {
                out.push(p);
            }
        }
        let link = self.link(root, dir).or_else(|| {
            let (pf, real) = pf.as_ref()?;
            let (width, speed) = self.pf_link(root, real, pf)?;
            Some(Link {
                dir: pf.clone(),
                width,
                speed,
            })
        });
        if let Some(l) = link {
            if let (Some(cur), Some(max)) = (l.width.0, l.width.1)
                && cur < max
            {
                out.push(Problem {
                    code: Code::LinkWidthDegraded,
                    detail: format!("PCIe link x{cur} of x{max} ({})", l.dir.display()),
                });
            }
            if let (Some(cur), Some(max)) = (l.speed.0, l.speed.1)
                && cur < max
            {
                out.push(Problem {
                    code: Code::LinkSpeedDegraded,
                    detail: format!(
                        "PCIe link at {} of {} ({})",
                        gts(cur),
                        gts(max),
                        l.dir.display()
                    ),
                });
            }
        }
        out
    }

    /// The counts of the AER file `path`: `None` when it is missing, or
    /// cannot be read or parsed (warned about).
    fn aer(&self, root: &HostRoot, path: &Path, key: &str) -> Option<AerCounts> {
        let text = self.read(root, path, MAX_AER_FILE)?;
        match parse_aer(&text, key) {
            Ok(c) => Some(c),
            Err(e) => {
                self.checks.warn(path, &e);
                None
            }
        }
    }

    /// The counts of the AER file `file` of the PF whose real directory
    /// is `real`, read as `path` by the first VF that needs them.
    fn pf_aer(
        &mut self,
        root: &HostRoot,
        real: &Path,
        path: &Path,
        file: &'static str,
        key: &str,
    ) -> Option<AerCounts> {
        if let Some(known) = self.pfs.get(real).and_then(|s| s.aer.get(file)) {
            return known.clone();
        }
        let counts = self.aer(root, path, key);
        self.pfs
            .entry(real.to_path_buf())
            .or_default()
            .aer
            .insert(file, counts.clone());
        counts
    }

    /// The link readings of the PF whose real directory is `real`, read
    /// at `dir` by the first VF that needs them.
    fn pf_link(&mut self, root: &HostRoot, real: &Path, dir: &Path) -> Option<(Reading, Reading)> {
        if let Some(known) = self.pfs.get(real).and_then(|s| s.link) {
            return known;
        }
        let link = self.link(root, dir).map(|l| (l.width, l.speed));
        self.pfs.entry(real.to_path_buf()).or_default().link = Some(link);
        link
    }

    /// A problem when `now` rose above the baseline of `path` (kept, or
    /// made of `now` when there is none or the counters restarted).
    fn rise(
        &mut self,
        path: &Path,
        now: AerCounts,
        key: &str,
        code: Code,
        what: &str,
    ) -> Option<Problem> {
        let base = match self.previous.aer.get(path) {
            Some(b) if b.total <= now.total => b.clone(),
            _ => now.clone(),
        };
        let problem = (now.total > base.total).then(|| {
            let names: Vec<String> = now
                .by_name
                .iter()
                .filter_map(|(name, n)| {
                    let before = base.by_name.get(name).copied().unwrap_or(0);
                    (*n > before).then(|| format!("{name} +{}", n - before))
                })
                .collect();
            let which = if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join(", "))
            };
            Problem {
                code,
                detail: format!(
                    "{} new {what} PCIe error(s){which}: {} {key} is {}, {} when cdigen first read it",
                    now.total - base.total,
                    path.display(),
                    now.total,
                    base.total
                ),
            }
        });
        self.next.aer.insert(path.to_path_buf(), base);
        problem
    }

    /// The link of the function at `dir`, `None` when neither its width
    /// nor its speed is known.
    fn link(&self, root: &HostRoot, dir: &Path) -> Option<Link> {
        let read = |name: &str, parse: fn(&str) -> Result<Option<u32>, String>| {
            let path = dir.join(name);
            let text = self.read(root, &path, MAX_LINK_FILE)?;
            parse(&text)
                .map_err(|e| self.checks.warn(&path, &e))
                .ok()
                .flatten()
        };
        let width = (
            read("current_link_width", parse_link_width),
            read("max_link_width", parse_link_width),
        );
        let speed = (
            read("current_link_speed", parse_link_speed),
            read("max_link_speed", parse_link_speed),
        );
        let known = |(a, b): (Option<u32>, Option<u32>)| a.is_some() && b.is_some();
        (known(width) || known(speed)).then(|| Link {
            dir: dir.to_path_buf(),
            width,
            speed,
        })
    }

    /// The text of `path`: `None` when it is missing, or too large or not
    /// text (warned about).
    fn read(&self, root: &HostRoot, path: &Path, limit: u64) -> Option<String> {
        match root.read_limited(path, limit) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => Some(t),
                Err(_) => {
                    self.checks.warn(path, "not text");
                    None
                }
            },
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                self.checks.warn(path, &e.reason());
                None
            }
        }
    }
}

/// A function's link: (current, max) width and speed (MT/s).
struct Link {
    dir: PathBuf,
    width: (Option<u32>, Option<u32>),
    speed: (Option<u32>, Option<u32>),
}

/// MT/s as the kernel writes GT/s: `16.0 GT/s`, `2.5 GT/s`.
fn gts(mts: u32) -> String {
    let frac = format!("{:03}", mts % 1000);
    let frac = frac.trim_end_matches('0');
    format!(
        "{}.{} GT/s",
        mts / 1000,
        if frac.is_empty() { "0" } else { frac }
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    /// The kernel's `aer_dev_fatal` of a function that had one surprise
    /// down error.
    const FATAL: &str = "Undefined 0\nData Link Protocol 0\nSurprise Down Error 1\n\
Poisoned TLP 0\nFlow Control Protocol 0\nCompletion Timeout 0\nCompleter Abort 0\n\
Unexpected Completion 0\nReceiver Overflow 0\nMalformed TLP 0\nECRC 0\n\
Unsupported Request 0\nACS Violation 0\nUncorrectable Internal Error 0\n\
MC Blocked TLP 0\nAtomicOp Egress Blocked 0\nTLP Prefix Blocked Error 0\n\
Poisoned TLP Egress Blocked 0\nTOTAL_ERR_FATAL 1\n";

    #[test]
    fn aer_files_parse_by_their_total_line() {
        let c = parse_aer(FATAL, "TOTAL_ERR_FATAL").unwrap();
        assert_eq!(c.total, 1);
        assert_eq!(c.by_name["Surprise Down Error"], 1);
        assert_eq!(c.by_name["Poisoned TLP Egress Blocked"], 0);
        assert_eq!(c.by_name.len(), 18);
        // The total line is the total, even when the lines say more (one
        // message may report several errors).
        let c = parse_aer("Bad TLP 3\nBad DLLP 2\nTOTAL_ERR_COR 4\n", "TOTAL_ERR_COR").unwrap();
        assert_eq!(c.total, 4);
        // No total line: the sum; tabs and blank lines are fine.
        let c = parse_aer("A\t2\n\nB  3", "TOTAL_ERR_FATAL").unwrap();
        assert_eq!(c.total, 5);
        let huge = format!("A {}\nB {}\n", u64::MAX, u64::MAX);
        assert_eq!(parse_aer(&huge, "T").unwrap().total, u64::MAX);
        for (bad, why) in [
            ("", "no counts"),
            ("\n \n", "no counts"),
            (
                "Surprise Down Error\n",
                "line 1: \"Surprise Down Error\" is not NAME COUNT",
            ),
            ("A 1\nB -1\n", "line 2: \"B -1\" is not NAME COUNT"),
            ("A 1\n7\n", "line 2: \"7\" is not NAME COUNT"),
            ("A 0x10\n", "line 1: \"A 0x10\" is not NAME COUNT"),
            (
                "A 99999999999999999999999\n",
                "line 1: \"A 99999999999999999999999\" is not NAME COUNT",
            ),
        ] {
            assert_eq!(parse_aer(bad, "T"), Err(why.to_string()), "{bad:?}");
        }
    }

    #[test]
    fn link_attributes_parse_as_the_kernel_writes_them() {
        for (s, mts) in [
            ("16.0 GT/s PCIe\n", Some(16_000)),
            ("2.5 GT/s PCIe", Some(2_500)),
            ("8 GT/s", Some(8_000)),
            ("64.0 GT/s PCIe", Some(64_000)),
            ("Unknown", None),
            ("Unknown speed\n", None),
        ] {
            assert_eq!(parse_link_speed(s), Ok(mts), "{s:?}");
        }
        for bad in [
            "",
            "16.0",
            "fast GT/s",
            "1.2345 GT/s",
            "99999 GT/s",
            "-1 GT/s",
        ] {
            assert!(parse_link_speed(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_link_width("16\n"), Ok(Some(16)));
        assert_eq!(parse_link_width("x8"), Ok(Some(8)));
        assert_eq!(parse_link_width("0"), Ok(None));
        for bad in ["", "x", "sixteen", "1234", "-1"] {
            assert!(parse_link_width(bad).is_err(), "{bad:?}");
        }
        assert_eq!(gts(16_000), "16.0 GT/s");
        assert_eq!(gts(2_500), "2.5 GT/s");
    }

    #[test]
    fn the_ignore_list_names_codes() {
        assert_eq!(
            parse_ignore("AERNonFatal, linkwidthdegraded"),
            Ok(BTreeSet::from([Code::AerNonFatal, Code::LinkWidthDegraded]))
        );
        assert_eq!(parse_ignore("none"), Ok(BTreeSet::new()));
        assert_eq!(parse_ignore(""), Ok(BTreeSet::new()));
        assert_eq!(
            parse_ignore(DEFAULT_IGNORE),
            Ok(Checks::default().ignored().clone())
        );
        let e = parse_ignore("AERFatal,Sick").unwrap_err();
        assert!(
            e.starts_with("\"Sick\" is not a health code (one of DeviceNodeMissing, "),
            "{e}"
        );
        for c in Code::ALL {
            assert_eq!(c.as_str().parse::<Code>(), Ok(c));
        }
        // XIDs by number; `NvidiaXid` alone is every XID, `default` the
        // default's codes.
        assert_eq!(
            parse_ignore("nvidiaxid48,NvidiaXid"),
            Ok(BTreeSet::from([
                Code::NvidiaXid(Some(48)),
                Code::NvidiaXid(None)
            ]))
        );
        assert_eq!(Code::NvidiaXid(Some(79)).to_string(), "NvidiaXid79");
        assert_eq!(
            parse_ignore("default,AERNonFatal").unwrap(),
            Checks::default()
                .ignored()
                .iter()
                .copied()
                .chain([Code::AerNonFatal])
                .collect::<BTreeSet<_>>()
        );
        for bad in [
            "NvidiaXid-1",
            "NvidiaXid4x",
            "NvidiaXid99999999999999999999",
            "Xid48",
        ] {
            let e = parse_ignore(bad).unwrap_err();
            assert!(
                e.contains("is not a health code") && e.contains("NvidiaXid<N>"),
                "{e}"
            );
        }
        let all_xids = Checks::ignoring([Code::NvidiaXid(None)]);
        assert!(all_xids.ignores(Code::NvidiaXid(Some(79))));
        assert!(!all_xids.ignores(Code::NvidiaGpuLost));
        assert!(Checks::default().ignores(Code::NvidiaXid(Some(13))));
        assert!(!Checks::default().ignores(Code::NvidiaXid(Some(79))));
        // An ignored code leaves the device healthy; the others stay.
        let checks = Checks::ignoring([Code::AerNonFatal]);
        let p = |code| Problem {
            code,
            detail: "x".into(),
        };
        assert_eq!(checks.judge("d", vec![p(Code::AerNonFatal)]), None);
        assert_eq!(
            checks
                .judge("d", vec![p(Code::AerNonFatal), p(Code::AerFatal)])
                .unwrap()
                .codes(),
            [Code::AerFatal]
        );
    }

    const DIR: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3";
    const PF: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";

    /// A root with a PF and its VF `0000:3b:00.3`.
    fn host() -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(DIR)).unwrap();
        std::fs::create_dir_all(dir.path().join(PF)).unwrap();
        std::os::unix::fs::symlink("../0000:3b:00.0", dir.path().join(DIR).join("physfn")).unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    fn vf() -> Device {
        Device {
            id: "0000:3b:00.3".into(),
            sysfs_path: format!("/{DIR}"),
            pci: Some(crate::model::test_pci("0000:3b:00.3")),
            ..Default::default()
        }
    }

    fn write(dir: &tempfile::TempDir, rel: &str, text: &str) {
        std::fs::write(dir.path().join(rel), text).unwrap();
    }

    /// The codes and details of one check of `d` against `base`, and the
    /// baseline it leaves.
    fn check(
        root: &HostRoot,
        checks: &Checks,
        base: &Baseline,
        d: &Device,
    ) -> (Vec<(Code, String)>, Baseline) {
        let mut pass = Pass::new(checks, base);
        let got = pass
            .pci(&root.fresh(), d)
            .into_iter()
            .map(|p| (p.code, p.detail))
            .collect();
        (got, pass.finish())
    }

    #[test]
    fn the_vfs_of_a_pf_share_one_reading_of_its_files_a_pass() {
        let (dir, root) = host();
        let other = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.4";
        std::fs::create_dir_all(dir.path().join(other)).unwrap();
        std::os::unix::fs::symlink("../0000:3b:00.0", dir.path().join(other).join("physfn"))
            .unwrap();
        let second = Device {
            id: "0000:3b:00.4".into(),
            sysfs_path: format!("/{other}"),
            pci: Some(crate::model::test_pci("0000:3b:00.4")),
            ..Default::default()
        };
        let link = |cur: &str| {
            write(&dir, &format!("{PF}/current_link_width"), cur);
            write(&dir, &format!("{PF}/max_link_width"), "8\n");
        };
        link("4\n");
        let checks = Checks::default();
        let base = Baseline::default();
        let root = root.fresh();
        let mut pass = Pass::new(&checks, &base);
        let first = pass.pci(&root, &vf());
        // Mended after the first VF's check: the pass read the PF once.
        link("8\n");
        let then = pass.pci(&root, &second);
        let details =
            |p: Vec<Problem>| -> Vec<String> { p.into_iter().map(|p| p.detail).collect() };
        assert_eq!(
            details(first),
            [format!("PCIe link x4 of x8 (/{DIR}/physfn)")]
        );
        assert_eq!(
            details(then),
            [format!("PCIe link x4 of x8 (/{other}/physfn)")]
        );
        // The next pass reads it again.
        let mut pass = Pass::new(&checks, &base);
        assert!(pass.pci(&root, &vf()).is_empty());
        assert!(pass.pci(&root, &second).is_empty());
    }

    #[test]
    fn a_rise_over_the_first_reading_is_unhealthy_until_the_counters_restart() {
        let (dir, root) = host();
        let checks = Checks::default();
        let d = vf();
        // Nothing to read: no problem, no counts.
        let (got, base) = check(&root, &checks, &Baseline::default(), &d);
        assert!(got.is_empty() && base.counter_files() == 0, "{got:?}");
        // Counts already there when first read are the baseline.
        write(&dir, &format!("{DIR}/aer_dev_fatal"), FATAL);
        write(
            &dir,
            &format!("{DIR}/aer_dev_nonfatal"),
            "Poisoned TLP 4\nTOTAL_ERR_NONFATAL 4\n",
        );
        let (got, base) = check(&root, &checks, &Baseline::default(), &d);
        assert!(got.is_empty(), "{got:?}");
        assert_eq!(base.counter_files(), 2);
        // A rise: unhealthy, naming the errors, the file and both counts.
        let risen = FATAL
            .replace("Surprise Down Error 1", "Surprise Down Error 2")
            .replace("Completion Timeout 0", "Completion Timeout 1")
            .replace("TOTAL_ERR_FATAL 1", "TOTAL_ERR_FATAL 3");
        write(&dir, &format!("{DIR}/aer_dev_fatal"), &risen);
        let (got, base2) = check(&root, &checks, &base, &d);
        assert_eq!(
            got,
            [(
                Code::AerFatal,
                format!(
                    "2 new fatal PCIe error(s) (Completion Timeout +1, Surprise Down Error +1): \
                     /{DIR}/aer_dev_fatal TOTAL_ERR_FATAL is 3, 1 when cdigen first read it"
                )
            )]
        );
        // The baseline stays: still unhealthy on the next check.
        assert_eq!(base2, base);
        assert_eq!(check(&root, &checks, &base2, &d).0.len(), 1);
        // A non-fatal rise too.
        write(
            &dir,
            &format!("{DIR}/aer_dev_nonfatal"),
            "Poisoned TLP 5\nTOTAL_ERR_NONFATAL 5\n",
        );
        let codes: Vec<Code> = check(&root, &checks, &base2, &d)
            .0
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        assert_eq!(codes, [Code::AerFatal, Code::AerNonFatal]);
        // The function re-created: its counters restart, and so does the
        // baseline.
        write(&dir, &format!("{DIR}/aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n");
        write(
            &dir,
            &format!("{DIR}/aer_dev_nonfatal"),
            "TOTAL_ERR_NONFATAL 0\n",
        );
        let (got, base3) = check(&root, &checks, &base2, &d);
        assert!(got.is_empty(), "{got:?}");
        write(&dir, &format!("{DIR}/aer_dev_fatal"), "TOTAL_ERR_FATAL 1\n");
        assert_eq!(check(&root, &checks, &base3, &d).0[0].0, Code::AerFatal);
    }

    #[test]
    fn a_vf_without_its_own_signals_is_judged_by_its_pf() {
        let (dir, root) = host();
        let checks = Checks::ignoring([]);
        let d = vf();
        write(&dir, &format!("{PF}/aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n");
        // The VF's link says nothing; the PF's runs on 8 of 16 lanes, at
        // 8 of 16 GT/s.
        write(&dir, &format!("{DIR}/current_link_width"), "0\n");
        write(&dir, &format!("{DIR}/max_link_width"), "0\n");
        write(&dir, &format!("{DIR}/current_link_speed"), "Unknown\n");
        write(&dir, &format!("{DIR}/max_link_speed"), "Unknown\n");
        write(&dir, &format!("{PF}/current_link_width"), "8\n");
        write(&dir, &format!("{PF}/max_link_width"), "16\n");
        write(&dir, &format!("{PF}/current_link_speed"), "8.0 GT/s PCIe\n");
        write(&dir, &format!("{PF}/max_link_speed"), "16.0 GT/s PCIe\n");
        let (got, base) = check(&root, &checks, &Baseline::default(), &d);
        let pf = format!("/{DIR}/physfn");
        assert_eq!(
            got,
            [
                (
                    Code::LinkWidthDegraded,
                    format!("PCIe link x8 of x16 ({pf})")
                ),
                (
                    Code::LinkSpeedDegraded,
                    format!("PCIe link at 8.0 GT/s of 16.0 GT/s ({pf})")
                ),
            ]
        );
        write(&dir, &format!("{PF}/aer_dev_fatal"), "TOTAL_ERR_FATAL 1\n");
        let (got, _) = check(&root, &checks, &base, &d);
        assert_eq!(got[0].0, Code::AerFatal);
        assert!(got[0].1.contains(&format!("{pf}/aer_dev_fatal")), "{got:?}");
        // By default a slower link is no problem (GPUs slow down idle).
        let judged = Checks::default()
            .judge(
                "d",
                check(&root, &checks, &base, &d)
                    .0
                    .into_iter()
                    .map(|(code, detail)| Problem { code, detail })
                    .collect(),
            )
            .unwrap();
        assert_eq!(judged.codes(), [Code::AerFatal, Code::LinkWidthDegraded]);
        // The function gone: that alone, and only for one that was seen.
        std::fs::remove_dir_all(dir.path().join(DIR)).unwrap();
        let (got, after) = check(&root, &checks, &base, &d);
        assert_eq!(got, [(Code::FunctionRemoved, format!("/{DIR} is gone"))]);
        assert_eq!(check(&root, &checks, &after, &d).0, got);
        assert!(check(&root, &checks, &Baseline::default(), &d).0.is_empty());
        // Not a PCI function: nothing read.
        let mut usb = vf();
        usb.pci = None;
        assert!(check(&root, &checks, &base, &usb).0.is_empty());
    }

    #[test]
    fn hostile_signal_files_are_skipped_never_a_panic() {
        let (dir, root) = host();
        let checks = Checks::ignoring([]);
        let d = vf();
        // Too large, not text, garbage: each skipped (the PF's, which has
        // none, is not a fallback for a file that is there but bad).
        write(
            &dir,
            &format!("{DIR}/aer_dev_fatal"),
            &"A 1\n".repeat(10_000),
        );
        std::fs::write(
            dir.path().join(DIR).join("aer_dev_nonfatal"),
            [0xff, 0xfe, b' ', b'1'],
        )
        .unwrap();
        write(&dir, &format!("{DIR}/current_link_width"), "wide\n");
        write(&dir, &format!("{DIR}/max_link_width"), "16\n");
        write(&dir, &format!("{DIR}/current_link_speed"), "\u{0}\u{1}");
        write(&dir, &format!("{DIR}/max_link_speed"), "16.0 GT/s PCIe\n");
        let (got, base) = check(&root, &checks, &Baseline::default(), &d);
        assert!(got.is_empty() && base.counter_files() == 0, "{got:?}");
        // A directory where a file should be.
        std::fs::remove_file(dir.path().join(DIR).join("aer_dev_fatal")).unwrap();
        std::fs::create_dir(dir.path().join(DIR).join("aer_dev_fatal")).unwrap();
        assert!(check(&root, &checks, &base, &d).0.is_empty());
        // Random bytes, as a property: the parsers never panic, and what
        // parses is consistent.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let mut bytes = Vec::new();
            for _ in 0..(x % 64) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let alphabet = b"AB 0123456789\n\tTOTAL_ERR_FATAL.GT/sx-";
                bytes.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            let s = String::from_utf8(bytes).unwrap();
            if let Ok(c) = parse_aer(&s, "TOTAL_ERR_FATAL") {
                assert!(!c.by_name.contains_key("TOTAL_ERR_FATAL"), "{s:?}");
            }
            if let Ok(Some(w)) = parse_link_width(&s) {
                assert!(w > 0 && w < 1000, "{s:?}");
            }
            if let Ok(Some(m)) = parse_link_speed(&s) {
                assert_eq!(parse_link_speed(&gts(m)), Ok(Some(m)), "{s:?}");
            }
        }
    }
}
