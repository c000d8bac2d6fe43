//! The `cdigen` binary: parses arguments and hands over to [`cdigen::cli`].

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cdigen::cli::Cli::parse();
    cdigen::cli::init_logging(&cli);
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let code = cdigen::cli::main(&cli, &mut stdout.lock(), &mut stderr.lock());
    ExitCode::from(code)
}
