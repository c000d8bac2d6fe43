//! The `generate` pipeline end to end: discovered devices → selected per
//! generator → rendered → validated → serialized ([`plan_one`]), then written
//! through the safe writer ([`apply`]).
//!
//! Nothing invalid is ever written: a spec that fails validation is an
//! error for its generator, and the other generators go on. A generator
//! that finds no device removes the spec it wrote earlier (a spec without
//! devices is invalid, and a stale one would offer hardware that is gone).
//!
//! What a run starts from (the host and backends, the definitions and
//! templates), as plain settings the commands fill from their flags, is
//! [`inputs`].

pub mod coexist;
mod defined;
pub mod inputs;

pub use defined::{Clash, Defined};
pub use inputs::{Definitions, Host};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::cdi::validate::{EnvCollision, env_collision};
use crate::cdi::{self, Format, Spec, Version};
use crate::devinfo;
use crate::discover::Discovery;
use crate::discover::generic::join_tag;
use crate::generator::{DriverFiles, Generator, Loaded};
use crate::model::Device;
use crate::render::Templates;
use crate::write::{self, ManagedDir, Outcome};

/// A generator that could not produce its spec.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Rendering failed.
    #[error("generator {generator:?} ({})", source_file.display())]
    Render {
        /// The generator.
        generator: String,
        /// Its definition file.
        source_file: PathBuf,
        /// The cause.
        #[source]
        source: crate::render::Error,
    },
    /// The rendered spec breaks CDI rules.
    #[error("generator {generator:?}: the spec for {file} is invalid, not writing it: {}", problems.join("; "))]
    Invalid {
        /// The generator.
        generator: String,
        /// The output file name.
        file: String,
        /// Every problem.
        problems: Vec<String>,
    },
    /// Two CDI devices of the spec set one environment variable to
    /// different values ([`env_collision`]).
    #[error("generator {generator:?}: {}", describe_collision(.collision, .file))]
    EnvCollision {
        /// The generator.
        generator: String,
        /// The output file name.
        file: String,
        /// The variable and the two devices.
        collision: Box<EnvCollision>,
    },
    /// The devices need a driver's files and they are not there or not
    /// the running version's (`driver.files: required`).
    #[error(
        "generator {generator:?}: {problem}; not writing a spec without the driver's libraries \
         (set `driver: {{files: optional}}` or `{{files: none}}` in {} for specs with device \
         nodes only)",
        source_file.display()
    )]
    Driver {
        /// The generator.
        generator: String,
        /// Its definition file.
        source_file: PathBuf,
        /// What is wrong, and where cdigen looked.
        problem: String,
    },
    /// Serializing failed.
    #[error("generator {generator:?}")]
    Serialize {
        /// The generator.
        generator: String,
        /// The cause.
        #[source]
        source: cdi::codec::SerializeError,
    },
    /// Another of cdigen's generators wrote a file in the output
    /// directory that defines the same device.
    #[error(
        "not writing {}: {name} is already defined in {}, which cdigen's generator {owner:?} wrote; runtimes would drop both definitions",
        path.display(), other.display()
    )]
    Conflict {
        /// The file that would be written.
        path: PathBuf,
        /// The device.
        name: String,
        /// The other file.
        other: PathBuf,
        /// The generator that wrote it.
        owner: String,
    },
    /// A file cdigen did not write, in the output directory or another
    /// spec directory runtimes read, defines the same device: another tool
    /// produces these names ([`coexist`]).
    #[error(
        "not writing {}: {name} is already defined in {}, which cdigen did not write ({}); {}",
        path.display(), other.display(), consequence(*.same_dir), coexist::fix(*.producer, .other, .generator)
    )]
    Competing {
        /// The file that would be written.
        path: PathBuf,
        /// The device.
        name: String,
        /// The other file.
        other: PathBuf,
        /// Whether it is in the output directory.
        same_dir: bool,
        /// The tool that writes it, when recognized.
        producer: Option<coexist::Producer>,
        /// The generator that would write the file.
        generator: String,
    },
    /// The writer refused or failed.
    #[error(transparent)]
    Write(#[from] write::Error),
}

/// The spec one generator wants on disk (or none, when it found nothing).
#[derive(Debug, Clone)]
pub struct Planned {
    /// The generator.
    pub generator: String,
    /// Output file name (`amd.com-gpu.yaml`).
    pub file: String,
    /// The spec, `None` when no device was selected.
    pub spec: Option<Spec>,
    /// The bytes to write.
    pub bytes: Vec<u8>,
    /// Device-info files (name, bytes), when the generator writes them.
    pub devinfo: Vec<(String, Vec<u8>)>,
    /// Whether the generator writes device-info files (its stale ones are
    /// removed even when it selected nothing).
    pub device_info: bool,
    /// The devices the spec describes, in identity order (shared with the
    /// servers' inventories).
    pub devices: Vec<Arc<Device>>,
    /// The spec's CDI devices and the devices each stands for.
    pub named: Vec<crate::render::Named>,
}

impl Planned {
    /// Fully-qualified device names of the spec.
    pub fn names(&self) -> Vec<String> {
        self.spec
            .as_ref()
            .map(|s| {
                cdi::dirs::qualified_names(s)
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The devices `g` takes from `discovery`, in identity order (PCI
/// addresses, then natural order: `tty:tty2` before `tty:tty10`), each with
/// only the nodes it wants: the devices its spec describes, and the ones
/// an allocator hands out.
///
/// Candidates are the devices of the generator's backend (for the generic
/// backend, those its `match` found: run discovery with
/// [`crate::discover::discover_for`] and the [`crate::generator::scan`] of
/// this generator). The nodes of its `join`s are added to each candidate
/// (bound to a listed driver, if any), then `select` filters, the VFIO
/// mode picks VFIO nodes, and the first `reserve` devices are left out.
pub fn select_devices(g: &Generator, discovery: &Discovery) -> Vec<Device> {
    let generic = |d: &&Device| d.backend == crate::discover::generic::NAME;
    let joins: Vec<Vec<&crate::model::Node>> = (0..g.join.len())
        .map(|i| {
            let tag = join_tag(&g.name, i);
            discovery
                .devices
                .iter()
                .filter(generic)
                .filter(|d| {
                    d.generic
                        .as_ref()
                        .is_some_and(|x| x.joined_by.contains(&tag))
                })
                .flat_map(|d| d.nodes.iter())
                .collect()
        })
        .collect();
    let mut selected: Vec<Device> = discovery
        .devices
        .iter()
        .filter(|d| d.backend == g.backend)
        .filter(|d| {
            !generic(d)
                || d.generic
                    .as_ref()
                    .is_some_and(|x| x.matched_by.contains(&g.name))
        })
        .map(|d| {
            let mut d = d.clone();
            for (j, nodes) in g.join.iter().zip(&joins) {
                let bound = d.driver.as_ref().is_some_and(|x| j.drivers.contains(x));
                if !j.drivers.is_empty() && !bound {
                    continue;
                }
                for n in nodes {
                    if !d.nodes.iter().any(|x| x.path == n.path) {
                        d.nodes.push(crate::model::Node {
                            role: j.role.clone(),
                            ..(*n).clone()
                        });
                    }
                }
            }
            d
        })
        .filter_map(|d| g.select.apply(&d))
        .filter_map(|mut d| {
            // The generator's VFIO mode picks among the nodes the host offers.
            if let Some(v) = &d.vfio {
                let host_mode = v.mode.clone();
                d.nodes.retain(|n| g.vfio_mode.keeps(&n.role, &host_mode));
                let has_vfio = d.nodes.iter().any(|n| n.role.starts_with("vfio") || n.role == "iommufd");
                if !has_vfio {
                    tracing::warn!(
                        "generator {}: {} offers no VFIO node for mode {} (the host uses {host_mode}); leaving it out",
                        g.name,
                        d.id,
                        g.vfio_mode.as_str()
                    );
                    return None;
                }
            }
            Some(d)
        })
        .collect();
    selected.sort_by(|a, b| crate::render::identity_cmp(&a.id, &b.id));
    let reserve = usize::try_from(g.reserve).unwrap_or(usize::MAX);
    if reserve > 0 {
        let kept = selected.split_off(reserve.min(selected.len()));
        tracing::debug!(
            "generator {}: reserving {} for the system",
            g.name,
            selected
                .iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        selected = kept;
    }
    selected
}

/// Builds the spec of one generator from the discovered devices.
///
/// One bad device never sinks its generator: a device whose device-info
/// entry would be invalid (its file name or a field), or whose CDI device
/// is invalid once rendered on its own, is left out of the spec and the
/// device-info files with a warning naming it and why, and the others are
/// written. When every selected device fails so, the template is the more
/// likely culprit: that is the generator's error, as any other invalid
/// spec. A device a naming strategy cannot name (an invalid CDI name) gets
/// no name from it ([`crate::render::context`]); a device in no CDI
/// device gets no device-info file either.
///
/// Two CDI devices of the spec that set one environment variable to
/// different values are the generator's error too ([`env_collision`]): the
/// template names a variable that should be per device.
///
/// # Errors
/// [`Error`] when the template fails, the result is not a valid spec, or
/// its devices' variables collide.
pub fn plan_one(
    loaded: &Loaded,
    templates: &Templates,
    discovery: &Discovery,
    format: Option<Format>,
) -> Result<Planned, Error> {
    let g: &Generator = &loaded.generator;
    let format = format.unwrap_or(g.output.format);
    let file = g.file_name(format);
    let mut selected = select_devices(g, discovery);
    let mut devinfo = if g.device_info {
        let (files, bad) = device_infos(g, &selected);
        selected.retain(|d| !bad.contains(&d.id));
        files
    } else {
        Vec::new()
    };
    // No device, or none named: no spec (a stale one is removed).
    let no_spec = |file, devinfo| Planned {
        generator: g.name.clone(),
        file,
        spec: None,
        bytes: Vec::new(),
        devinfo,
        device_info: g.device_info,
        devices: Vec::new(),
        named: Vec::new(),
    };
    if selected.is_empty() {
        let files = devinfo.into_iter().map(|(f, _, _)| f).collect();
        return Ok(no_spec(file, files));
    }
    let files = g.driver.as_ref().map(|d| d.files).unwrap_or_default();
    if let Some(problem) = selected
        .iter()
        .find_map(|d| d.driver_files.as_ref()?.problem.as_ref())
    {
        match files {
            DriverFiles::Required => {
                return Err(Error::Driver {
                    generator: g.name.clone(),
                    source_file: loaded.source.clone(),
                    problem: problem.clone(),
                });
            }
            DriverFiles::Optional => tracing::warn!(
                "generator {}: {problem}; writing the spec without the driver's libraries",
                g.name
            ),
            DriverFiles::None => {}
        }
    }
    let render = |devices: &[Device]| {
        let mut r = templates
            .render_devices(g, devices)
            .map_err(|source| Error::Render {
                generator: g.name.clone(),
                source_file: loaded.source.clone(),
                source,
            })?;
        let min = cdi::version::minimum_required(&r.spec).version;
        r.spec.cdi_version = match g.cdi_version.as_deref().and_then(Version::parse) {
            Some(pinned) => pinned.to_string(),
            None => min.to_string(),
        };
        cdi::codec::canonicalize(&mut r.spec);
        Ok::<_, Error>(r)
    };
    let mut rendered = render(&selected)?;
    let mut problems = if rendered.spec.devices.is_empty() {
        Vec::new()
    } else {
        cdi::validate(&rendered.spec)
    };
    if !problems.is_empty() && selected.len() > 1 {
        let bad = invalid_alone(&selected, &render);
        if !bad.is_empty() && bad.len() < selected.len() {
            for (id, why) in &bad {
                tracing::warn!(
                    "generator {}: leaving out {id:?}: its CDI device is invalid: {why}",
                    g.name
                );
            }
            selected.retain(|d| !bad.iter().any(|(id, _)| *id == d.id));
            rendered = render(&selected)?;
            problems = cdi::validate(&rendered.spec);
        }
    }
    for w in &rendered.warnings {
        tracing::warn!("generator {}: {w}", g.name);
    }
    // Device-info files go with the devices the spec has.
    devinfo.retain(|(_, id, is_static)| *is_static || rendered.named.contains(id));
    let devinfo: Vec<DevInfoFile> = devinfo.into_iter().map(|(f, _, _)| f).collect();
    let spec = rendered.spec;
    if spec.devices.is_empty() {
        // Every selected device went unnamed (no serial number, names two
        // devices share): as when nothing is selected, no spec.
        tracing::warn!(
            "generator {}: none of the {} selected devices got a name; writing no spec",
            g.name,
            selected.len()
        );
        return Ok(no_spec(file, devinfo));
    }
    if !problems.is_empty() {
        return Err(Error::Invalid {
            generator: g.name.clone(),
            file,
            problems: problems.iter().map(ToString::to_string).collect(),
        });
    }
    if let Some(collision) = env_collision(&spec) {
        return Err(Error::EnvCollision {
            generator: g.name.clone(),
            file,
            collision: Box::new(collision),
        });
    }
    let bytes = cdi::codec::to_bytes(&spec, format).map_err(|source| Error::Serialize {
        generator: g.name.clone(),
        source,
    })?;
    let named: Vec<crate::render::Named> = rendered
        .members
        .into_iter()
        .filter(|n| spec.devices.iter().any(|d| d.name == n.name))
        .collect();
    selected.retain(|d| named.iter().any(|n| n.ids.contains(&d.id)));
    Ok(Planned {
        generator: g.name.clone(),
        file,
        spec: Some(spec),
        bytes,
        devinfo,
        device_info: g.device_info,
        devices: selected.into_iter().map(Arc::new).collect(),
        named,
    })
}

/// Longest variable name or value an [`Error::EnvCollision`] quotes.
const MAX_QUOTED_ENV: usize = 80;

/// What [`Error::EnvCollision`] says: what is wrong in the spec for
/// `file`, and what to do about it in a generator. Names and values are
/// quoted ([`crate::text::quoted`]): they may come from the host.
fn describe_collision(c: &EnvCollision, file: &str) -> String {
    let q = |s: &str| crate::text::quoted(s, MAX_QUOTED_ENV);
    // Named per device already, but two names give one suffix
    // (`vdpa-1` and `vdpa_1`): the template is not the culprit.
    let suffix = crate::render::env_suffix(&c.first);
    let hint = if suffix == crate::render::env_suffix(&c.second)
        && c.variable.ends_with(&format!("_{suffix}"))
    {
        format!(
            "the two device names give one variable suffix ({{{{name_env}}}} is {suffix}): \
             rename one of the devices, or name them with another strategy"
        )
    } else {
        "name the variable per device (append {{name_env}} to it in the template)".to_string()
    };
    format!(
        "devices {} and {} of {file} both set {} (to {} and {}): CDI runtimes merge the env \
         of all injected devices by variable name, so a container given both would see only \
         one of the values; {hint}",
        q(&c.first),
        q(&c.second),
        q(&c.variable),
        q(&c.first_value),
        q(&c.second_value),
    )
}

/// The devices of `selected` whose CDI devices are invalid when rendered
/// alone, with why: (identity, problems). A device whose spec alone names
/// no device, or fails to render, is not judged here.
fn invalid_alone(
    selected: &[Device],
    render: &dyn Fn(&[Device]) -> Result<crate::render::Rendered, Error>,
) -> Vec<(String, String)> {
    selected
        .iter()
        .filter_map(|d| {
            let alone = render(std::slice::from_ref(d)).ok()?;
            if alone.spec.devices.is_empty() {
                return None;
            }
            let problems = cdi::validate(&alone.spec);
            (!problems.is_empty()).then(|| {
                (
                    d.id.clone(),
                    problems
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            })
        })
        .collect()
}

/// A generator whose spec could not be planned.
#[derive(Debug)]
pub struct Failed {
    /// The generator.
    pub generator: String,
    /// The spec file name it writes.
    pub file: String,
    /// Why it failed.
    pub error: Error,
}

/// The plans of a run's generators: those that planned, in order, and
/// those that failed.
#[derive(Debug, Default)]
pub struct Plans {
    /// Generators that planned (with or without a spec).
    pub planned: Vec<Planned>,
    /// Generators that failed; their files are left as they are.
    pub failed: Vec<Failed>,
}

/// [`plan_one`] for every generator: one failing does not stop the others.
pub fn plan_all(
    generators: &[Loaded],
    templates: &Templates,
    discovery: &Discovery,
    format: Option<Format>,
) -> Plans {
    let mut plans = Plans::default();
    for g in generators {
        match plan_one(g, templates, discovery, format) {
            Ok(p) => plans.planned.push(p),
            Err(error) => plans.failed.push(Failed {
                generator: g.generator.name.clone(),
                file: g
                    .generator
                    .file_name(format.unwrap_or(g.generator.output.format)),
                error,
            }),
        }
    }
    plans
}

/// The device-info description of one selected device, following the
/// NPWG spec v1.1.0: a device carrying a vDPA device is `vdpa`, a PCI
/// function `pci`, with every optional key the host reveals. Devices with
/// neither (none today) get no file.
pub fn device_info(d: &crate::model::Device) -> Option<devinfo::DeviceInfo> {
    let net = d.net.as_ref();
    let pf = net.and_then(|n| n.pf.clone());
    let representor = net.and_then(|n| n.representor.clone());
    if let Some(v) = d.vdpa.as_ref().filter(|v| v.driver.is_some()) {
        return Some(devinfo::DeviceInfo {
            device_type: devinfo::DeviceType::Vdpa,
            version: devinfo::VERSION.into(),
            pci: None,
            vdpa: Some(devinfo::Vdpa {
                parent_device: Some(v.name.clone()),
                driver: match v.driver.as_deref() {
                    Some("vhost") => Some(devinfo::VdpaDriver::Vhost),
                    Some("virtio") => Some(devinfo::VdpaDriver::Virtio),
                    _ => None,
                },
                path: v.path.clone(),
                pci_address: v.pci_address.clone(),
                pf_pci_address: pf,
                representor_device: representor,
            }),
            vhost_user: None,
            memif: None,
        });
    }
    let p = d.pci.as_ref()?;
    let rdma = net
        .map(|n| n.rdma_devices.join(","))
        .filter(|r| !r.is_empty());
    let vhost_net = d
        .nodes
        .iter()
        .find(|n| n.role == "vhost-net")
        .map(|n| n.path.clone());
    Some(devinfo::DeviceInfo {
        device_type: devinfo::DeviceType::Pci,
        version: devinfo::VERSION.into(),
        pci: Some(devinfo::Pci {
            pci_address: Some(p.address.clone()),
            vhost_net,
            rdma_device: rdma,
            pf_pci_address: pf,
            representor_device: representor,
        }),
        vdpa: None,
        vhost_user: None,
        memif: None,
    })
}

/// A device-info file: (file name, bytes).
type DevInfoFile = (String, Vec<u8>);

/// Device-info files of a generator: its selected devices, then its static
/// entries (vhost-user, memif), each validated and named
/// `<kind>-<id>-device.json`, as (file, device identity, whether static);
/// and the identities of the selected devices left out, each with a
/// warning: an invalid entry or file name, or a file name another device
/// would have too (neither gets it). Static entries were checked when the
/// definition was loaded.
fn device_infos(
    g: &Generator,
    selected: &[crate::model::Device],
) -> (Vec<(DevInfoFile, String, bool)>, BTreeSet<String>) {
    let mut entries: Vec<(String, devinfo::DeviceInfo, bool)> = selected
        .iter()
        .filter_map(|d| device_info(d).map(|i| (d.id.clone(), i, false)))
        .collect();
    entries.extend(
        g.static_devices
            .iter()
            .map(|s| (s.id.clone(), s.device_info.clone(), true)),
    );
    let mut bad = BTreeSet::new();
    let mut out: Vec<(DevInfoFile, String, bool)> = Vec::new();
    let leave_out = |id: &str, why: String, bad: &mut BTreeSet<String>| {
        tracing::warn!(
            "generator {}: leaving out {id:?}: its device-info file {why}",
            g.name
        );
        bad.insert(id.to_string());
    };
    for (id, info, is_static) in entries {
        let problems = devinfo::validate(&info);
        if !problems.is_empty() {
            let why = problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            leave_out(&id, format!("would be invalid: {why}"), &mut bad);
            continue;
        }
        let name = match devinfo::checked_file_name(&g.kind, &id) {
            Ok(name) => name,
            Err(e) => {
                leave_out(&id, format!("cannot be named: {e}"), &mut bad);
                continue;
            }
        };
        if let Some((_, other, _)) = out.iter().find(|((n, _), _, _)| *n == name) {
            let other = other.clone();
            leave_out(&id, format!("{name} would also be {other}'s"), &mut bad);
            leave_out(&other, format!("{name} would also be {id}'s"), &mut bad);
            continue;
        }
        out.push(((name, devinfo::to_bytes(&info)), id, is_static));
    }
    out.retain(|(_, id, _)| !bad.contains(id));
    out.sort();
    (out, bad)
}

/// Writes the planned device-info files into `dir` (the device plugin
/// directory) and removes this generators' stale ones. A file that exists
/// and was not written by cdigen is left alone and reported.
///
/// # Errors
/// [`write::Error`] when the directory cannot be opened or locked.
pub fn apply_devinfo(
    dir: &Path,
    plans: &[Planned],
    generators: &[&str],
) -> Result<(Vec<Change>, Vec<Error>), write::Error> {
    Ok(apply_devinfo_to(ManagedDir::open(dir)?, plans, generators))
}

fn apply_devinfo_to(
    mut managed: ManagedDir,
    plans: &[Planned],
    generators: &[&str],
) -> (Vec<Change>, Vec<Error>) {
    let dir = managed.path().to_path_buf();
    let mut changes = Vec::new();
    let mut errors = Vec::new();
    for p in plans
        .iter()
        .filter(|p| generators.contains(&p.generator.as_str()))
    {
        let mut keep = BTreeSet::new();
        // One batch per generator: the state file is saved twice, not
        // twice per file (a pool can have a thousand VFs).
        for (name, result) in managed.write_batch(&p.devinfo, &p.generator) {
            keep.insert(name.clone());
            match result {
                Ok(outcome) => changes.push(Change {
                    path: dir.join(&name),
                    generator: p.generator.clone(),
                    action: outcome.into(),
                    devices: 1,
                }),
                Err(e) => errors.push(e.into()),
            }
        }
        prune(&mut managed, &p.generator, &keep, &mut changes, &mut errors);
    }
    (changes, errors)
}

/// What happened (or would happen) to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The file.
    pub path: PathBuf,
    /// The generator.
    pub generator: String,
    /// `created`, `updated`, `unchanged`, `removed`, `left-alone`.
    pub action: Action,
    /// Number of CDI devices in the spec (0 for removals).
    pub devices: usize,
}

/// What was done to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// New file.
    Created,
    /// Content changed.
    Updated,
    /// Same bytes; not touched.
    Unchanged,
    /// Stale file removed.
    Removed,
    /// Stale file that someone changed since cdigen wrote it: kept.
    LeftAlone,
}

impl Action {
    /// Lowercase word for output.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Removed => "removed",
            Action::LeftAlone => "left alone (changed since cdigen wrote it)",
        }
    }
}

/// What runtimes do with a device defined in our file and in another
/// one: in the same directory they drop both; across directories the
/// later one wins.
pub fn consequence(same_dir: bool) -> &'static str {
    if same_dir {
        "runtimes would drop both definitions"
    } else {
        "runtimes would use only the definition in the later spec directory"
    }
}

/// Writes the planned specs into `dir` through the safe writer and removes
/// the stale files of these generators. Per-generator failures are
/// returned alongside the changes that succeeded. `spec_dirs` are the
/// directories runtimes read ([`coexist::runtime_dirs`]), for the files
/// of other tools ([`Defined::conflicts`]).
///
/// # Errors
/// [`write::Error`] when the directory itself cannot be opened or locked.
pub fn apply(
    dir: &Path,
    spec_dirs: &[PathBuf],
    plans: &[Planned],
) -> Result<(Vec<Change>, Vec<Error>), write::Error> {
    Ok(apply_to(ManagedDir::open(dir)?, spec_dirs, plans))
}

fn apply_to(
    mut managed: ManagedDir,
    spec_dirs: &[PathBuf],
    plans: &[Planned],
) -> (Vec<Change>, Vec<Error>) {
    let dir = managed.path().to_path_buf();
    let dir = dir.as_path();
    let mut changes = Vec::new();
    let mut errors = Vec::new();
    let mut defined = Defined::read_planned(dir, spec_dirs, plans);
    for p in plans {
        let mut keep = BTreeSet::new();
        if p.spec.is_some() {
            // Files of cdigen's other generators are checked too: two
            // generators must not define one device either.
            let mine: BTreeSet<String> = managed.owned_by(&p.generator).into_iter().collect();
            if let Err(e) = defined.check(p, &mine) {
                errors.push(e);
                continue;
            }
            match managed.write(&p.file, &p.bytes, &p.generator) {
                Ok(outcome) => {
                    defined.wrote(p);
                    keep.insert(p.file.clone());
                    changes.push(Change {
                        path: dir.join(&p.file),
                        generator: p.generator.clone(),
                        action: outcome.into(),
                        devices: p.spec.as_ref().map_or(0, |s| s.devices.len()),
                    });
                }
                Err(e) => {
                    errors.push(e.into());
                    continue;
                }
            }
        }
        let before = changes.len();
        prune(&mut managed, &p.generator, &keep, &mut changes, &mut errors);
        for c in changes.iter().skip(before) {
            if c.action == Action::Removed
                && let Some(name) = c.path.file_name().and_then(|n| n.to_str())
            {
                defined.removed(name);
            }
        }
    }
    (changes, errors)
}

impl From<Outcome> for Action {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Created => Action::Created,
            Outcome::Updated => Action::Updated,
            Outcome::Unchanged => Action::Unchanged,
        }
    }
}

/// Removes `owner`'s files not in `keep` and records what happened.
fn prune(
    managed: &mut ManagedDir,
    owner: &str,
    keep: &BTreeSet<String>,
    changes: &mut Vec<Change>,
    errors: &mut Vec<Error>,
) {
    match managed.remove_stale(owner, keep) {
        Ok(pruned) => {
            for (names, action) in [
                (pruned.removed, Action::Removed),
                (pruned.left_alone, Action::LeftAlone),
            ] {
                for n in names {
                    changes.push(Change {
                        path: managed.path().join(n),
                        generator: owner.to_string(),
                        action,
                        devices: 0,
                    });
                }
            }
        }
        Err(e) => errors.push(e.into()),
    }
}

/// The directories a run writes in, decided once for [`apply_all`] and
/// [`preview_all`].
struct Touched<'a> {
    /// The spec directory: it exists, or a spec is planned.
    specs: bool,
    /// The device-info directory, with the generators that write there:
    /// a file is planned there, or stale ones may be.
    devinfo: Option<Vec<&'a str>>,
}

fn touched<'a>(
    output_dir: &Path,
    devinfo_dir: &Path,
    generators: &'a [Loaded],
    plans: &[Planned],
) -> Touched<'a> {
    let devinfo_generators: Vec<&str> = generators
        .iter()
        .filter(|g| g.generator.device_info)
        .map(|g| g.generator.name.as_str())
        .collect();
    let has_devinfo = plans
        .iter()
        .any(|p| devinfo_generators.contains(&p.generator.as_str()) && !p.devinfo.is_empty());
    Touched {
        specs: output_dir.exists() || plans.iter().any(|p| p.spec.is_some()),
        devinfo: (has_devinfo || (!devinfo_generators.is_empty() && devinfo_dir.exists()))
            .then_some(devinfo_generators),
    }
}

/// A [`DirError`] for `dir`.
fn dir_error(dir: &Path) -> impl FnOnce(write::Error) -> DirError + '_ {
    move |source| DirError {
        dir: dir.to_path_buf(),
        source,
    }
}

/// What [`preview_all`] foresees, as [`Applied`] reports what happened.
#[derive(Debug, Default)]
pub struct Previewed {
    /// Spec files.
    pub specs: Vec<Preview>,
    /// Device-info files.
    pub devinfo: Vec<Preview>,
    /// What the real run would refuse or fail on, each naming its file.
    pub errors: Vec<Error>,
}

/// One change [`preview_all`] foresees, with the file's current content
/// (for `--diff`).
#[derive(Debug, Clone)]
pub struct Preview {
    /// What would happen to the file.
    pub change: Change,
    /// The bytes on disk now, when the file is a regular file.
    pub old: Option<Vec<u8>>,
    /// The bytes that would be written (empty for removals).
    pub new: Vec<u8>,
}

/// What [`apply_all`] would do, without writing or locking anything: every
/// file it would create, update or leave unchanged, every file it would
/// remove or leave alone, and every refusal, decided exactly as the real
/// run decides (the same ownership rules, conflict check and stale-file
/// decision, [`write::Ownership::stale`]).
///
/// # Errors
/// [`DirError`] when a directory's state cannot be read (the real run
/// would fail on it too).
pub fn preview_all(
    output_dir: &Path,
    devinfo_dir: &Path,
    spec_dirs: &[PathBuf],
    generators: &[Loaded],
    plans: &[Planned],
) -> Result<Previewed, DirError> {
    let touched = touched(output_dir, devinfo_dir, generators, plans);
    let mut out = Previewed::default();
    if touched.specs {
        let own = write::Ownership::read(output_dir).map_err(dir_error(output_dir))?;
        let mut defined = Defined::read_planned(output_dir, spec_dirs, plans);
        for p in plans {
            let mut keep = BTreeSet::new();
            if p.spec.is_some() {
                let mine: BTreeSet<String> = own.owned_by(&p.generator).into_iter().collect();
                if let Err(e) = defined.check(p, &mine) {
                    out.errors.push(e);
                    continue;
                }
                match foresee(output_dir, &own, &p.file, &p.bytes, &p.generator) {
                    Ok(mut preview) => {
                        // As the real run sees the file it wrote.
                        defined.wrote(p);
                        keep.insert(p.file.clone());
                        preview.change.devices = p.spec.as_ref().map_or(0, |s| s.devices.len());
                        out.specs.push(preview);
                    }
                    Err(e) => {
                        out.errors.push(e);
                        continue;
                    }
                }
            }
            let before = out.specs.len();
            foresee_stale(
                output_dir,
                &own,
                &p.generator,
                &keep,
                &mut out.specs,
                &mut out.errors,
            );
            for c in out.specs.iter().skip(before) {
                if c.change.action == Action::Removed
                    && let Some(name) = c.change.path.file_name().and_then(|n| n.to_str())
                {
                    defined.removed(name);
                }
            }
        }
    }
    if let Some(devinfo_generators) = touched.devinfo {
        let own = write::Ownership::read(devinfo_dir).map_err(dir_error(devinfo_dir))?;
        for p in plans
            .iter()
            .filter(|p| devinfo_generators.contains(&p.generator.as_str()))
        {
            let mut keep = BTreeSet::new();
            for (name, bytes) in &p.devinfo {
                // The writer keeps a file it could not write, too.
                keep.insert(name.clone());
                match foresee(devinfo_dir, &own, name, bytes, &p.generator) {
                    Ok(mut preview) => {
                        preview.change.devices = 1;
                        out.devinfo.push(preview);
                    }
                    Err(e) => out.errors.push(e),
                }
            }
            foresee_stale(
                devinfo_dir,
                &own,
                &p.generator,
                &keep,
                &mut out.devinfo,
                &mut out.errors,
            );
        }
    }
    Ok(out)
}

/// What writing one file would do.
fn foresee(
    dir: &Path,
    own: &write::Ownership,
    name: &str,
    bytes: &[u8],
    generator: &str,
) -> Result<Preview, Error> {
    let (outcome, old) = own.would_write(dir, name, bytes)?;
    let path = dir.join(name);
    Ok(Preview {
        change: Change {
            path,
            generator: generator.to_string(),
            action: outcome.into(),
            devices: 0,
        },
        old,
        new: bytes.to_vec(),
    })
}

/// The stale files of `generator` in `dir`: what would be removed or left
/// alone.
fn foresee_stale(
    dir: &Path,
    own: &write::Ownership,
    generator: &str,
    keep: &BTreeSet<String>,
    previews: &mut Vec<Preview>,
    errors: &mut Vec<Error>,
) {
    let stale = match own.stale(dir, generator, keep) {
        Ok(s) => s,
        Err(e) => return errors.push(e.into()),
    };
    for (name, decision) in stale {
        let action = match decision {
            write::Stale::Remove => Action::Removed,
            write::Stale::LeftAlone(_) => Action::LeftAlone,
            write::Stale::Gone => continue,
        };
        let path = dir.join(&name);
        let old = match write::on_disk(&path) {
            Ok(write::OnDisk::Bytes(b)) => Some(b),
            _ => None,
        };
        previews.push(Preview {
            change: Change {
                path,
                generator: generator.to_string(),
                action,
                devices: 0,
            },
            old,
            new: Vec::new(),
        });
    }
}

/// What [`apply_all`] did: every file's change, and the per-generator
/// failures.
#[derive(Debug, Default)]
pub struct Applied {
    /// Spec files.
    pub specs: Vec<Change>,
    /// Device-info files (`devices` is 1 for each file written).
    pub devinfo: Vec<Change>,
    /// Files not written or not removed, each naming its file.
    pub errors: Vec<Error>,
}

/// A directory [`apply_all`] could not write to at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to {}", dir.display())]
pub struct DirError {
    /// The directory.
    pub dir: PathBuf,
    /// The cause.
    #[source]
    pub source: write::Error,
}

/// Writes `plans` (of `generators`) as `cdigen generate` does: specs into
/// `output_dir`, device-info files of the generators that write them into
/// `devinfo_dir`, and removes those generators' stale files. A directory
/// is not even created when there is nothing to write into it and nothing
/// stale could be there. A spec that another file defines a device of
/// (in the output directory, or a file of another tool in `spec_dirs`,
/// the directories runtimes read) is not written ([`Defined::conflicts`]).
///
/// # Errors
/// [`DirError`] when a directory cannot be created, opened or locked.
pub fn apply_all(
    output_dir: &Path,
    devinfo_dir: &Path,
    spec_dirs: &[PathBuf],
    generators: &[Loaded],
    plans: &[Planned],
) -> Result<Applied, DirError> {
    apply_all_with(
        output_dir,
        devinfo_dir,
        spec_dirs,
        generators,
        plans,
        &ManagedDir::open,
    )
}

/// [`apply_all`] for a long-running process (`cdigen watch`): a
/// directory's lock is waited for as [`write::lock_dir_until`] does, and
/// the wait ends, with a [`DirError`], as soon as `stop` returns true.
///
/// # Errors
/// As [`apply_all`], and when `stop` ended the wait for a lock.
pub fn apply_all_until(
    output_dir: &Path,
    devinfo_dir: &Path,
    spec_dirs: &[PathBuf],
    generators: &[Loaded],
    plans: &[Planned],
    stop: &dyn Fn() -> bool,
) -> Result<Applied, DirError> {
    apply_all_with(
        output_dir,
        devinfo_dir,
        spec_dirs,
        generators,
        plans,
        &|dir| ManagedDir::open_until(dir, stop),
    )
}

fn apply_all_with(
    output_dir: &Path,
    devinfo_dir: &Path,
    spec_dirs: &[PathBuf],
    generators: &[Loaded],
    plans: &[Planned],
    open: &dyn Fn(&Path) -> Result<ManagedDir, write::Error>,
) -> Result<Applied, DirError> {
    let touched = touched(output_dir, devinfo_dir, generators, plans);
    let mut applied = Applied::default();
    if touched.specs {
        let managed = open(output_dir).map_err(dir_error(output_dir))?;
        let (changes, errors) = apply_to(managed, spec_dirs, plans);
        applied.specs = changes;
        applied.errors.extend(errors);
    }
    if let Some(devinfo_generators) = touched.devinfo {
        let managed = open(devinfo_dir).map_err(dir_error(devinfo_dir))?;
        let (changes, errors) = apply_devinfo_to(managed, plans, &devinfo_generators);
        applied.devinfo = changes;
        applied.errors.extend(errors);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests;
