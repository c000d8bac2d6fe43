//! The CDI plugin protocol of the 2017 draft ("Container Device Interface",
//! version 0.0.2): `cdigen plugin`, or the binary run under another name
//! (`/opt/cdi/bin/drm`), allocates devices from cdigen's discovery to
//! request IDs, CNI-style.
//!
//! The caller sets `CDI_COMMAND` (`VERSION`, `INFO`, `ADD`, `DEL`, any
//! case), `CDI_VERSION` (all but `VERSION`; optional for `INFO`, see
//! below), and for `ADD`/`DEL` `CDI_REQUEST=<resource-spec>:<amount>,...`,
//! `CDI_REQUEST_ID` and optionally `CDI_REQUEST_NUMA_LOCALITY=<node>,...`;
//! the configuration comes as JSON on stdin (`cdiVersion`, `name`, `type`,
//! `plugin`, `args`). stdout carries only the protocol's JSON; diagnostics
//! go to stderr.
//!
//! Decisions where the draft leaves room:
//!
//! - **Versions**: `0.0.1` and `0.0.2`. `VERSION` never fails and reads
//!   nothing (no stdin, no `CDI_VERSION`). `INFO` without `CDI_VERSION`
//!   uses the configuration's `cdiVersion` (still checked): the draft's
//!   prose requires `CDI_VERSION` for every command but `VERSION`, its
//!   `INFO` examples run without it, and cdigen accepts them. Other
//!   replies carry the `CDI_VERSION` in use; an error before it is known
//!   carries the configuration's `cdiVersion` when supported, else
//!   `0.0.2`.
//! - **Errors** follow the draft's field list: `{"cdiVersion", "error":
//!   <code>, "message", "details"?}`. The draft's examples write `code` and
//!   `msg` instead; those names are not emitted. Exit status 1, except for
//!   `DEL`, which always exits 0 (the error JSON is still printed). Codes:
//!
//!   | code | meaning |
//!   |------|---------|
//!   | 1    | `CDI_VERSION` not supported, or missing (but for `INFO`) |
//!   | 2    | the configuration's `cdiVersion` not supported, or not `CDI_VERSION` |
//!   | 3    | `CDI_COMMAND` missing or not supported |
//!   | 4    | resource-spec not served: another type, or a subtype other than `numa<N>` |
//!   | 5    | `DEL` of a request ID that holds nothing of this type from this generator (exit 0) |
//!   | 100  | configuration unreadable, not JSON, a field missing or wrong (named), an unknown generator |
//!   | 101  | `CDI_REQUEST`, `CDI_REQUEST_ID` or `CDI_REQUEST_NUMA_LOCALITY` missing or malformed (ABNF), an amount not a positive integer, a resource-spec listed twice |
//!   | 102  | not enough free devices (nothing is allocated) |
//!   | 103  | the request ID already holds this resource-spec from this generator |
//!   | 104  | the host, the generator definitions or the allocations file cannot be read or written (the file is named), or the reply cannot be written |
//!
//!   Checks run in this order, for every command but `VERSION`:
//!   `CDI_VERSION`; the configuration's fields; its `cdiVersion`; the
//!   rest of the configuration, whatever the command (its `args`, then
//!   its generator, which must exist among the loaded definitions); the
//!   command; then the command's parameters (item by item for
//!   `CDI_REQUEST`: the resource-spec before the amount). `DEL` skips the
//!   rest of the configuration: it releases by the generator's name, so
//!   that allocations of a definition since removed, or a definitions
//!   directory that no longer loads, are still freed.
//! - **Exit status**: 0 for success, 1 for an error, and 0 for every
//!   `DEL`. A reply that cannot be written (stdout closed) is an error,
//!   exit 1 (`DEL`: 0): an `ADD` whose reply cannot be written is rolled
//!   back under the lock, since its caller never learned of the devices.
//! - **The pool** is the devices the generator named by `plugin` (or
//!   `args.generator`) selects from discovery, as `cdigen generate` selects
//!   them, in the order of its `index` names; narrowed by
//!   `args.vendorid_whitelist` (PCI vendor IDs: non-PCI devices never
//!   match a non-empty list) and `args.want_device_nodes` (node roles to
//!   hand out; `want_device_types`, the draft's prose name, is read as an
//!   alias). `args.num_system_reserved` then leaves out the first N devices
//!   of the narrowed pool; it replaces the generator's own `reserve` (the
//!   same notion, which is then not applied), so the draft's TTY
//!   configuration with 12 reserved hands out `/dev/tty13` first from
//!   `generic-tty`, which reserves 12 itself. Without it, the generator's
//!   `reserve` applies as for `generate`, before the narrowing. Unknown
//!   `args` keys are ignored with a warning: args are each plugin's own.
//! - **Conflicts are by device node** (see `alloc`): a device is not
//!   handed out while it is allocated, while one of its own nodes is held
//!   by any allocation, or while any of its nodes is held as another
//!   device's own. So DRM's `accel0` and the `accel` definition's, a VF's
//!   `/dev/vhost-vdpa-0` and its vDPA device's, or a GPU and its MIG
//!   devices (which share `/dev/nvidiaN`) never go to two requests, while
//!   two MIG devices of one GPU, or two devices sharing `/dev/nvidiactl`
//!   or `/dev/kfd`, do.
//! - **INFO** reports how many devices of the pool an `ADD` could take at
//!   once as `<type>`, and per NUMA node of the pool's devices as
//!   `<type>-numa<N>`: free devices counted in pool order, each free of
//!   those counted before it (of a GPU and its MIG devices, whichever
//!   comes first counts).
//! - **ADD** is all or nothing over every resource-spec. `<type>-numa<N>`
//!   takes devices on node N only; the plain type takes devices on the
//!   nodes of `CDI_REQUEST_NUMA_LOCALITY` first (in the order listed), then
//!   any other: a preference, not a constraint, as the draft's SHOULD
//!   says. The reply lists each device's host node paths in order
//!   (duplicates dropped) and `numa_locality`, the nodes of the allocated
//!   devices, when any has one. It is written while the lock is held.
//! - **DEL** releases everything the request ID holds of the
//!   configuration's type from the configuration's generator; nothing
//!   printed on success. Two plugins of one type (`drm` and `amd-gpu`,
//!   both `gpu`) keep their allocations apart, even for one request ID.
//! - **State**: `allocations.json` in the state directory
//!   ([`DEFAULT_STATE_DIR`], `CDIGEN_STATE_DIR` or `--state-dir`), one
//!   file for every type and generator so that no device goes to two
//!   requests whatever the configuration. Every command but `VERSION`
//!   holds the directory's lock from reading the file through discovery
//!   to writing it (and, for `ADD`, the reply), and the file is replaced
//!   atomically. A corrupt file is an error (104), never discarded.
//! - **Devices gone from the host**: on every command, an allocated
//!   device is released with a warning on stderr when discovery no longer
//!   reports it and its sysfs path no longer exists under the root (an
//!   allocation left with no device is dropped). A device that is merely
//!   not found now (its driver unbound, a generator definition changed)
//!   stays allocated until `DEL`. MIG devices have no sysfs directory:
//!   one is gone when discovery no longer reports it (MIG devices cannot
//!   be destroyed while in use).
//! - **Test hook**: [`Options::hold_before_save`] (`CDIGEN_TEST_HOLD_LOCK_MS`
//!   in the CLI, milliseconds, capped at [`MAX_TEST_HOLD`]) makes `ADD`
//!   wait with the lock held before saving, so tests can kill it there.
//!   It is for tests only.

mod alloc;
pub mod config;
pub mod request;
pub mod state;

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::discover::{self, Discovery};
use crate::generator::select::{self, Select};
use crate::generator::{self, Loaded};
use crate::root::HostRoot;
pub use alloc::{Held, PoolDevice};
pub use config::Config;
use request::{parse_numa_locality, parse_request, parse_request_id};
use state::{AllocatedDevice, Allocation, Store};

/// The draft versions cdigen speaks.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["0.0.1", "0.0.2"];
/// The newest of them, the version of `VERSION` replies.
pub const CURRENT_VERSION: &str = "0.0.2";
/// Where allocations are kept unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/cdigen/plugin";
/// The longest [`Options::hold_before_save`] honoured.
pub const MAX_TEST_HOLD: Duration = Duration::from_secs(10);

/// The error codes: 1-5 the draft's, 100+ cdigen's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 1: `CDI_VERSION` missing or not supported.
    VersionEnv,
    /// 2: the configuration's version not supported or not `CDI_VERSION`.
    VersionConfig,
    /// 3: the command is missing or not supported.
    Command,
    /// 4: the resource-spec is not served.
    ResourceSpec,
    /// 5: the request ID is unknown.
    UnknownRequest,
    /// 100: the configuration is unusable.
    Config,
    /// 101: a request parameter is missing or malformed.
    Parameter,
    /// 102: not enough free devices.
    NotEnough,
    /// 103: the request ID already holds this resource-spec.
    AlreadyHeld,
    /// 104: the host or the allocations cannot be read or written.
    Host,
}

impl Code {
    /// The number in the reply.
    pub fn number(self) -> u32 {
        match self {
            Code::VersionEnv => 1,
            Code::VersionConfig => 2,
            Code::Command => 3,
            Code::ResourceSpec => 4,
            Code::UnknownRequest => 5,
            Code::Config => 100,
            Code::Parameter => 101,
            Code::NotEnough => 102,
            Code::AlreadyHeld => 103,
            Code::Host => 104,
        }
    }
}

/// A protocol error: what the error reply says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}{}", details.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct Failure {
    /// The code.
    pub code: Code,
    /// A short description.
    pub message: String,
    /// More, for debugging.
    pub details: Option<String>,
}

impl Failure {
    /// A failure without details.
    pub fn new(code: Code, message: &str) -> Self {
        Failure {
            code,
            message: message.to_string(),
            details: None,
        }
    }

    /// The same failure with `details`.
    #[must_use]
    pub fn details(self, details: impl Into<String>) -> Self {
        Failure {
            details: Some(details.into()),
            ..self
        }
    }

    /// A [`Code::Host`] failure from an error and its causes.
    fn host(e: &(dyn std::error::Error + 'static)) -> Self {
        let mut chain = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            chain.push_str(": ");
            chain.push_str(&c.to_string());
            cause = c.source();
        }
        Failure::new(Code::Host, "Cannot read the host or the allocations").details(chain)
    }
}

/// The protocol's environment variables, as the caller set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `CDI_COMMAND`.
    pub command: Option<String>,
    /// `CDI_VERSION`.
    pub version: Option<String>,
    /// `CDI_REQUEST`.
    pub request: Option<String>,
    /// `CDI_REQUEST_ID`.
    pub request_id: Option<String>,
    /// `CDI_REQUEST_NUMA_LOCALITY`.
    pub numa_locality: Option<String>,
}

/// Where the plugin reads the host and keeps its state.
#[derive(Debug, Clone)]
pub struct Options {
    /// The root to discover under (`/`, or a fixture).
    pub root: PathBuf,
    /// The NVIDIA driver root (a host path).
    pub driver_root: Option<PathBuf>,
    /// Directories of user generator definitions.
    pub generator_dirs: Vec<PathBuf>,
    /// The state directory.
    pub state_dir: PathBuf,
    /// Test hook: `ADD` waits this long (at most [`MAX_TEST_HOLD`]) with
    /// the lock held before saving. For tests only.
    pub hold_before_save: Option<Duration>,
}

#[derive(Serialize)]
struct VersionReply<'a> {
    #[serde(rename = "cdiVersion")]
    cdi_version: &'a str,
    #[serde(rename = "supportedVersions")]
    supported_versions: &'a [&'a str],
}

#[derive(Serialize)]
struct ErrorReply<'a> {
    #[serde(rename = "cdiVersion")]
    cdi_version: &'a str,
    error: u32,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a str>,
}

#[derive(Serialize)]
struct AddReply<'a> {
    #[serde(rename = "cdiVersion")]
    cdi_version: &'a str,
    devices: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    numa_locality: Vec<u32>,
}

/// INFO's reply: `cdiVersion`, then each resource-spec's free amount, in
/// order.
struct InfoReply<'a> {
    cdi_version: &'a str,
    amounts: Vec<(String, usize)>,
}

impl Serialize for InfoReply<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.amounts.len() + 1))?;
        map.serialize_entry("cdiVersion", self.cdi_version)?;
        for (k, v) in &self.amounts {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

fn to_json<T: Serialize>(value: &T) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        // Not reachable with these types; still a protocol reply.
        Err(e) => format!(
            "{{\"cdiVersion\": \"{CURRENT_VERSION}\", \"error\": 104, \"message\": {}}}\n",
            serde_json::Value::String(format!("cannot encode the reply: {e}"))
        ),
    }
}

fn supported(v: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&v)
}

/// What a command leaves to print.
enum Done {
    /// This reply.
    Reply(String),
    /// Nothing (`DEL`), or the reply was written already (`ADD`).
    Nothing,
}

/// Writes a reply and flushes it.
fn write_reply(out: &mut dyn Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Runs one plugin command, writing its reply to `out`; returns the exit
/// status. `stdin` is read only by commands that need the configuration
/// (not `VERSION`).
pub fn run(inv: &Invocation, stdin: &mut dyn Read, opts: &Options, out: &mut dyn Write) -> u8 {
    let command = inv.command.as_deref().map(str::to_ascii_uppercase);
    let is_del = command.as_deref() == Some("DEL");
    let (text, exit) = if command.as_deref() == Some("VERSION") {
        let reply = to_json(&VersionReply {
            cdi_version: CURRENT_VERSION,
            supported_versions: &SUPPORTED_VERSIONS,
        });
        (Some(reply), 0)
    } else {
        let input = read_config(stdin);
        let version = match inv.version.as_deref().filter(|v| supported(v)) {
            Some(v) => v.to_string(),
            None => input
                .as_ref()
                .ok()
                .and_then(|b| config::peek_version(b))
                .filter(|v| supported(v))
                .unwrap_or_else(|| CURRENT_VERSION.to_string()),
        };
        match dispatch(command.as_deref(), inv, input, opts, &version, out) {
            Ok(Done::Reply(text)) => (Some(text), 0),
            Ok(Done::Nothing) => (None, 0),
            Err(f) => {
                if is_del {
                    tracing::warn!("DEL: {f}");
                }
                let reply = to_json(&ErrorReply {
                    cdi_version: &version,
                    error: f.code.number(),
                    message: &f.message,
                    details: f.details.as_deref(),
                });
                (Some(reply), 1)
            }
        }
    };
    let written = match text {
        Some(text) => write_reply(out, &text).map_err(|e| {
            tracing::error!("cannot write the reply to stdout: {e}");
        }),
        None => Ok(()),
    };
    // DEL must not fail; a reply that cannot be written is an error.
    if is_del {
        0
    } else if written.is_err() {
        1
    } else {
        exit
    }
}

/// Reads the configuration from stdin, at most one byte more than allowed
/// (so that too large is detected without reading it all).
fn read_config(stdin: &mut dyn Read) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(config::MAX_CONFIG_BYTES)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    stdin.take(limit).read_to_end(&mut bytes).map_err(|e| {
        Failure::new(Code::Config, "Invalid configuration")
            .details(format!("cannot read the configuration from stdin: {e}"))
    })?;
    Ok(bytes)
}

/// A checked configuration: what every command but `VERSION` needs.
struct Plugin {
    cfg: Config,
    /// The configuration's narrowing of the generator's devices.
    narrow: Select,
    /// Every generator definition (discovery scans for all of them).
    all: Vec<Loaded>,
    /// The generator that defines the pool.
    generator: Loaded,
}

fn dispatch(
    command: Option<&str>,
    inv: &Invocation,
    input: Result<Vec<u8>, Failure>,
    opts: &Options,
    version: &str,
    out: &mut dyn Write,
) -> Result<Done, Failure> {
    let incompatible = |details: String| {
        Failure::new(Code::VersionEnv, "Incompatible CDI version").details(details)
    };
    // INFO may leave CDI_VERSION out, as the draft's INFO examples do.
    let env_version = match inv.version.as_deref() {
        None if command == Some("INFO") => None,
        None => return Err(incompatible("CDI_VERSION is not set".into())),
        Some(v) if !supported(v) => return Err(incompatible(format!("Unsupported version: {v}"))),
        Some(v) => Some(v),
    };
    let (cfg, warnings) = config::parse(&input?)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    let config_version = |details: String| {
        Failure::new(Code::VersionConfig, "Incompatible CDI version").details(details)
    };
    if !supported(&cfg.cdi_version) {
        return Err(config_version(format!(
            "Unsupported config version: {}",
            cfg.cdi_version
        )));
    }
    if let Some(env_version) = env_version
        && cfg.cdi_version != env_version
    {
        return Err(config_version(format!(
            "The config's cdiVersion {} is not CDI_VERSION {env_version}",
            cfg.cdi_version
        )));
    }
    // DEL releases by the generator's name: it must work even when that
    // definition was removed or the definitions no longer load, or the
    // allocation would never be freed (the caller does not retry a DEL).
    if command == Some("DEL") {
        return del(&cfg, inv, opts).map(|()| Done::Nothing);
    }
    // The rest of the configuration, whatever the command.
    let narrow = narrowing(&cfg)?;
    let all = definitions(opts)?;
    let generator = generator_of(&cfg, &all)?;
    let plugin = Plugin {
        cfg,
        narrow,
        all,
        generator,
    };
    match command {
        Some("INFO") => info(&plugin, opts, version).map(Done::Reply),
        Some("ADD") => add(&plugin, inv, opts, version, out).map(|()| Done::Nothing),
        None => Err(Failure::new(Code::Command, "Command unsupported")
            .details("CDI_COMMAND is not set (expected VERSION, INFO, ADD or DEL)")),
        Some(_) => Err(
            Failure::new(Code::Command, "Command unsupported").details(format!(
                "Unsupported command: {}",
                inv.command.as_deref().unwrap_or_default()
            )),
        ),
    }
}

/// What narrows the generator's devices: the whitelist and the node
/// roles, as a second [`Select`] (the generator's own selection logic).
fn narrowing(cfg: &Config) -> Result<Select, Failure> {
    let narrow = Select {
        vendor_ids: cfg.args.vendorid_whitelist.clone(),
        node_roles: cfg.args.want_device_nodes.clone(),
        ..Select::default()
    };
    select::check(&narrow).map_err(|(field, message)| {
        let field = field
            .replace("vendor_ids", "vendorid_whitelist")
            .replace("node_roles", "want_device_nodes");
        Failure::new(Code::Config, "Invalid configuration")
            .details(format!("args.{field}: {message}"))
    })?;
    Ok(narrow)
}

/// Every generator definition, enabled or not: the configuration may name
/// a disabled one (the shipped `generic-tty`), and discovery scans for all
/// of them.
fn definitions(opts: &Options) -> Result<Vec<Loaded>, Failure> {
    generator::load(&opts.generator_dirs).map_err(|e| Failure::host(&e))
}

/// The generator that defines the pool.
fn generator_of(cfg: &Config, all: &[Loaded]) -> Result<Loaded, Failure> {
    let name = cfg.generator();
    let field = if cfg.args.generator.is_some() {
        "args.generator"
    } else {
        "plugin"
    };
    let known: Vec<&str> = all.iter().map(|l| l.generator.name.as_str()).collect();
    let message = format!(
        "{field}: no generator named {name:?} (known: {})",
        known.join(", ")
    );
    all.iter()
        .find(|l| l.generator.name == name)
        .cloned()
        .ok_or_else(|| Failure::new(Code::Config, "Invalid configuration").details(message))
}

/// The host root and what discovery finds under it.
struct Host {
    root: HostRoot,
    discovery: Discovery,
}

fn discover_host(opts: &Options, all: &[Loaded]) -> Result<Host, Failure> {
    let root = HostRoot::open_host(&opts.root)
        .map_err(|e| {
            Failure::host(&e).details(format!(
                "cannot use {} as the root: {e}",
                opts.root.display()
            ))
        })?
        .with_driver_root_or_detect(opts.driver_root.as_deref());
    let scan = crate::generator::scan(all.iter().map(|l| &l.generator));
    let discovery = discover::discover_for(&root, &[], &scan).map_err(|e| Failure::host(&e))?;
    for w in &discovery.warnings {
        tracing::warn!("{}: {}", w.path.display(), w.message);
    }
    Ok(Host { root, discovery })
}

fn open_store(opts: &Options) -> Result<Store, Failure> {
    Store::open(&opts.state_dir).map_err(|e| Failure::host(&e))
}

fn save(store: &Store) -> Result<(), Failure> {
    store.save().map_err(|e| Failure::host(&e))
}

/// Whether an allocated device is still on the host: discovery reports
/// it, or its sysfs path still exists (a driver unbound, a generator
/// definition changed: the device is merely not found now). Only a path
/// that is not found counts as gone; any other error keeps the device.
fn still_there(host: &Host, present: &BTreeSet<(&str, &str)>, d: &AllocatedDevice) -> bool {
    if present.contains(&d.key()) {
        return true;
    }
    match host.root.resolve(Path::new(&d.sysfs_path)) {
        Ok(_) => {
            tracing::info!(
                "{} ({}) is not found by discovery now but {} exists; keeping its allocation",
                d.id,
                d.backend,
                d.sysfs_path
            );
            true
        }
        Err(e) if e.is_not_found() => false,
        Err(e) => {
            tracing::warn!(
                "cannot tell whether {} ({}) is still there: {e}; keeping its allocation",
                d.id,
                d.backend
            );
            true
        }
    }
}

/// Releases allocated devices that are gone from the host, with a warning
/// each, and saves when anything changed.
fn release_vanished(store: &mut Store, host: &Host) -> Result<(), Failure> {
    let present: BTreeSet<(&str, &str)> = host
        .discovery
        .devices
        .iter()
        .map(|d| (d.backend.as_str(), d.id.as_str()))
        .collect();
    let path = store.path();
    let mut changed = false;
    for a in &mut store.state.allocations {
        a.devices.retain(|d| {
            let keep = still_there(host, &present, d);
            if !keep {
                changed = true;
                tracing::warn!(
                    "{}: releasing {} ({}) of request {} ({}, generator {}): the device is gone from the host ({} no longer exists)",
                    path.display(),
                    d.id,
                    d.backend,
                    a.request_id,
                    a.resource,
                    a.generator,
                    d.sysfs_path
                );
            }
            keep
        });
    }
    store.state.allocations.retain(|a| {
        if a.devices.is_empty() {
            tracing::warn!(
                "{}: request {} holds no {} device of generator {} any more; dropping its allocation",
                path.display(),
                a.request_id,
                a.resource,
                a.generator
            );
        }
        !a.devices.is_empty()
    });
    if changed {
        save(store)?;
    }
    Ok(())
}

/// The pool: the generator's devices in `index` order, narrowed by the
/// configuration, minus the reserved ones (the configuration's
/// `num_system_reserved` after the narrowing, else the generator's
/// `reserve` before it).
fn pool(p: &Plugin, discovery: &Discovery) -> Vec<PoolDevice> {
    let mut generator = p.generator.generator.clone();
    let skip = match p.cfg.args.num_system_reserved {
        Some(n) => {
            generator.reserve = 0;
            usize::try_from(n).unwrap_or(usize::MAX)
        }
        None => 0,
    };
    // Nodes that generators join to other devices (/dev/kfd) are shared.
    let joined: BTreeSet<String> = discovery
        .devices
        .iter()
        .filter(|d| d.generic.as_ref().is_some_and(|g| !g.joined_by.is_empty()))
        .flat_map(|d| d.nodes.iter().map(|n| n.path.clone()))
        .collect();
    // Already in `index` order.
    crate::generate::select_devices(&generator, discovery)
        .into_iter()
        .filter_map(|d| p.narrow.apply(&d))
        .skip(skip)
        .map(|d| {
            let full = discovery
                .devices
                .iter()
                .find(|f| f.backend == d.backend && f.id == d.id);
            PoolDevice::new(&d, full, &joined)
        })
        .collect()
}

fn info(p: &Plugin, opts: &Options, version: &str) -> Result<String, Failure> {
    let mut store = open_store(opts)?;
    let host = discover_host(opts, &p.all)?;
    release_vanished(&mut store, &host)?;
    let pool = pool(p, &host.discovery);
    let (total, per_node) = alloc::available(&pool, &store.state.held());
    let t = &p.cfg.resource_type;
    let mut amounts = vec![(t.clone(), total)];
    amounts.extend(
        per_node
            .into_iter()
            .map(|(n, free)| (request::ResourceSpec::numa(t, n).to_string(), free)),
    );
    Ok(to_json(&InfoReply {
        cdi_version: version,
        amounts,
    }))
}

/// Allocates, saves, and writes the reply while the lock is held; a reply
/// that cannot be written takes the allocation back.
fn add(
    p: &Plugin,
    inv: &Invocation,
    opts: &Options,
    version: &str,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let request_id = parse_request_id(inv.request_id.as_deref())?;
    let items = parse_request(inv.request.as_deref(), &p.cfg.resource_type)?;
    let prefer = parse_numa_locality(inv.numa_locality.as_deref())?;
    let generator = &p.generator.generator.name;
    let mut store = open_store(opts)?;
    let host = discover_host(opts, &p.all)?;
    release_vanished(&mut store, &host)?;
    for item in &items {
        let spec = item.spec.to_string();
        if store
            .state
            .allocations
            .iter()
            .any(|a| a.request_id == request_id && a.resource == spec && &a.generator == generator)
        {
            return Err(Failure::new(
                Code::AlreadyHeld,
                "Resource already allocated to this request ID",
            )
            .details(format!(
                "request {request_id} already holds {spec} from generator {generator} (DEL it first)"
            )));
        }
    }
    let pool = pool(p, &host.discovery);
    let picked = alloc::allocate(&pool, &store.state.held(), &items, &prefer)
        .map_err(|d| Failure::new(Code::NotEnough, "Not enough devices").details(d))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let before = store.state.allocations.len();
    let mut devices: Vec<String> = Vec::new();
    let mut locality: Vec<u32> = Vec::new();
    for (item, chosen) in items.iter().zip(&picked) {
        for d in chosen {
            for n in &d.nodes {
                if !devices.contains(n) {
                    devices.push(n.clone());
                }
            }
            locality.extend(d.numa_node);
        }
        store.state.allocations.push(Allocation {
            request_id: request_id.clone(),
            resource: item.spec.to_string(),
            generator: generator.clone(),
            devices: chosen
                .iter()
                .map(|d| AllocatedDevice {
                    backend: d.backend.clone(),
                    id: d.id.clone(),
                    sysfs_path: d.sysfs_path.clone(),
                    numa_node: d.numa_node,
                    nodes: d.nodes.clone(),
                    exclusive: d.exclusive.clone(),
                    shared: d.shared.clone(),
                })
                .collect(),
            allocated_at: now,
        });
    }
    if let Some(hold) = opts.hold_before_save {
        let hold = hold.min(MAX_TEST_HOLD);
        tracing::warn!(
            "test hook: holding the lock for {} ms before saving",
            hold.as_millis()
        );
        std::thread::sleep(hold);
    }
    save(&store)?;
    locality.sort_unstable();
    locality.dedup();
    let reply = to_json(&AddReply {
        cdi_version: version,
        devices,
        numa_locality: locality,
    });
    if let Err(e) = write_reply(out, &reply) {
        // The caller never learned of the devices: give them back.
        store.state.allocations.truncate(before);
        let undone = save(&store);
        tracing::error!(
            "request {request_id}: cannot write the reply to stdout ({e}); {}",
            match &undone {
                Ok(()) => "the allocation is taken back".to_string(),
                Err(f) => format!("the allocation cannot be taken back either: {f}"),
            }
        );
        return Err(Failure::new(Code::Host, "Cannot write the reply").details(e.to_string()));
    }
    Ok(())
}

fn del(cfg: &Config, inv: &Invocation, opts: &Options) -> Result<(), Failure> {
    let request_id = parse_request_id(inv.request_id.as_deref())?;
    let generator = cfg.generator();
    let mut store = open_store(opts)?;
    // DEL needs no discovery; when it fails, releasing still goes on.
    match definitions(opts).and_then(|all| discover_host(opts, &all)) {
        Ok(host) => release_vanished(&mut store, &host)?,
        Err(f) => tracing::warn!("not checking for vanished devices: {f}"),
    }
    let before = store.state.allocations.len();
    store.state.allocations.retain(|a| {
        !(a.request_id == request_id
            && a.resource_type() == cfg.resource_type
            && a.generator == generator)
    });
    if store.state.allocations.len() == before {
        return Err(Failure::new(Code::UnknownRequest, "Unknown request ID"));
    }
    save(&store)
}
