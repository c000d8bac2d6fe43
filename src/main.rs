//! The `cdigen` binary: parses arguments and hands over to [`cdigen::cli`].
//! Run under another name (a link `/opt/cdi/bin/drm`), it is `cdigen plugin`;
//! as `cdigen-ldconfig-isolated`, the isolated ldconfig of
//! `cdigen hook update-ldcache`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `cdigen hook update-ldcache` runs ldconfig through itself under
    // this name (hook::ldconfig::isolate).
    if let Some(code) = cdigen::hook::ldconfig::isolate::main(&argv) {
        return ExitCode::from(code);
    }
    let cli = cdigen::cli::Cli::parse_from(cdigen::cli::command_line(argv.clone()));
    cdigen::cli::init_logging(&cli);
    // The servers' threads share one allocator arena (cli::arena): this
    // returns only when it does not run itself again.
    if cli.serves()
        && let Err(e) = cdigen::cli::arena::one_arena(&argv)
    {
        tracing::warn!(
            "cannot run again with one allocator arena ({e}); going on with glibc's default"
        );
    }
    let stdout = std::io::stdout();
    // Stderr is not held locked: the device plugin logs from several
    // threads.
    let code = cdigen::cli::main(&cli, &mut stdout.lock(), &mut std::io::stderr());
    ExitCode::from(code)
}
