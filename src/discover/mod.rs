//! Discovery: one module per backend, all behind the [`Backend`] trait and
//! registered in [`BACKENDS`].
//!
//! A backend reads the host only through [`HostRoot`] and returns model
//! [`Device`]s. A malformed or hostile entry becomes a [`Warning`] and is
//! skipped; `Err` means the backend as a whole could not run.
//!
//! Precedence: several backends may see the same hardware (a GPU is a DRM
//! device and, with the NVIDIA driver, an NVIDIA device). Each backend has
//! a precedence; a device (keyed by its real sysfs path) reported by a
//! backend of higher precedence is removed from the others' results, so a
//! more specific backend always wins, whatever the order they run in.
//!
//! What the generic backend scans is plain data ([`generic::Scan`]), built
//! by the caller from the generator definitions of the run: discovery
//! knows nothing of definitions.

pub(crate) mod devnode;
pub mod drm;
pub mod generic;
pub mod infiniband;
pub mod kfd;
pub mod nvidia;
pub mod pci;
pub mod pciids;
pub mod pf;
pub mod rdma;
pub mod sriov;
pub mod vdpa;
pub mod vfio;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model::Device;
use crate::root::HostRoot;

/// Something skipped during discovery, with the file it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Host path of the entry (`/sys/class/drm/card1/dev`).
    #[serde(serialize_with = "crate::text::lossy_path")]
    pub path: PathBuf,
    /// What was wrong and what was done about it.
    pub message: String,
    /// The backend that said it (empty outside a discovery run): a run
    /// reports only the warnings of the backends it was asked for.
    #[serde(skip)]
    pub backend: &'static str,
}

/// Warnings collected during a discovery run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Report {
    /// Everything skipped.
    pub warnings: Vec<Warning>,
    /// The backend running now, stamped on its warnings.
    #[serde(skip)]
    backend: &'static str,
}

impl Report {
    /// Records a warning.
    pub fn warn(&mut self, path: impl Into<PathBuf>, message: impl Into<String>) {
        // Not logged here: callers decide (a backend may probe quietly);
        // the CLI logs what a discovery run returns.
        self.warnings.push(Warning {
            path: path.into(),
            message: message.into(),
            backend: self.backend,
        });
    }
}

/// Why a backend could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the host failed where the backend cannot do without it.
    #[error("backend {backend}")]
    Root {
        /// The backend.
        backend: &'static str,
        /// The cause.
        #[source]
        source: crate::root::Error,
    },
    /// A backend name that does not exist.
    #[error("unknown backend {0:?} (known: {known})", known = backend_names().join(", "))]
    UnknownBackend(String),
}

/// Nothing for the generic backend to scan.
static NO_SCAN: generic::Scan = generic::Scan::new();

/// What a discovery run shares between its backends: the root, the PCI
/// ID database, parsed at most once per run (it is about 1.4 MB), what
/// the SR-IOV and vDPA backends both read ([`pf::Cache`]), the RDMA char
/// devices the SR-IOV and RDMA backends both read ([`infiniband::Cache`]),
/// and what the generic backend is to scan.
#[derive(Debug)]
pub struct Context<'a> {
    /// The host.
    pub root: &'a HostRoot,
    pci_ids: std::sync::OnceLock<Option<pciids::PciIds>>,
    pf: pf::Cache,
    infiniband: infiniband::Cache,
    scan: &'a generic::Scan,
}

impl<'a> Context<'a> {
    /// A context for one discovery run over `root`, with nothing for the
    /// generic backend to scan.
    pub fn new(root: &'a HostRoot) -> Self {
        Context {
            root,
            pci_ids: std::sync::OnceLock::new(),
            pf: pf::Cache::default(),
            infiniband: infiniband::Cache::default(),
            scan: &NO_SCAN,
        }
    }

    /// The context with `scan` for the generic backend (what the run's
    /// generator definitions' `match` and `join` sections declare).
    pub fn with_scan(mut self, scan: &'a generic::Scan) -> Self {
        self.scan = scan;
        self
    }

    /// What the generic backend scans.
    pub fn scan(&self) -> &generic::Scan {
        self.scan
    }

    /// What this run has read of PFs and vDPA devices, for the SR-IOV and
    /// vDPA backends.
    pub fn pf(&self) -> &pf::Cache {
        &self.pf
    }

    /// The RDMA char devices and rdma_cm, read once per run, for the
    /// SR-IOV and RDMA backends.
    pub fn infiniband(&self) -> &infiniband::Index {
        self.infiniband.get(self.root)
    }

    /// The PCI ID database under the root, loaded on first use; `None`
    /// when the root has none.
    pub fn pci_ids(&self) -> Option<&pciids::PciIds> {
        self.pci_ids
            .get_or_init(|| pciids::PciIds::load(self.root))
            .as_ref()
    }
}

/// A source of devices.
pub trait Backend: Sync {
    /// Short name (`drm`), used in generator definitions and `--backend`.
    fn name(&self) -> &'static str;
    /// Higher wins when two backends report the same device.
    fn precedence(&self) -> u8;
    /// Finds the devices this backend handles.
    ///
    /// # Errors
    /// [`Error`] only when the backend as a whole cannot run.
    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error>;
    /// The uevent subsystems (`SUBSYSTEM=` of kernel and udev events) whose
    /// events can change what this backend finds; `cdigen watch`
    /// regenerates this backend's generators on those. `None` (the
    /// default): any event may.
    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Among [`Backend::uevent_subsystems`], those whose parentless devices
    /// (under `/sys/devices/virtual/<subsystem>/`: veths, bridges, taps,
    /// which come and go with every container) this backend never reads,
    /// so that `cdigen watch` ignores their events. Default: none.
    fn physical_only_subsystems(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Every backend, in the order they run.
pub static BACKENDS: &[&dyn Backend] = &[
    &drm::Drm,
    &vfio::Vfio,
    &sriov::Sriov,
    &vdpa::Vdpa,
    &rdma::Rdma,
    &nvidia::Nvidia,
    &generic::Generic,
    &Static,
];

/// The backend of generators that only describe configured, non-hardware
/// devices (vhost-user and memif sockets, in `static_devices`): it
/// discovers nothing.
#[derive(Debug, Clone, Copy)]
pub struct Static;

impl Backend for Static {
    fn name(&self) -> &'static str {
        "static"
    }

    fn precedence(&self) -> u8 {
        0
    }

    fn discover(&self, _: &Context, _: &mut Report) -> Result<Vec<Device>, Error> {
        Ok(Vec::new())
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // Configured devices: no event changes them.
        Some(&[])
    }
}

/// Names of all backends.
pub fn backend_names() -> Vec<&'static str> {
    BACKENDS.iter().map(|b| b.name()).collect()
}

/// Looks a backend up by name.
///
/// # Errors
/// [`Error::UnknownBackend`].
pub fn backend(name: &str) -> Result<&'static dyn Backend, Error> {
    BACKENDS
        .iter()
        .copied()
        .find(|b| b.name() == name)
        .ok_or_else(|| Error::UnknownBackend(name.to_string()))
}

/// What a discovery run found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Discovery {
    /// Devices, sorted by backend then id.
    pub devices: Vec<Device>,
    /// Everything skipped.
    pub warnings: Vec<Warning>,
}

/// Runs the named backends (all when `only` is empty) and applies
/// precedence. The generic backend finds nothing here: see
/// [`discover_for`].
///
/// # Errors
/// [`Error`] for an unknown backend name or a backend that cannot run.
pub fn discover(root: &HostRoot, only: &[String]) -> Result<Discovery, Error> {
    discover_for(root, only, &NO_SCAN)
}

/// [`discover`] with `scan` for the generic backend (what the run's
/// generator definitions' `match` and `join` sections declare); the other
/// backends do not depend on it.
///
/// # Errors
/// [`Error`] for an unknown backend name or a backend that cannot run.
pub fn discover_for(
    root: &HostRoot,
    only: &[String],
    scan: &generic::Scan,
) -> Result<Discovery, Error> {
    for name in only {
        backend(name)?;
    }
    run(
        BACKENDS,
        Context::new(root).with_scan(scan),
        only,
        &|_| true,
        None,
    )
}

/// [`discover`] over a given set of backends.
///
/// # Errors
/// [`Error`] when a backend cannot run.
pub fn discover_with(
    backends: &[&dyn Backend],
    root: &HostRoot,
    only: &[String],
) -> Result<Discovery, Error> {
    run(backends, Context::new(root), only, &|_| true, None)
}

/// What one backend found, as much as precedence needs: the sysfs paths
/// of its devices (before precedence) and its warnings.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    paths: BTreeSet<String>,
    warnings: Vec<Warning>,
}

/// The latest [`Claims`] of each backend, by name: what
/// [`discover_again`] keeps of the backends it does not run.
pub type ClaimCache = BTreeMap<&'static str, Claims>;

/// [`discover_for`], running only the backends `again` names (and those
/// `cache` has nothing of yet): the devices of the others are left out
/// of the result, but their latest claims (from `cache`) still take the
/// devices they found from backends of lower precedence, and their latest
/// warnings are reported again. `cache` is updated with the backends that
/// ran.
///
/// For a caller that knows the other backends found nothing new since
/// their claims were taken and uses none of their devices: `cdigen
/// watch`, after events of subsystems they do not listen to
/// ([`Backend::uevent_subsystems`]), regenerating none of their
/// generators. Precedence then agrees with what those generators' files
/// hold.
///
/// # Errors
/// [`Error`] for an unknown backend name or a backend that cannot run.
pub fn discover_again(
    root: &HostRoot,
    only: &[String],
    scan: &generic::Scan,
    again: &dyn Fn(&str) -> bool,
    cache: &mut ClaimCache,
) -> Result<Discovery, Error> {
    for name in only {
        backend(name)?;
    }
    run(
        BACKENDS,
        Context::new(root).with_scan(scan),
        only,
        again,
        Some(cache),
    )
}

/// Runs `backends` (those `again` names, and every one `cache` has
/// nothing of), each skipped one's claims from `cache`, and applies
/// precedence.
fn run(
    backends: &[&dyn Backend],
    cx: Context,
    only: &[String],
    again: &dyn Fn(&str) -> bool,
    mut cache: Option<&mut ClaimCache>,
) -> Result<Discovery, Error> {
    let mut report = Report::default();
    let mut found: Vec<(u8, Device)> = Vec::new();
    // (precedence, claims) of the backends not run again.
    let mut kept: Vec<(u8, Claims)> = Vec::new();
    // Precedence is applied across all backends even when only some are
    // asked for, so that `--backend drm` never shows a device that a more
    // specific backend owns.
    for b in backends {
        let name = b.name();
        if !again(name)
            && let Some(claims) = cache.as_deref().and_then(|c| c.get(name))
        {
            report.warnings.extend(claims.warnings.iter().cloned());
            kept.push((b.precedence(), claims.clone()));
            continue;
        }
        report.backend = name;
        let before = report.warnings.len();
        let devices = b.discover(&cx, &mut report)?;
        if let Some(c) = cache.as_deref_mut() {
            let claims = Claims {
                paths: devices.iter().map(|d| d.sysfs_path.clone()).collect(),
                warnings: report.warnings.iter().skip(before).cloned().collect(),
            };
            c.insert(name, claims);
        }
        found.extend(devices.into_iter().map(|d| (b.precedence(), d)));
    }
    let mut best: BTreeMap<String, u8> = BTreeMap::new();
    let claimed = found.iter().map(|(p, d)| (*p, &d.sysfs_path));
    let kept_paths = kept
        .iter()
        .flat_map(|(p, c)| c.paths.iter().map(move |path| (*p, path)));
    for (p, path) in claimed.chain(kept_paths) {
        let e = best.entry(path.clone()).or_insert(p);
        *e = (*e).max(p);
    }
    // Sorted by backend and identity, ties in the order found: the index
    // found makes the order total, so the sort needs no scratch copy of
    // the devices (a stable sort's, as large as they are).
    let mut devices: Vec<(usize, Device)> = found
        .into_iter()
        .enumerate()
        .filter(|(_, (p, d))| best.get(&d.sysfs_path) == Some(p))
        .map(|(i, (_, d))| (i, d))
        .filter(|(_, d)| only.is_empty() || only.contains(&d.backend))
        .collect();
    devices.sort_unstable_by(|(i, a), (j, b)| (&a.backend, &a.id, i).cmp(&(&b.backend, &b.id, j)));
    let devices: Vec<Device> = devices.into_iter().map(|(_, d)| d).collect();
    // The other backends ran for precedence only: what they skipped is
    // not this run's business (`--backend generic` says nothing of NVIDIA).
    let heard = report
        .warnings
        .into_iter()
        .filter(|w| only.is_empty() || only.iter().any(|b| b == w.backend));
    let warnings = once_per_file(cx.root, heard);
    Ok(Discovery { devices, warnings })
}

/// The warnings with each file named once. Backends read shared entries
/// (a GPU's PCI function and DRM nodes are read by the DRM and the NVIDIA
/// backends, a PF by SR-IOV and vDPA), each under its own spelling of the
/// path (`/sys/class/drm/card1/dev` is
/// `/sys/devices/.../drm/card1/dev`), so a file is identified by its
/// directory's real path and its name (a link at the end is not followed:
/// a warning about a link is about the link). The first warning about a
/// file stands, under the path it gives; what a later backend says about
/// the same file is dropped (it found the same problem), and a distinct
/// finding of the same backend is appended to the first (`; also: ...`).
/// Run after the `only` filter, so a backend asked for is heard even when
/// one that is not asked for said it first.
fn once_per_file(root: &HostRoot, warnings: impl IntoIterator<Item = Warning>) -> Vec<Warning> {
    let mut out: Vec<Warning> = Vec::new();
    // file -> (index in `out`, messages said of it)
    let mut seen: BTreeMap<PathBuf, (usize, Vec<String>)> = BTreeMap::new();
    for w in warnings {
        let key = file_key(root, &w.path);
        let Some((i, said)) = seen.get_mut(&key) else {
            seen.insert(key, (out.len(), vec![w.message.clone()]));
            out.push(w);
            continue;
        };
        let Some(first) = out.get_mut(*i) else {
            continue;
        };
        if first.backend == w.backend && !said.contains(&w.message) {
            first.message.push_str("; also: ");
            first.message.push_str(&w.message);
            said.push(w.message);
        }
    }
    out
}

/// What identifies the file a warning names: its directory's real path
/// (through the root) and its name; the path as given when the directory
/// cannot be resolved (a `/dev` path of a manifest, a vanished entry).
fn file_key(root: &HostRoot, path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => root
            .resolve(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that reports fixed devices.
    struct Fake {
        name: &'static str,
        precedence: u8,
        paths: &'static [&'static str],
        runs: std::sync::atomic::AtomicUsize,
    }

    impl Fake {
        fn new(name: &'static str, precedence: u8, paths: &'static [&'static str]) -> Self {
            Fake {
                name,
                precedence,
                paths,
                runs: Default::default(),
            }
        }

        fn runs(&self) -> usize {
            self.runs.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Backend for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn precedence(&self) -> u8 {
            self.precedence
        }
        fn discover(&self, _: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
            self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            report.warn(format!("/sys/{}", self.name), format!("{} ran", self.name));
            Ok(self
                .paths
                .iter()
                .map(|p| Device {
                    backend: self.name.into(),
                    id: p.rsplit('/').next().unwrap_or_default().into(),
                    sysfs_path: (*p).into(),
                    bus: "pci".into(),
                    pci: None,
                    driver: None,
                    numa_node: None,
                    nodes: Vec::new(),
                    links: Vec::new(),
                    attrs: Default::default(),
                    ..Default::default()
                })
                .collect())
        }
    }

    fn ids(d: &Discovery) -> Vec<(String, String)> {
        d.devices
            .iter()
            .map(|x| (x.backend.clone(), x.id.clone()))
            .collect()
    }

    #[test]
    fn more_specific_backend_claims_shared_devices_whatever_the_order() {
        let generic = Fake::new(
            "drm",
            10,
            &["/sys/devices/a/0000:03:00.0", "/sys/devices/b/0000:41:00.0"],
        );
        let specific = Fake::new("nvidia", 20, &["/sys/devices/b/0000:41:00.0"]);
        let tmp = tempfile::tempdir().unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        let want = vec![
            ("drm".to_string(), "0000:03:00.0".to_string()),
            ("nvidia".to_string(), "0000:41:00.0".to_string()),
        ];
        let a = discover_with(&[&generic, &specific], &root, &[]).unwrap();
        let b = discover_with(&[&specific, &generic], &root, &[]).unwrap();
        assert_eq!(ids(&a), want);
        assert_eq!(ids(&b), want);
        // Asking for the generic backend alone still leaves the claimed
        // device to the specific one.
        let only = discover_with(&[&generic, &specific], &root, &["drm".to_string()]).unwrap();
        assert_eq!(
            ids(&only),
            [("drm".to_string(), "0000:03:00.0".to_string())]
        );
        // Every backend ran, but only the one asked for is heard.
        assert_eq!(
            only.warnings,
            [Warning {
                path: "/sys/drm".into(),
                message: "drm ran".into(),
                backend: "drm",
            }]
        );
    }

    #[test]
    fn backends_not_run_again_keep_their_claims_and_warnings() {
        let drm = Fake::new(
            "drm",
            10,
            &["/sys/devices/a/0000:03:00.0", "/sys/devices/b/0000:41:00.0"],
        );
        let nvidia = Fake::new("nvidia", 20, &["/sys/devices/b/0000:41:00.0"]);
        let tmp = tempfile::tempdir().unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        let backends: [&dyn Backend; 2] = [&drm, &nvidia];
        let pair = |b: &str, id: &str| (b.to_string(), id.to_string());
        let messages = |d: &Discovery| -> Vec<String> {
            d.warnings.iter().map(|w| w.message.clone()).collect()
        };
        let mut cache = ClaimCache::new();
        let all = run(
            &backends,
            Context::new(&root),
            &[],
            &|_| true,
            Some(&mut cache),
        )
        .unwrap();
        assert_eq!(
            ids(&all),
            [pair("drm", "0000:03:00.0"), pair("nvidia", "0000:41:00.0")]
        );
        // DRM alone again: NVIDIA's claim still takes the shared GPU, its
        // warning is still reported, and it did not run.
        let drm_only = |b: &str| b == "drm";
        let again = run(
            &backends,
            Context::new(&root),
            &[],
            &drm_only,
            Some(&mut cache),
        )
        .unwrap();
        assert_eq!(ids(&again), [pair("drm", "0000:03:00.0")]);
        assert_eq!(messages(&again), ["drm ran", "nvidia ran"]);
        assert_eq!((drm.runs(), nvidia.runs()), (2, 1));
        // `only` still filters what is heard of the kept backends.
        let only = ["drm".to_string()];
        let heard = run(
            &backends,
            Context::new(&root),
            &only,
            &drm_only,
            Some(&mut cache),
        )
        .unwrap();
        assert_eq!(messages(&heard), ["drm ran"]);
        // A backend with nothing in the cache runs whatever `again` says.
        let mut empty = ClaimCache::new();
        let fresh = run(
            &backends,
            Context::new(&root),
            &[],
            &drm_only,
            Some(&mut empty),
        )
        .unwrap();
        assert_eq!(ids(&fresh), ids(&all));
        assert_eq!(nvidia.runs(), 2);
        assert_eq!(empty.len(), 2);
    }

    #[test]
    fn warnings_name_each_file_once_whatever_the_spelling() {
        let tmp = tempfile::tempdir().unwrap();
        let card = tmp
            .path()
            .join("sys/devices/pci0000:00/0000:00:01.0/drm/card1");
        std::fs::create_dir_all(&card).unwrap();
        std::fs::create_dir_all(tmp.path().join("sys/class/drm")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/0000:00:01.0/drm/card1",
            tmp.path().join("sys/class/drm/card1"),
        )
        .unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        let w = |backend: &'static str, path: &str, message: &str| Warning {
            path: path.into(),
            message: message.into(),
            backend,
        };
        let gone =
            "no such file, so card1 has no device number (being added or removed?); skipping it";
        let got = once_per_file(
            &root,
            [
                // One file under two spellings, from two backends.
                w("drm", "/sys/class/drm/card1/dev", gone),
                w(
                    "nvidia",
                    "/sys/devices/pci0000:00/0000:00:01.0/drm/card1/dev",
                    gone,
                ),
                // Another backend's wording of the same finding.
                w(
                    "drm",
                    "/dev/dri/card1",
                    "not a character device; skipping this node",
                ),
                w(
                    "nvidia",
                    "/dev/dri/card1",
                    "not a character device; leaving it out",
                ),
                // Two findings of one backend about one file, one said twice.
                w("nvidia", "/proc/devices", "a"),
                w("nvidia", "/proc/devices", "b"),
                w("nvidia", "/proc/devices", "a"),
                // A link is not its target.
                w("drm", "/sys/class/drm/card1", "a link"),
            ],
        );
        let said: Vec<(String, &str, &str)> = got
            .iter()
            .map(|w| (w.path.display().to_string(), w.message.as_str(), w.backend))
            .collect();
        assert_eq!(
            said,
            [
                ("/sys/class/drm/card1/dev".to_string(), gone, "drm"),
                (
                    "/dev/dri/card1".to_string(),
                    "not a character device; skipping this node",
                    "drm"
                ),
                ("/proc/devices".to_string(), "a; also: b", "nvidia"),
                ("/sys/class/drm/card1".to_string(), "a link", "drm"),
            ]
        );
    }

    #[test]
    fn root_errors_as_warnings_say_why_without_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("sys/a")).unwrap();
        std::fs::write(tmp.path().join("sys/bin"), b"\xff").unwrap();
        std::fs::write(tmp.path().join("sys/big"), b"12345").unwrap();
        std::os::unix::fs::symlink("../../..", tmp.path().join("sys/out")).unwrap();
        std::os::unix::fs::symlink("loop", tmp.path().join("sys/loop")).unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        let p = crate::root::sys_path;
        let base = tmp.path().display().to_string();
        for (err, want) in [
            (
                root.read(&p("a")).unwrap_err(),
                "a directory, not a regular file: not reading it".to_string(),
            ),
            (
                root.read_attr(&p("bin")).unwrap_err(),
                "not UTF-8 text".into(),
            ),
            (
                root.read_limited(&p("big"), 4).unwrap_err(),
                "larger than 4 bytes".into(),
            ),
            (
                root.read(&p("loop")).unwrap_err(),
                "too many levels of symbolic links".into(),
            ),
            (
                root.read(&p("out/x")).unwrap_err(),
                format!("symlink /sys/out points outside the root {base}"),
            ),
        ] {
            assert_eq!(err.reason(), want);
            // The error alone still names its file.
            assert!(err.to_string().contains("/sys/"), "{err}");
            assert!(
                !want.contains("/sys/") || want.contains("symlink"),
                "{want}"
            );
        }
    }

    #[test]
    fn registry_names_are_unique_and_known() {
        let names = backend_names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(backend("drm").is_ok());
        assert_eq!(
            backend("nope").err().map(|e| e.to_string()),
            Some(
                "unknown backend \"nope\" (known: drm, vfio, sriov, vdpa, rdma, nvidia, generic, static)"
                    .to_string()
            )
        );
    }
}
