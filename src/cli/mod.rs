//! The command-line interface: clap definitions (also used to generate the
//! man pages in `man/`) and the commands behind them.
//!
//! Exit codes: 0 success; 1 findings or failures (an invalid spec, a file
//! cdigen refused to touch); 2 usage or environment errors (bad arguments,
//! unreadable inputs). Errors are printed as a chain:
//! `cdigen: cannot do X: because Y: because Z`.

pub mod arena;
mod check;
mod completions;
mod device_plugin;
mod discover;
mod dra_driver;
mod generate;
mod hook;
mod inject;
mod list;
mod output;
mod pipeline;
mod plugin;
mod validate;
mod watch;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use completions::{Shell, script as completion_script};
pub use hook::{
    CreateSymlinksArgs, EnableCudaCompatArgs, HookArgs, HookStep, UpdateLdcacheArgs, hook_program,
};
pub use output::OutputFormat;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: findings (invalid specs) or failures (a file not written).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: usage or environment error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: another process held an output directory's lock for longer
/// than `--lock-timeout`.
pub const EXIT_LOCK_TIMEOUT: u8 = 3;

/// What `--version` prints after the program's name: the version, then
/// the source revision (`git` commit, `-dirty` when the tree had changes,
/// `unknown` when built outside a git checkout; a packager may set
/// `CDIGEN_BUILD_REVISION` at build time) and the enabled cargo features,
/// a line each (see build.rs). `-V` prints the first line alone.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nrevision: ",
    env!("CDIGEN_BUILD_REVISION"),
    "\nfeatures: ",
    env!("CDIGEN_BUILD_FEATURES"),
);

/// Discover a host's devices and write CDI specs and device-info files.
#[derive(Debug, Parser)]
#[command(
    name = "cdigen",
    version,
    long_version = LONG_VERSION,
    about,
    long_about = "Discover the devices a Linux host has (DRM GPUs, VFIO, SR-IOV VFs, vDPA, NVIDIA \
GPUs with MIG, and any character device a generator definition describes) and write the Container Device Interface (CDI) specs and device-info files that \
container runtimes and Kubernetes need to hand them to containers.",
    after_help = "Exit status: 0 success, 1 findings or failures (invalid specs, a file not \
written), 2 usage or environment errors, 3 (generate) another run held an output directory's \
lock for longer than --lock-timeout."
)]
pub struct Cli {
    /// Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Whether the command serves until stopped, with its servers on
    /// threads beside its passes (`device-plugin`, `dra-driver` without
    /// `--print-slices`): what [`arena::one_arena`] is for.
    pub fn serves(&self) -> bool {
        match &self.command {
            Command::DevicePlugin(_) => true,
            Command::DraDriver(a) => !a.print_slices,
            _ => false,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Discover devices and write CDI specs and device-info files.
    Generate(GenerateArgs),
    /// Discover devices and print what was found, without writing anything.
    ///
    /// The generic backend finds the devices the generator definitions describe (their `match`
    /// and `join` sections): those of every enabled definition, or of the ones named with
    /// --generator, enabled or not. Each generic device lists the definitions that matched it.
    Discover(DiscoverArgs),
    /// List the fully-qualified CDI device names (vendor/class=name) in the spec directories.
    ///
    /// The names are those a container runtime resolves: the names to pass to podman run
    /// --device, for example. The directories are read as runtimes read them: in order, a device
    /// in a later directory winning over the same device in an earlier one; only valid *.json and
    /// *.yaml files are loaded; a device defined in two files of one directory is dropped. The
    /// names are printed in natural order (gpu2 before gpu10; PCI addresses by value,
    /// 0000:05:00.0 before 0000:4f:00.0).
    ///
    /// Problems with spec files are reported on stderr, and the devices that do resolve are still
    /// listed; cdigen validate checks the files.
    List(ListArgs),
    /// Validate CDI spec files and directories by the rules runtimes apply.
    ///
    /// Each file is checked on its own (syntax, cdiVersion, kind and device names, container
    /// edits), then across files as runtimes load them: a device defined in two files of one
    /// directory is an error, because runtimes drop every definition of it; a device shadowed by
    /// the same device in a later directory, and a file runtimes ignore (*.yml), are warnings.
    ///
    /// The exit status is 1 when any error is found (warnings alone do not count), and 2 when a
    /// path given does not exist.
    Validate(ValidateArgs),
    /// Check that the specs and device-info files on disk are what generate would write now.
    ///
    /// Discovers devices and plans every file as generate does (same arguments), then compares
    /// with what is on disk, writing nothing (not even a lock or state file). Prints one line per
    /// finding, KIND: FILE: DEVICE: REASON (DEVICE only when the finding is about one device),
    /// then a summary line.
    ///
    /// Problems: missing (generate would write the file; it is not there), stale (a file cdigen
    /// wrote differs, one line per reason: a device gone or new, a node whose major:minor changed
    /// or that no longer exists on the host, changed by hand, else the first difference), orphan
    /// (a file cdigen wrote that generate would remove), foreign (our file name, not written by
    /// cdigen: generate will not replace it), conflict (another file in the output directory
    /// defines the device, or another spec directory defines it twice: runtimes drop it), competing
    /// (a file another tool wrote, in the output directory or a --spec-dir, defines the device:
    /// generate will not write ours; the reason names the tool when it is nvidia-ctk's
    /// nvidia-cdi-refresh, intel-cdi-specs-generator or amd-ctk, and how to stop it), shadowed
    /// (a later --spec-dir defines the device: runtimes use that definition, not ours), unreadable
    /// (a file, directory or state file that cannot be read or parsed), failed (a generator that
    /// cannot produce its spec), unsafe-hook (a hook of any spec in these directories, whoever
    /// wrote it, that lets a container run code as root on the host: a createContainer,
    /// createRuntime or startContainer hook without env, or a program not owned by root or
    /// writable by others), missing-hook (a hook's program does not exist under --root or is not
    /// executable: runtimes fail to start every container given the device).
    ///
    /// Warnings: shadows (ours overrides the device in an earlier --spec-dir: runtimes use ours),
    /// unowned (current, but not recorded as cdigen's: generate will refuse to update it when it
    /// changes), not-loaded (--output-dir is not one of the --spec-dir directories; shadowing is
    /// then not checked).
    ///
    /// With -o json: one document {"current": bool, "checked": {"specs": N, "deviceInfo": N},
    /// "findings": [{"kind", "severity" (error|warning), "file", "generator"?, "device"?,
    /// "other"?, "reason"}]}; fields marked ? are left out when they do not apply.
    ///
    /// The exit status is 0 when everything is current (warnings allowed), 1 when there is any
    /// problem, and 2 on usage or environment errors (bad arguments, an unusable root, broken
    /// generator definitions).
    Check(CheckArgs),
    /// Show what a container gets when a runtime injects CDI devices, and what goes wrong.
    ///
    /// Resolves the devices in the spec directories as runtimes do (later directories win; a
    /// device two files of one directory define is dropped) and applies their edits exactly as the
    /// official CDI library (Go, v1.1.0) does, into an empty container spec: for each device in
    /// order, its spec's own edits the first time a device of that spec comes, then the device's;
    /// env entries replace earlier ones of the same name; a device node replaces an earlier one
    /// with the same path and adds a cgroup rule (the earlier rule stays); type, numbers and mode
    /// missing from the spec are taken from the host's node (under --root); a mount replaces an
    /// earlier one with the same destination, and mounts are sorted by depth; hooks are appended;
    /// additional GIDs are added once each. The container's own environment (the image's) is not
    /// known here: the library does not replace a variable the image sets, it appends its own after
    /// it.
    ///
    /// Prints the resulting OCI edits (env, devices, cgroup device rules, mounts, hooks,
    /// additional GIDs, intelRdt, net devices), then one line per finding, SEVERITY: KIND:
    /// SUBJECT: MESSAGE, then a summary. Warnings: env-collision (two devices, or a spec and a
    /// device, set one variable to different values: which value survives), shadowed-node and
    /// shadowed-mount (two devices give one container path differently: the later replaces the
    /// earlier), shadowed-net-device, shadowed-intel-rdt, shadowed-definition (an earlier spec
    /// directory's definition of the device is not used), missing-host-path (a device node's host
    /// path or a mount's source is not on the host), host-node-mismatch (the host's node is not
    /// what the spec says). Errors: unresolved (no such device, not a device name, dropped as
    /// defined twice in one directory, or only in files runtimes do not load), injection-failed
    /// (the library refuses, e.g. a node without numbers that is not on the host).
    ///
    /// With -o json: one document {"devices": [...], "injected": bool, "oci": {"env",
    /// "devices", "cgroupDevices", "mounts", "hooks", "additionalGids", "intelRdt",
    /// "netDevices"?} or null, "error"? (the library's message), "findings": [{"kind",
    /// "severity", "subject", "sources": [{"device", "specLevel"?, "value"?}], "files"?,
    /// "message"}]}.
    ///
    /// The exit status is 0 when the devices would be injected (warnings allowed), 1 when not
    /// (a device unresolved, or the library refuses), and 2 on usage or environment errors (bad
    /// arguments, a --spec-dir or --root that cannot be read).
    Inject(InjectArgs),
    /// Record what cdigen reads from this host into a fixture tree, for bug reports and tests.
    ///
    /// Runs discovery with every backend and copies exactly the sysfs and procfs files, symlinks
    /// and directories it read into DIR, plus a dev.manifest describing the /dev entries it looked
    /// at (git cannot store device nodes). Nothing else is copied. `cdigen generate --root DIR`
    /// then gives the same result as on the host. The generic backend scans what every generator
    /// definition declares, enabled or not. The device count printed is what `cdigen discover`
    /// lists (the enabled definitions); devices only disabled definitions match are counted apart.
    /// Names in dev.manifest are escaped (a space is \x20): see fixtures/README.md.
    Snapshot(SnapshotArgs),
    /// Act as a CDI plugin of the 2017 draft: allocate devices to request IDs.
    ///
    /// The protocol comes from the environment: CDI_COMMAND (VERSION, INFO, ADD or DEL),
    /// CDI_VERSION (0.0.1 or 0.0.2), CDI_REQUEST (resource-spec:amount,...), CDI_REQUEST_ID and
    /// CDI_REQUEST_NUMA_LOCALITY; the plugin configuration is the JSON on stdin. The reply, or
    /// an error {"cdiVersion", "error", "message", "details"}, is printed on stdout; diagnostics
    /// go to stderr. The binary acts as this command when run under a name not starting with
    /// cdigen (a link /opt/cdi/bin/drm, for example).
    ///
    /// The devices handed out are those of the generator the configuration's plugin field (or
    /// args.generator) names, narrowed by args.vendorid_whitelist, args.want_device_nodes and
    /// args.num_system_reserved. Allocations are kept in allocations.json in the state
    /// directory, under a lock.
    #[command(
        after_help = "Exit status: 0 success (always for DEL), 1 error (the JSON says which)."
    )]
    Plugin(PluginArgs),
    /// Keep CDI specs and device-info files current while devices come and go.
    ///
    /// Runs until SIGTERM or SIGINT (exit status 0). It first generates every selected generator,
    /// as `cdigen generate` does, then listens for device events (uevents) and regenerates the
    /// generators whose backends care about the events' subsystems (drm, accel, pci, vfio, net,
    /// infiniband, vdpa, module, ...): at once for the first event after a quiet period
    /// (--debounce), then the events that follow it together, once none came for --debounce or at
    /// most --max-delay after the first of them; where udevd runs, a pass made at once is made again
    /// then, as udev may still have been making the event's links. Only files whose content
    /// changed are written, atomically;
    /// each change is logged on one line (`updated /var/run/cdi/amd.com-gpu.yaml: 2 devices (added
    /// amd.com/gpu=1)`). A MIG reconfiguration sends no event: while NVIDIA GPUs exist, the MIG
    /// capability directories in /proc/driver/nvidia are listed every 2s, and the NVIDIA generators
    /// regenerated when they change. Everything is also regenerated every --interval, since some
    /// changes send no event (nodes made by nvidia-modprobe), and on SIGHUP, which first re-reads
    /// the generator definitions and templates.
    ///
    /// Event sources (--source): `netlink` reads the kernel's uevents directly (no libudev needed;
    /// it works in a pod without hostNetwork); `udev` reads udevd's events through libudev, after its
    /// rules ran, and needs a cdigen built with the `udev` feature; `none` uses only the re-check and
    /// SIGHUP. `auto` takes udev when built with it and udevd runs, else netlink, else none.
    ///
    /// Readiness: once the first full generation has completed (everything that could be written
    /// is on disk), --ready-file is created (for a Kubernetes exec readiness probe) and, under
    /// systemd, READY=1 is sent (Type=notify units), even if some generators or files failed: each
    /// failure is logged as an error and systemd's STATUS= line gives their number and the first,
    /// until a later pass clears it. Only a generation that fails as a whole (discovery cannot run,
    /// an output directory cannot be created, opened or locked) withholds readiness; it is retried
    /// after 1s, then twice as long each time, up to --interval. The ready file is removed on exit
    /// while it is still this run's. Events lost to a full receive buffer (both sources report
    /// them) regenerate everything; events of parentless network devices (container veths,
    /// bridges, taps) regenerate nothing.
    ///
    /// Logs go to stderr, without timestamps; under journald each line carries its priority. The
    /// default log level is info.
    Watch(WatchArgs),
    /// Serve the devices to the kubelet: a device plugin per resource (API v1beta1, with CDI devices).
    ///
    /// Runs until SIGTERM or SIGINT (exit status 0), keeping the specs current as `cdigen watch`
    /// does (same event sources, debounce, re-check and SIGHUP), and serves one kubelet device
    /// plugin per resource: a generator's `device_plugin.resource`, else its kind when that is in
    /// cdigen.io, else cdigen.io/<generator> (cdigen.io/nvidia, cdigen.io/amd-gpu: no vendor
    /// plugin's name by default; a vendor name set in `device_plugin.resource` is refused at start
    /// while another plugin's socket in --plugin-dir serves it); a generator's devices are not
    /// offered while a plugin of its `device_plugin.vendor_resources` serves them there
    /// (nvidia.com/gpu for nvidia: one warning, offered again when it goes); generators with
    /// `device_plugin.enabled: false` are written but not advertised, and the `all` device is
    /// only for a generator that names nothing else (a pool, like rdma-shared). With
    /// `device_plugin.replicas: N` each device is advertised as N units (<ID>-0 ...) that all give
    /// its CDI device, so N containers may share it. A resource is registered once it has a
    /// device (then kept, with an empty list when its last goes), or at once with
    /// `device_plugin.register_empty: true`. Each plugin listens on
    /// cdigen-<resource>.sock in --plugin-dir, registers on its
    /// kubelet.sock, and registers again when the kubelet restarts (its socket re-created, or ours
    /// deleted). Device IDs are stable across reboots: GPU UUIDs, PCI addresses, by-id links.
    ///
    /// ListAndWatch sends the list at start and on every change, with each device's NUMA node;
    /// a device whose node is missing or has other numbers, or with no driver bound, is Unhealthy,
    /// and one that vanishes while allocated stays listed as Unhealthy. Allocate returns the CDI
    /// names (the specs are on disk before anything is advertised), the per-request variables CDI
    /// cannot express (PCIDEVICE_<RESOURCE> and PCIDEVICE_<RESOURCE>_INFO for network devices,
    /// PCI_RESOURCE_<RESOURCE> for VFIO devices), and writes the NPWG device-info files of the
    /// network devices it hands out; files no live allocation needs (per the kubelet's pod
    /// resources API) are removed. Unknown or unhealthy IDs are refused, naming them.
    ///
    /// It needs no API-server access. Logs go to stderr, without timestamps. It runs itself again
    /// at start with one glibc allocator arena for its threads (GLIBC_TUNABLES gets
    /// glibc.malloc.arena_max=1) unless GLIBC_TUNABLES names arena_max.
    DevicePlugin(DevicePluginArgs),
    /// Serve the devices through Dynamic Resource Allocation (resource.k8s.io/v1): publish them as
    /// ResourceSlices and prepare the claims the scheduler allocates from them.
    ///
    /// Runs until SIGTERM or SIGINT, keeping the specs current as `cdigen watch` does. Every
    /// device the device plugin would advertise (the same generators, resources and IDs) is a
    /// device of one pool named after the node, in ResourceSlices of --driver-name, with the
    /// standard attributes (resource.kubernetes.io/pciBusID, pcieRoot, numaNode) and cdigen's.
    /// The slices are re-created when the kubelet wipes them, updated on hotplug and deleted on
    /// exit. The kubelet finds the driver through its registration socket in --registry-dir;
    /// NodePrepareResources answers with cdigen's CDI names (v1 and v1beta1), and
    /// NodeWatchResources streams every device's health, the one its taint says
    /// (DRAResourceHealth v1alpha1 and v1). It needs API-server access (deploy/kubernetes/overlays/dra).
    /// Serve a node by device plugin or by DRA, never both. Like the device plugin, it runs itself
    /// again at start with one glibc allocator arena unless GLIBC_TUNABLES names arena_max.
    ///
    /// With --print-slices it reads the host once, prints the ResourceSlices it would publish (as
    /// YAML that `kubectl apply --dry-run=client` accepts) and exits: no cluster is needed.
    DraDriver(DraDriverArgs),
    /// Run as an OCI createContainer hook of a CDI spec: create-symlinks, enable-cuda-compat,
    /// update-ldcache.
    ///
    /// Container runtimes (runc, crun) run the command a spec's containerEdits.hooks name, from
    /// that host path, after the container's mounts are set up and before it starts, with the
    /// container's state (JSON) on stdin. The container's root filesystem is root.path of the
    /// bundle's config.json. Every path in it is resolved inside it (openat2 RESOLVE_IN_ROOT, or
    /// a walk that does the same on older kernels): no symlink of the image leads out of it, and
    /// no FIFO or device in it is opened. No lock is taken and no generator definition read.
    ///
    /// Nothing is printed on stdout. Errors are one line on stderr, `cdigen hook STEP: what`,
    /// with exit status 1, which fails the container's start.
    #[command(
        after_help = "Exit status: 0 success (something of the image's left alone, or a \
read-only root, is one line on stderr), 1 failure (the runtime fails the container's start), 2 \
usage errors."
    )]
    Hook(HookArgs),
    /// Print a shell completion script (bash, zsh or fish) to stdout.
    ///
    /// The Debian package installs all three. For one user, without the package: `cdigen
    /// completions bash > ~/.local/share/bash-completion/completions/cdigen`, or `cdigen
    /// completions fish > ~/.config/fish/completions/cdigen.fish`; for zsh, write _cdigen into a
    /// directory of $fpath.
    Completions(CompletionsArgs),
}

/// Arguments of `cdigen plugin`.
#[derive(Debug, Args)]
pub struct PluginArgs {
    /// Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot).
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Where the NVIDIA driver's user-space files are, as a path on the host (under --root)
    /// [default: /run/nvidia/driver when it exists and is not empty (the GPU operator's driver
    /// container), else /].
    #[arg(long, value_name = "DIR", env = "CDIGEN_DRIVER_ROOT")]
    pub driver_root: Option<PathBuf>,
    /// Directory of generator definitions (*.yaml) that add to or replace the built-in ones
    /// [default: /etc/cdigen/generators.d]; skipped when it does not exist.
    #[arg(long, value_name = "DIR", env = "CDIGEN_GENERATORS")]
    pub generators: Option<PathBuf>,
    /// Directory of the allocations file (allocations.json) and its lock.
    #[arg(
        long,
        value_name = "DIR",
        default_value = crate::plugin::DEFAULT_STATE_DIR,
        env = "CDIGEN_STATE_DIR"
    )]
    pub state_dir: PathBuf,
}

/// Where `cdigen watch` hears about device changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EventSourceKind {
    /// udev when built with it and udevd runs, else netlink, else none.
    Auto,
    /// udevd's events through libudev (cargo feature `udev`).
    Udev,
    /// The kernel's uevents from a netlink socket.
    Netlink,
    /// No events: the periodic re-check and SIGHUP only.
    None,
}

/// Arguments of `cdigen watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Where to discover devices.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Generators and templates.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Directory to write CDI specs to.
    #[arg(long, value_name = "DIR", default_value = crate::cdi::DYNAMIC_DIR)]
    pub output_dir: PathBuf,
    /// Directory for NPWG device-info files of generators that write them.
    #[arg(long, value_name = "DIR", default_value = crate::devinfo::DP_DIR, env = "CDIGEN_DEVINFO_DIR")]
    pub devinfo_dir: PathBuf,
    /// A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then
    /// /var/run/cdi, under --root): a spec is not written while a file another tool wrote there
    /// defines one of its devices.
    #[arg(long = "spec-dir", value_name = "DIR")]
    pub spec_dirs: Vec<PathBuf>,
    /// Spec format, overriding the generators'.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<SpecFormat>,
    /// Where device events come from.
    #[arg(long = "source", value_enum, value_name = "SOURCE", default_value_t = EventSourceKind::Auto)]
    pub events: EventSourceKind,
    /// Quiet period (500ms, 2s, ...; from 10ms to 1m): an event after this long without events is
    /// acted on at once; events that follow within this of each other are regenerated together
    /// once they stop (longer only holds back the specs of devices that came in a burst).
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = watch::debounce)]
    pub debounce: std::time::Duration,
    /// Longest wait of an event that follows another, however many follow (from 10ms to 1h: under a
    /// steady stream of events, specs lag the host by at most this).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = watch::max_delay)]
    pub max_delay: std::time::Duration,
    /// Regenerate everything this often, events or not (from 1s to 24h: changes that send no
    /// event, such as nodes made by nvidia-modprobe, are caught within a day).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = watch::interval)]
    pub interval: std::time::Duration,
    /// Create FILE once the first full generation completed, even if some generators failed;
    /// remove it on exit. Its directory must exist.
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Give up waiting for the lock of an output directory another cdigen process is writing
    /// after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running
    /// command logs the error and retries later [default: wait as long as it takes]. After 1s of
    /// waiting a warning names the lock file and the PID holding it.
    #[arg(long, value_name = "DURATION", env = "CDIGEN_LOCK_TIMEOUT", value_parser = lock_timeout)]
    pub lock_timeout: Option<std::time::Duration>,
}

/// Arguments of `cdigen device-plugin`.
#[derive(Debug, Args)]
pub struct DevicePluginArgs {
    /// What the watch does: sources, definitions, output, timing.
    #[command(flatten)]
    pub watch: WatchArgs,
    /// The kubelet's device plugin directory: where kubelet.sock is and the plugins' sockets go.
    #[arg(
        long,
        value_name = "DIR",
        default_value = crate::deviceplugin::run::PLUGIN_DIR,
        env = "CDIGEN_PLUGIN_DIR"
    )]
    pub plugin_dir: PathBuf,
    /// The kubelet's pod resources socket: which allocations are live (for device-info files).
    #[arg(long, value_name = "PATH", default_value = crate::deviceplugin::run::POD_RESOURCES)]
    pub pod_resources_socket: PathBuf,
    /// Also answer Allocate with the legacy devices, mounts and envs fields, for runtimes without
    /// CDI support (or kubelets before 1.29 that ignore CDI devices). Hooks cannot be expressed so.
    #[arg(long)]
    pub legacy_edits: bool,
    /// This pod's UID (in a DaemonSet, metadata.uid from the downward API): a rolling update, the
    /// new pod serving beside the old one on its own sockets, both sharing the allocations on disk.
    #[arg(long, value_name = "UID", env = "CDIGEN_POD_UID")]
    pub pod_uid: Option<String>,
    /// Which health problems are acted on.
    #[command(flatten)]
    pub health: HealthArgs,
}

/// Arguments of `cdigen dra-driver`.
#[derive(Debug, Args)]
pub struct DraDriverArgs {
    /// What the watch does: sources, definitions, output, timing.
    #[command(flatten)]
    pub watch: WatchArgs,
    /// The DRA driver name the slices and claims carry (a DNS subdomain).
    #[arg(long, value_name = "NAME", default_value = crate::dra::DRIVER_NAME, env = "CDIGEN_DRA_DRIVER")]
    pub driver_name: String,
    /// The node this driver runs on: the slices' nodeName and pool.
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node: Option<String>,
    /// Print the ResourceSlices this host would publish and exit.
    #[arg(long)]
    pub print_slices: bool,
    /// The kubelet's plugin directory: the DRA socket and the checkpoint go in <DIR>/<driver>/.
    #[arg(long, value_name = "DIR", default_value = crate::dra::PLUGIN_DIR)]
    pub plugin_dir: PathBuf,
    /// The kubelet's plugin registration directory: the registration socket goes here.
    #[arg(long, value_name = "DIR", default_value = crate::dra::REGISTRY_DIR)]
    pub registry_dir: PathBuf,
    /// This pod's UID (in a DaemonSet, metadata.uid from the downward API): a rolling update, the
    /// new pod serving beside the old one on its own sockets, both sharing the checkpoint on disk.
    #[arg(long, value_name = "UID", env = "CDIGEN_POD_UID")]
    pub pod_uid: Option<String>,
    /// Which health problems are acted on.
    #[command(flatten)]
    pub health: HealthArgs,
}

/// The health setting `device-plugin` and `dra-driver` share.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Health codes not acted on, comma-separated, or none: a device with only these problems stays
    /// healthy (no taint, Healthy to the kubelet). Codes: DeviceNodeMissing, DeviceNodeMismatch,
    /// NotADeviceNode, DeviceNodeUnreadable, NoDriverBound, GoneWhileAllocated, FunctionRemoved,
    /// AERFatal, AERNonFatal, LinkWidthDegraded, LinkSpeedDegraded, NvidiaXid<N> (NVIDIA XID N from
    /// NVML; NvidiaXid: every XID), NvidiaGpuLost, Unhealthy. The list replaces the default;
    /// `default` in it stands for the default's codes (the application's XIDs among them).
    #[arg(
        long,
        value_name = "CODE[,CODE]",
        default_value = crate::deviceplugin::signals::DEFAULT_IGNORE,
        env = "CDIGEN_IGNORE_HEALTH",
        value_parser = ignore_health
    )]
    pub ignore_health: std::collections::BTreeSet<crate::deviceplugin::signals::Code>,
}

/// Arguments of `cdigen completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// Arguments of `cdigen snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Read sysfs, procfs and /dev under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Where the NVIDIA driver's user-space files are, as a path on the host (under --root)
    /// [default: /run/nvidia/driver when it exists and is not empty (the GPU operator's driver
    /// container), else /].
    #[arg(long, value_name = "DIR", env = "CDIGEN_DRIVER_ROOT")]
    pub driver_root: Option<PathBuf>,
    /// Directory to create the fixture tree in (must not exist or be empty).
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Directory of generator definitions (*.yaml) that add to or replace the built-in ones
    /// [default: /etc/cdigen/generators.d, when it exists]: the generic backend records what
    /// every one of them (enabled or not) scans.
    #[arg(long, value_name = "DIR", env = "CDIGEN_GENERATORS")]
    pub generators: Option<PathBuf>,
}

/// Where devices are discovered from.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot).
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Only run this backend (repeatable).
    #[arg(long = "backend", value_name = "NAME")]
    pub backends: Vec<String>,
    /// Where the NVIDIA driver's user-space files are, as a path on the host (under --root)
    /// [default: /run/nvidia/driver when it exists and is not empty (the GPU operator's driver
    /// container), else /].
    #[arg(long, value_name = "DIR", env = "CDIGEN_DRIVER_ROOT")]
    pub driver_root: Option<PathBuf>,
    /// Another directory to look for the NVIDIA driver's libraries in, under --driver-root,
    /// after the linker cache and the usual directories (repeatable; colon-separated in the
    /// environment variable).
    #[arg(
        long = "library-search-path",
        value_name = "DIR",
        env = "CDIGEN_LIBRARY_SEARCH_PATH",
        value_delimiter = ':'
    )]
    pub library_search_path: Vec<PathBuf>,
    /// Where container runtimes find the hook program on the host, for the `cdigen hook` steps
    /// NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches
    /// it), or cdigen; an installed, root-owned program, which stays there [default: when this
    /// cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook
    /// beside it, else this cdigen; run from anywhere else (a build directory, a download),
    /// /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a
    /// cdigen-hook installed on the host.
    #[arg(long, value_name = "PATH", env = "CDIGEN_HOOK_PATH")]
    pub hook_path: Option<PathBuf>,
    /// Never load NVIDIA's NVML library (loading a library runs its code): procfs and sysfs alone
    /// describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the
    /// system's with --root / and --driver-root /, else the driver root's libnvidia-ml.so.<version>,
    /// loaded only when it and every directory above it are owned by root and writable by root
    /// alone.
    #[arg(long, env = "CDIGEN_NO_NVML", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_nvml: bool,
}

impl SourceArgs {
    /// The flags as plain settings.
    pub fn host(&self) -> crate::generate::Host {
        crate::generate::Host {
            root: self.root.clone(),
            backends: self.backends.clone(),
            driver_root: self.driver_root.clone(),
            library_search_path: self.library_search_path.clone(),
            hook_path: self.hook_path.clone(),
            no_nvml: self.no_nvml,
        }
    }

    /// Opens the root with the driver's locations and the hook path.
    ///
    /// # Errors
    /// When the root cannot be used.
    pub fn host_root(&self) -> anyhow::Result<crate::root::HostRoot> {
        self.host().open()
    }
}

/// Which generator definitions and templates to use.
#[derive(Debug, Clone, Args)]
pub struct DefinitionArgs {
    /// Directory of generator definitions (*.yaml) that add to or replace the built-in ones
    /// [default: /etc/cdigen/generators.d]; skipped when it does not exist.
    #[arg(long, value_name = "DIR", env = "CDIGEN_GENERATORS")]
    pub generators: Option<PathBuf>,
    /// Directory of templates (NAME.json.hbs) that add to or replace the built-in ones
    /// [default: /etc/cdigen/templates]; skipped when it does not exist.
    #[arg(long, value_name = "DIR", env = "CDIGEN_TEMPLATES")]
    pub templates: Option<PathBuf>,
    /// Only run this generator (repeatable; default: every enabled generator).
    #[arg(long = "generator", value_name = "NAME")]
    pub only: Vec<String>,
}

impl DefinitionArgs {
    /// The flags as plain settings.
    pub fn definitions(&self) -> crate::generate::Definitions {
        crate::generate::Definitions {
            generators: self.generators.clone(),
            templates: self.templates.clone(),
            only: self.only.clone(),
        }
    }
}

/// Arguments of `cdigen generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Where to discover devices.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Generators and templates.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Directory to write CDI specs to: /etc/cdi for driver install hooks, /var/run/cdi for
    /// regeneration at boot or on hotplug.
    #[arg(long, value_name = "DIR", default_value = crate::cdi::DYNAMIC_DIR)]
    pub output_dir: PathBuf,
    /// Directory for NPWG device-info files of generators that write them.
    #[arg(long, value_name = "DIR", default_value = crate::devinfo::DP_DIR, env = "CDIGEN_DEVINFO_DIR")]
    pub devinfo_dir: PathBuf,
    /// A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then
    /// /var/run/cdi, under --root): a spec is not written while a file another tool wrote there
    /// defines one of its devices.
    #[arg(long = "spec-dir", value_name = "DIR")]
    pub spec_dirs: Vec<PathBuf>,
    /// Write the one selected generator's spec to FILE instead (- for stdout); no device-info
    /// files are written then.
    #[arg(long, value_name = "FILE", conflicts_with = "output_dir")]
    pub output: Option<PathBuf>,
    /// Spec format, overriding the generators' (default: each generator's, YAML for the built-in
    /// ones).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<SpecFormat>,
    /// Print what would change and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run, also print a unified diff of each change.
    #[arg(long, requires = "dry_run")]
    pub diff: bool,
    /// Give up waiting for the lock of an output directory another cdigen process is writing
    /// after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running
    /// command logs the error and retries later [default: wait as long as it takes]. After 1s of
    /// waiting a warning names the lock file and the PID holding it.
    #[arg(long, value_name = "DURATION", env = "CDIGEN_LOCK_TIMEOUT", value_parser = lock_timeout)]
    pub lock_timeout: Option<std::time::Duration>,
}

/// Arguments of `cdigen check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Where to discover devices.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Generators and templates.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Directory generate writes CDI specs to.
    #[arg(long, value_name = "DIR", default_value = crate::cdi::DYNAMIC_DIR)]
    pub output_dir: PathBuf,
    /// Directory generate writes NPWG device-info files to.
    #[arg(long, value_name = "DIR", default_value = crate::devinfo::DP_DIR, env = "CDIGEN_DEVINFO_DIR")]
    pub devinfo_dir: PathBuf,
    /// A spec directory runtimes read, lowest priority first, for conflicts, shadowing and other
    /// tools' files (repeatable; default: /etc/cdi then /var/run/cdi, under --root).
    #[arg(long = "spec-dir", value_name = "DIR")]
    pub spec_dirs: Vec<PathBuf>,
    /// Spec format generate is given with --format, if any.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<SpecFormat>,
    /// Output format.
    #[arg(short, long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Spec file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpecFormat {
    /// JSON.
    Json,
    /// YAML, every string quoted.
    Yaml,
}

impl From<SpecFormat> for crate::cdi::Format {
    fn from(f: SpecFormat) -> Self {
        match f {
            SpecFormat::Json => crate::cdi::Format::Json,
            SpecFormat::Yaml => crate::cdi::Format::Yaml,
        }
    }
}

/// Arguments of `cdigen discover`.
#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Where to discover devices.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Directory of generator definitions (*.yaml) that add to or replace the built-in ones
    /// [default: /etc/cdigen/generators.d, when it exists]: the generic backend scans what
    /// their `match` and `join` sections declare.
    #[arg(long, value_name = "DIR", env = "CDIGEN_GENERATORS")]
    pub generators: Option<PathBuf>,
    /// Scan for this generator's devices, enabled or not (repeatable; default: every enabled
    /// generator). Only the generic backend depends on the generators.
    #[arg(long = "generator", value_name = "NAME")]
    pub only: Vec<String>,
    /// Output format.
    #[arg(short, long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Arguments of `cdigen list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// A spec directory to read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi).
    #[arg(long = "spec-dir", value_name = "DIR", conflicts_with = "discovered")]
    pub spec_dirs: Vec<PathBuf>,
    /// List the names `cdigen generate` would write, from the devices discovered now.
    #[arg(long)]
    pub discovered: bool,
    /// Where to discover devices (with --discovered).
    #[command(flatten)]
    pub source: SourceArgs,
    /// Generators and templates (with --discovered).
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Output format: names one per line, or records with the file each comes from.
    #[arg(short, long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Arguments of `cdigen validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Spec files and directories, lowest priority first (default: /etc/cdi then /var/run/cdi).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long = "output-format", value_enum, default_value_t = ValidateFormat::Text)]
    pub output_format: ValidateFormat,
}

/// Arguments of `cdigen inject`.
#[derive(Debug, Args)]
pub struct InjectArgs {
    /// The devices to inject (vendor/class=name), in the order a runtime is given them.
    #[arg(value_name = "DEVICE", required = true)]
    pub devices: Vec<String>,
    /// A spec directory to read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi).
    #[arg(long = "spec-dir", value_name = "DIR")]
    pub spec_dirs: Vec<PathBuf>,
    /// Look at device nodes and mount sources under this directory instead of / (a fixture or a
    /// snapshot).
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Output format.
    #[arg(short, long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Output formats of `validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    /// One line per finding, then a summary.
    Text,
    /// One JSON document with every file's findings.
    Json,
}

/// The command line to parse: `argv` itself when the binary runs under
/// its own name, else `cdigen plugin` followed by the arguments (the
/// binary installed as a CDI plugin, `/opt/cdi/bin/drm`, as CNI plugins
/// are).
pub fn command_line(argv: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut argv: Vec<OsString> = argv.into_iter().collect();
    match argv.first() {
        Some(argv0) if !plugin::is_own_name(argv0) => {
            let rest = argv.split_off(1);
            [OsString::from("cdigen"), OsString::from("plugin")]
                .into_iter()
                .chain(rest)
                .collect()
        }
        _ => argv,
    }
}

/// Sets up logging to stderr from `-v`/`-q` (or `RUST_LOG`). Every field
/// of every record is escaped ([`crate::text::LogFields`]): a record is one
/// line, with no control character from the host in it.
pub fn init_logging(cli: &Cli) {
    let level = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            // A daemon logs its changes by default (the watch's own lines;
            // discovery's notes stay at -v).
            0 if matches!(cli.command, Command::Watch(_)) => "warn,cdigen::watch=info",
            0 if matches!(cli.command, Command::DevicePlugin(_)) => {
                "warn,cdigen::watch=info,cdigen::deviceplugin=info"
            }
            0 if matches!(cli.command, Command::DraDriver(_)) => {
                "warn,cdigen::watch=info,cdigen::dra=info"
            }
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal as _;
    if stderr_is_journal() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(io::stderr)
            .fmt_fields(crate::text::LogFields::new())
            .event_format(JournalFormat)
            .try_init();
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(io::stderr)
        .with_target(false)
        .without_time()
        .fmt_fields(crate::text::LogFields::new())
        .try_init();
}

/// Whether stderr is connected to journald: systemd sets `JOURNAL_STREAM`
/// to the device and inode of that stream (a child whose stderr was
/// redirected inherits the variable but not the stream).
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd as _;
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(io::stderr().as_fd()) else {
        return false;
    };
    want.to_str() == Some(&format!("{}:{}", stat.st_dev, stat.st_ino))
}

/// Log lines for journald: the priority as a `<N>` prefix (sd-daemon(3)),
/// which journald strips and records, and the message; no level word, no
/// timestamp.
struct JournalFormat;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JournalFormat
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            _ => 7,
        };
        write!(writer, "<{priority}>")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Runs a parsed command line, printing to `out` and `err`; returns the
/// exit code.
pub fn main(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let result = if matches!(cli.command, Command::Plugin(_)) {
        // The plugin's reply is its protocol: it sees its own write
        // errors.
        run(cli, out, err)
    } else {
        // The other commands that write to `out` write it and end (the
        // long-running ones log to stderr): one write per buffer, not per
        // line, and all of it before an error is printed.
        let mut buffered = io::BufWriter::with_capacity(64 << 10, out);
        let result = run(cli, &mut buffered, err);
        let flushed = buffered.flush().map_err(anyhow::Error::from);
        result.and_then(|code| flushed.map(|()| code))
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`cdigen list | head`) is not an error.
            if is_broken_pipe(&e) {
                return EXIT_OK;
            }
            let _ = print_error(err, &e);
            if is_lock_timeout(&e) {
                EXIT_LOCK_TIMEOUT
            } else {
                EXIT_ERROR
            }
        }
    }
}

/// True when `e` is, wherever in its chain, a wait for a lock that timed
/// out ([`crate::write::Error::LockTimeout`]).
fn is_lock_timeout(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<crate::write::Error>(),
            Some(crate::write::Error::LockTimeout { .. })
        )
    })
}

/// Prints `e` on one line, `cdigen: ` then its chain, escaped
/// ([`crate::text::Escaped`]): errors name host paths and quote host text.
fn print_error(err: &mut dyn Write, e: &anyhow::Error) -> io::Result<()> {
    writeln!(err, "cdigen: {}", crate::text::Escaped(&format!("{e:#}")))
}

/// True when `e` comes from writing to a closed pipe, wherever in its chain
/// (writers that wrap I/O errors, such as `serde_json`, must convert them back
/// with `io::Error::from` for this to see them).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Parses `--lock-timeout`: a duration such as `30s` or `5m`.
fn lock_timeout(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (a duration such as 30s or 5m)"))
}

/// Parses `--ignore-health`: health codes, comma-separated, or `none`.
fn ignore_health(
    s: &str,
) -> Result<std::collections::BTreeSet<crate::deviceplugin::signals::Code>, String> {
    crate::deviceplugin::signals::parse_ignore(s)
}

fn run(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Generate(args) => {
            crate::write::set_lock_timeout(args.lock_timeout);
            generate::run(args, out, err)
        }
        Command::Discover(args) => discover::run(args, out, err),
        Command::List(args) => list::run(args, out, err),
        Command::Validate(args) => validate::run(args, out),
        Command::Check(args) => check::run(args, out, err),
        Command::Inject(args) => inject::run(args, out, err),
        Command::Snapshot(args) => snapshot(args, out),
        Command::Plugin(args) => plugin::run(args, out),
        Command::Watch(args) => {
            crate::write::set_lock_timeout(args.lock_timeout);
            watch::run(args)
        }
        Command::DevicePlugin(args) => {
            crate::write::set_lock_timeout(args.watch.lock_timeout);
            device_plugin::run(args)
        }
        Command::DraDriver(args) => {
            crate::write::set_lock_timeout(args.watch.lock_timeout);
            dra_driver::run(args, out)
        }
        Command::Hook(args) => Ok(hook::run(args, &mut io::stdin().lock(), err)),
        Command::Completions(args) => completions::run(args, out),
    }
}

/// Scan inputs: the paths the user named, or the default spec directories
/// (missing defaults are skipped, as runtimes skip them).
fn inputs(paths: &[PathBuf]) -> Vec<crate::cdi::dirs::Input> {
    if paths.is_empty() {
        return default_inputs();
    }
    paths
        .iter()
        .map(|p| crate::cdi::dirs::Input {
            path: p.clone(),
            explicit: true,
        })
        .collect()
}

/// The default spec directories as scan inputs (missing ones are skipped).
fn default_inputs() -> Vec<crate::cdi::dirs::Input> {
    crate::cdi::DEFAULT_SPEC_DIRS
        .iter()
        .map(|d| crate::cdi::dirs::Input {
            path: PathBuf::from(d),
            explicit: false,
        })
        .collect()
}

/// `cdigen snapshot`.
fn snapshot(args: &SnapshotArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    use anyhow::Context as _;
    let root = crate::root::HostRoot::open_host(&args.root)
        .with_context(|| format!("cannot use {} as the root", crate::text::path(&args.root)))?
        .with_driver_root_or_detect(args.driver_root.as_deref())
        .recording();
    // Every definition, enabled or not, so that a later run with any of
    // them finds on the snapshot what it would find on the host.
    let user_dir = args
        .generators
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::generator::USER_DIR));
    let all = crate::generator::load(&[user_dir])?;
    let scan = crate::generator::scan(all.iter().map(|l| &l.generator));
    let found = crate::discover::discover_for(&root, &[], &scan)?;
    let record = root.take_record();
    let summary = crate::snapshot::write(&record, &args.output)?;
    // The devices counted are those `cdigen discover` lists (for the
    // enabled definitions); those only disabled ones match are said apart.
    let enabled = crate::generator::scan(
        all.iter()
            .filter(|l| l.generator.enabled)
            .map(|l| &l.generator),
    );
    let listed = crate::discover::discover_for(
        &crate::root::HostRoot::open(&args.root)?
            .with_driver_root_or_detect(args.driver_root.as_deref()),
        &[],
        &enabled,
    )?;
    let key = |d: &crate::model::Device| (d.backend.clone(), d.id.clone());
    let shown: std::collections::BTreeSet<_> = listed.devices.iter().map(key).collect();
    let more = found
        .devices
        .iter()
        .filter(|d| !shown.contains(&key(d)))
        .count();
    let more = if more == 0 {
        String::new()
    } else {
        format!(" (and {more} that only disabled generators match)")
    };
    writeln!(
        out,
        "wrote {}: {} devices found{more}, {} files, {} links, {} /dev entries",
        crate::text::path(&args.output),
        listed.devices.len(),
        summary.files,
        summary.links,
        summary.dev_entries
    )?;
    Ok(EXIT_OK)
}
