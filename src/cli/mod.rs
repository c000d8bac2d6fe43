//! The command-line interface: clap definitions (also used to generate the
//! man pages in `man/`) and the commands behind them.
//!
//! Exit codes: 0 success; 1 findings or failures (an invalid spec, a file
//! cdigen refused to touch); 2 usage or environment errors (bad arguments,
//! unreadable inputs). Errors are printed as a chain:
//! `cdigen: cannot do X: because Y: because Z`.

mod list;
mod output;
mod validate;

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use output::OutputFormat;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: findings (invalid specs) or failures (a file not written).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: usage or environment error.
pub const EXIT_ERROR: u8 = 2;

/// Discover a host's devices and write CDI specs and device-info files.
#[derive(Debug, Parser)]
#[command(
    name = "cdigen",
    version,
    about,
    long_about = "Discover the devices a Linux host has (DRM GPUs, VFIO, SR-IOV VFs, vDPA, NVIDIA \
GPUs with MIG) and write the Container Device Interface (CDI) specs and device-info files that \
container runtimes and Kubernetes need to hand them to containers.",
    after_help = "Exit status: 0 success, 1 findings or failures (invalid specs, a file not \
written), 2 usage or environment errors."
)]
pub struct Cli {
    /// More output (-v info, -vv debug, -vvv trace); also RUST_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Discover devices and write CDI specs and device-info files.
    Generate(GenerateArgs),
    /// Discover devices and print what was found, without writing anything.
    Discover(DiscoverArgs),
    /// List the fully-qualified CDI device names (vendor/class=name) in the spec directories.
    List(ListArgs),
    /// Validate CDI spec files and directories by the rules runtimes apply.
    Validate(ValidateArgs),
}

/// Arguments of `cdigen generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Read sysfs, procfs and /dev under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Directory to write CDI specs to (/etc/cdi for install hooks, /var/run/cdi for regeneration).
    #[arg(long, value_name = "DIR", default_value = crate::cdi::DYNAMIC_DIR)]
    pub spec_dir: PathBuf,
}

/// Arguments of `cdigen discover`.
#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Read sysfs, procfs and /dev under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/", env = "CDIGEN_ROOT")]
    pub root: PathBuf,
    /// Output format.
    #[arg(short, long = "output-format", value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Arguments of `cdigen list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// A spec directory to read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi).
    #[arg(long = "spec-dir", value_name = "DIR")]
    pub spec_dirs: Vec<PathBuf>,
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

/// Output formats of `validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    /// One line per finding, then a summary.
    Text,
    /// One JSON document with every file's findings.
    Json,
}

/// Sets up logging to stderr from `-v`/`-q` (or `RUST_LOG`).
pub fn init_logging(cli: &Cli) {
    let level = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
}

/// Runs a parsed command line, printing to `out` and `err`; returns the
/// exit code.
pub fn main(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match run(cli, out, err) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`cdigen list | head`) is not an error.
            if e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            {
                return EXIT_OK;
            }
            let _ = writeln!(err, "cdigen: {e:#}");
            EXIT_ERROR
        }
    }
}

fn run(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Generate(_) | Command::Discover(_) => {
            anyhow::bail!(
                "no discovery backends are built into this version of cdigen yet; \
                 `cdigen validate` and `cdigen list` work on existing specs"
            )
        }
        Command::List(args) => list::run(args, out, err),
        Command::Validate(args) => validate::run(args, out),
    }
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
