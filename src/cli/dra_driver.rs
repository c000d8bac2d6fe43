//! `cdigen dra-driver`: `--print-slices` (the host read once, the slices
//! printed) or the driver itself ([`crate::dra`]).

use std::io::Write;

use std::sync::Arc;

use super::{DraDriverArgs, EXIT_OK};
use crate::dra::run::Options;
use crate::watch::{self, Config, Control, Pipeline, Regenerate as _};

pub(crate) fn run(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if args.print_slices {
        print_slices(args, out)
    } else {
        serve(args)
    }
}

/// `--print-slices`.
fn print_slices(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let _ = (args, out);
    anyhow::bail!("cdigen dra-driver --print-slices: not built yet")
}

/// The driver: the watch's pipeline without device-info files, the
/// signal handlers, and [`crate::dra::run`].
fn serve(args: &DraDriverArgs) -> anyhow::Result<u8> {
    let Some(node) = args.node.clone().filter(|n| !n.is_empty()) else {
        anyhow::bail!(
            "cdigen dra-driver: no node name: give --node NAME or set NODE_NAME (in a DaemonSet, \
from the downward API's spec.nodeName); the slices are published for it"
        );
    };
    let w = &args.watch;
    let pipeline = Pipeline::new(
        w.source.host(),
        w.defs.definitions(),
        w.output_dir.clone(),
        w.devinfo_dir.clone(),
        w.format.map(Into::into),
    )?
    .with_device_info(false)
    .with_spec_dirs(w.spec_dirs.clone());
    let subsystems = watch::all_subsystems(&pipeline.watched());
    let kind = w.events;
    let mut control = Control::new()?;
    control.handle_signals()?;
    let config = Config {
        debounce: w.debounce,
        max_delay: w.max_delay,
        interval: w.interval,
        ready_file: w.ready_file.clone(),
        ..Config::default()
    };
    let options = Options {
        driver: args.driver_name.clone(),
        node,
        plugin_dir: args.plugin_dir.clone(),
        registry_dir: args.registry_dir.clone(),
        output_dir: w.output_dir.clone(),
    };
    crate::dra::run::run(
        &config,
        move || super::watch::open_source(kind, subsystems.as_ref()),
        pipeline,
        Arc::new(control),
        &options,
    )?;
    Ok(EXIT_OK)
}
