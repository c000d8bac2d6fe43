//! `cdigen device-plugin`: the watch's pipeline without device-info files
//! (the plugin writes them on allocation), the signal handlers, and
//! [`crate::deviceplugin::run`].

use std::sync::Arc;

use super::{DevicePluginArgs, EXIT_OK};
use crate::deviceplugin::{self, Options};
use crate::watch::{self, Config, Control, Pipeline, Regenerate as _};

pub(crate) fn run(args: &DevicePluginArgs) -> anyhow::Result<u8> {
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
        plugin_dir: args.plugin_dir.clone(),
        pod_resources: args.pod_resources_socket.clone(),
        output_dir: w.output_dir.clone(),
        devinfo_dir: w.devinfo_dir.clone(),
        legacy: args.legacy_edits,
    };
    deviceplugin::run(
        &config,
        move || super::watch::open_source(kind, subsystems.as_ref()),
        pipeline,
        Arc::new(control),
        &options,
    )?;
    Ok(EXIT_OK)
}
