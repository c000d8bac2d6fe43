//! One allocator arena for the long-running servers.
//!
//! `cdigen dra-driver` and `cdigen device-plugin` run their passes on one
//! thread and their servers (the kubelet's gRPC, the API client) on
//! another. glibc's allocator gives each thread that allocates its own
//! arena, and what one arena has free the other cannot use: the server
//! thread's arena held 4.7 MiB beside the pass thread's heap, whose own
//! free space would have held it (`cargo bench --bench dra_api`, which
//! prints where each process is resident).
//!
//! glibc reads its number of arenas once, when a program starts
//! (`glibc.malloc.arena_max` in `GLIBC_TUNABLES`; `mallopt` would need
//! unsafe code), so [`one_arena`] runs the same program again in place
//! (`exec` of `/proc/self/exe`: the same process ID, arguments and
//! descriptors; Rust opens every descriptor close-on-exec) with the
//! tunable added. A `GLIBC_TUNABLES` that already names `arena_max` is
//! left as the user set it (`glibc.malloc.arena_max=8` gives more arenas
//! back). Builds for other C libraries, which ignore the variable, do not
//! re-run.

use std::ffi::{OsStr, OsString};

/// The variable glibc reads its tunables from.
pub const TUNABLES: &str = "GLIBC_TUNABLES";

/// The tunable that names the number of arenas.
const ARENA_MAX: &str = "glibc.malloc.arena_max";

/// The value `GLIBC_TUNABLES` needs for one arena, given the one it has
/// (`None`: unset); `None` when that already names the number of arenas.
pub fn tunables_for_one_arena(now: Option<&OsStr>) -> Option<OsString> {
    let one = format!("{ARENA_MAX}=1");
    let Some(now) = now else {
        return Some(one.into());
    };
    let named = now
        .to_string_lossy()
        .split(':')
        .any(|t| t.split('=').next() == Some(ARENA_MAX));
    if named {
        return None;
    }
    let mut v = now.to_os_string();
    if !v.is_empty() {
        v.push(":");
    }
    v.push(one);
    Some(v)
}

/// Runs this program again, in place, with one allocator arena
/// ([`tunables_for_one_arena`]), when glibc is its C library and the
/// environment does not name the number of arenas. Returns only when it
/// does not re-run: `Ok` when there is nothing to do, the error of the
/// `exec` otherwise (the caller goes on with the arenas it has).
///
/// # Errors
/// The `exec` failed (no `/proc`, say).
pub fn one_arena(argv: &[OsString]) -> std::io::Result<()> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return Ok(());
    }
    let Some(value) = tunables_for_one_arena(std::env::var_os(TUNABLES).as_deref()) else {
        return Ok(());
    };
    let Some((arg0, rest)) = argv.split_first() else {
        return Ok(());
    };
    use std::os::unix::process::CommandExt as _;
    tracing::debug!("running again with {TUNABLES}={}", value.to_string_lossy());
    Err(std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(rest)
        .env(TUNABLES, value)
        .exec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn for_one(now: Option<&str>) -> Option<String> {
        tunables_for_one_arena(now.map(OsStr::new)).map(|v| v.to_string_lossy().into_owned())
    }

    #[test]
    fn unset_or_empty_gets_one_arena() {
        assert_eq!(for_one(None).as_deref(), Some("glibc.malloc.arena_max=1"));
        assert_eq!(
            for_one(Some("")).as_deref(),
            Some("glibc.malloc.arena_max=1")
        );
    }

    #[test]
    fn other_tunables_are_kept_before_it() {
        assert_eq!(
            for_one(Some("glibc.malloc.trim_threshold=4096")).as_deref(),
            Some("glibc.malloc.trim_threshold=4096:glibc.malloc.arena_max=1")
        );
    }

    #[test]
    fn a_number_of_arenas_the_user_named_is_kept() {
        for v in [
            "glibc.malloc.arena_max=4",
            "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=8",
            "glibc.malloc.arena_max",
        ] {
            assert_eq!(for_one(Some(v)), None, "{v}");
        }
        // A name that only starts the same is another tunable.
        assert_eq!(
            for_one(Some("glibc.malloc.arena_max_x=2")).as_deref(),
            Some("glibc.malloc.arena_max_x=2:glibc.malloc.arena_max=1")
        );
    }
}
