//! `cdigen-hook`: the OCI hooks of cdigen's NVIDIA specs (`cdigen hook
//! <step>`) as a program of their own, built as a static executable (see
//! docs/hooks.md): it has no program interpreter, so no dynamic
//! loader runs before it and no `LD_PRELOAD` or `LD_AUDIT` of the
//! container's environment can load code into it, even when a spec's hook
//! has no `env`. It takes the same command line as `cdigen hook`, with or
//! without the word `hook` (specs name it `cdigen hook <step> ...`).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(cdigen::cli::hook_program(std::env::args_os()))
}
