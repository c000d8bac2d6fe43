//! `cdigen plugin`: the 2017 draft's CDI plugin protocol (see
//! [`crate::plugin`]). Reads the `CDI_*` environment variables and the
//! configuration on stdin, prints the JSON reply on stdout. Also what the
//! binary does when run under another name (`/opt/cdi/bin/drm`).

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::PluginArgs;
use crate::plugin::{self, Invocation, Options};

/// Environment variable of the test hook [`Options::hold_before_save`]
/// (milliseconds, at most [`plugin::MAX_TEST_HOLD`]): for tests only.
const HOLD_ENV: &str = "CDIGEN_TEST_HOLD_LOCK_MS";

/// The test hook's wait, from [`HOLD_ENV`]: `None` when unset; an error
/// naming the variable when it is not a number of milliseconds from 0 to
/// [`plugin::MAX_TEST_HOLD`] (a typo must not pass silently, nor a value
/// that would hold the lock for hours).
fn hold_before_save() -> anyhow::Result<Option<Duration>> {
    let Some(raw) = std::env::var_os(HOLD_ENV) else {
        return Ok(None);
    };
    let max = plugin::MAX_TEST_HOLD.as_millis();
    match raw.to_str().and_then(|s| s.parse::<u64>().ok()) {
        Some(ms) if u128::from(ms) <= max => Ok(Some(Duration::from_millis(ms))),
        _ => anyhow::bail!(
            "{HOLD_ENV}={}: must be a number of milliseconds from 0 to {max} (a test hook)",
            crate::text::Escaped(&raw.to_string_lossy())
        ),
    }
}

fn env(name: &str) -> Option<String> {
    // A value that is not UTF-8 is kept (lossily) so that it is reported
    // as malformed rather than as missing.
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// Runs the command the environment names; returns the exit status.
pub(super) fn run(args: &PluginArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let inv = Invocation {
        command: env("CDI_COMMAND"),
        version: env("CDI_VERSION"),
        request: env("CDI_REQUEST"),
        request_id: env("CDI_REQUEST_ID"),
        numa_locality: env("CDI_REQUEST_NUMA_LOCALITY"),
    };
    let opts = Options {
        root: args.root.clone(),
        driver_root: args.driver_root.clone(),
        generator_dirs: vec![
            args.generators
                .clone()
                .unwrap_or_else(|| PathBuf::from(crate::generator::USER_DIR)),
        ],
        state_dir: args.state_dir.clone(),
        hold_before_save: hold_before_save()?,
    };
    // The exit status is the protocol's: a reply that cannot be written
    // (a closed stdout) is an error the plugin reports itself, never the
    // success a broken pipe means to other commands.
    Ok(plugin::run(&inv, &mut std::io::stdin().lock(), &opts, out))
}

/// Whether the binary was run under its own name (`cdigen`, or a name
/// starting with `cdigen`, such as `cdigen-1.2`), rather than as a plugin
/// (`/opt/cdi/bin/drm`).
pub(super) fn is_own_name(argv0: &OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"cdigen"))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::super::command_line;

    fn line(argv: &[&str]) -> Vec<String> {
        command_line(argv.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn another_name_is_the_plugin_command() {
        assert_eq!(line(&["/opt/cdi/bin/drm"]), ["cdigen", "plugin"]);
        assert_eq!(
            line(&["generic-tty", "--state-dir", "/s"]),
            ["cdigen", "plugin", "--state-dir", "/s"]
        );
        assert_eq!(
            line(&["/usr/bin/cdigen", "list"]),
            ["/usr/bin/cdigen", "list"]
        );
        assert_eq!(line(&["cdigen-0.1"]), ["cdigen-0.1"]);
        assert_eq!(line(&[]), Vec::<String>::new());
    }
}
