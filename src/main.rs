//! The `cdigen` binary: parses arguments and hands over to [`cdigen::cli`].
//! Run under another name (a link `/opt/cdi/bin/drm`), it is `cdigen plugin`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cdigen::cli::Cli::parse_from(cdigen::cli::command_line(std::env::args_os()));
    cdigen::cli::init_logging(&cli);
    let stdout = std::io::stdout();
    // Stderr is not held locked: the device plugin logs from several
    // threads.
    let code = cdigen::cli::main(&cli, &mut stdout.lock(), &mut std::io::stderr());
    ExitCode::from(code)
}
