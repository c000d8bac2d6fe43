//! `cdigen completions`: shell completion scripts, generated from the same
//! clap definitions as the man pages (`clap_complete`).
//!
//! The scripts are also committed under `contrib/completions/` for packages;
//! `tests/completions.rs` keeps them current.

use std::io::Write;

use clap::{CommandFactory, ValueEnum};

use super::{Cli, CompletionsArgs, EXIT_OK};

/// The shells cdigen writes completions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// bash, with bash-completion: /usr/share/bash-completion/completions/cdigen.
    Bash,
    /// zsh: _cdigen in a directory of $fpath, such as /usr/share/zsh/vendor-completions.
    Zsh,
    /// fish: /usr/share/fish/vendor_completions.d/cdigen.fish.
    Fish,
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    // clap_complete panics when a write fails: render into memory (which
    // cannot fail), and let the caller write it out with error handling.
    let mut buf = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, "cdigen", &mut buf);
    buf
}

pub(crate) fn run(args: &CompletionsArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    out.write_all(&script(args.shell))?;
    out.flush()?;
    Ok(EXIT_OK)
}
