//! Shared by the benchmarks that run cdigen as a process (`device_plugin`,
//! `dra_api`): the command, a child killed on drop, its memory, a spec
//! file watched for a device, and the medians and ratios they print.

// Each benchmark uses a different part of this module.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long a benchmark waits for anything.
pub const WAIT: Duration = Duration::from_secs(60);

/// The median of `v` (zero when empty).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// `a` as a multiple of `b`: `1.13x`.
pub fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

/// One figure beside its baseline and their ratio.
pub fn row(what: &str, t: Duration, base: Duration, base_name: &str) {
    println!(
        "  {what:<38} {:>11} {:>11} {:>9}  ({base_name})",
        format!("{t:.2?}"),
        format!("{base:.2?}"),
        ratio(t, base)
    );
}

/// A `cdigen` command in `dir`, with no user generators or templates,
/// plugin or device-info directory, node or cluster from the environment,
/// and no journal or systemd notification socket.
pub fn cdigen(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cdigen"));
    c.current_dir(dir)
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("CDIGEN_PLUGIN_DIR")
        .env_remove("CDIGEN_DEVINFO_DIR")
        .env_remove("NODE_NAME")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Proc {
    /// Its process ID.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Sends it `SIG<sig>`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// (VmHWM, VmRSS) of `pid`, in bytes.
pub fn memory(pid: u32) -> (u64, u64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_default()
            * 1024
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Where `pid`'s resident memory is, from `/proc/<pid>/smaps`: the Rss of
/// its mappings summed by kind, in bytes: `heap` (the `[heap]` mapping, the
/// main allocator arena), `anon` (anonymous mappings: other threads'
/// allocator arenas, large allocations, thread stacks), `binary` (the
/// executable's own file), `libraries` (every other file) and `other`
/// (the main stack, vdso and the like).
pub fn memory_parts(pid: u32) -> Vec<(&'static str, u64)> {
    let smaps = fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let mut parts = vec![
        ("heap", 0),
        ("anon", 0),
        ("binary", 0),
        ("libraries", 0),
        ("other", 0),
    ];
    let mut kind = 4;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            // A mapping's header: range perms offset dev inode [name].
            let name = words.nth(4).unwrap_or("");
            kind = if name == "[heap]" {
                0
            } else if name.is_empty() {
                1
            } else if Path::new(name) == exe {
                2
            } else if name.starts_with('/') {
                3
            } else {
                4
            };
        } else if first == "Rss:" {
            let kb: u64 = words
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_default();
            if let Some(part) = parts.get_mut(kind) {
                part.1 += kb * 1024;
            }
        }
    }
    parts
}

/// [`memory_parts`] on one line: `heap 12.0 MiB, anon 3.1 MiB, ...`.
pub fn memory_parts_line(pid: u32) -> String {
    memory_parts(pid)
        .into_iter()
        .map(|(k, b)| format!("{k} {}", mib(b)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `b` bytes in MiB, for printing.
pub fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
}

/// The identity of a file (device, inode), `None` when absent.
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Waits until the spec `file` (replaced by rename on every write) says
/// `address` is `present`; when it was seen so.
pub fn spec_shows(file: &Path, address: &str, present: bool) -> Instant {
    let end = Instant::now() + WAIT;
    let mut last = None;
    loop {
        let id = identity(file);
        if id != last {
            last = id;
            let now = Instant::now();
            let text = fs::read_to_string(file).unwrap_or_default();
            if text.contains(address) == present {
                return now;
            }
        }
        assert!(Instant::now() < end, "timed out waiting on {file:?}");
        thread::sleep(Duration::from_millis(1));
    }
}
