//! `cdigen device-plugin`: the watch's pipeline without device-info files
//! (the plugin writes them on allocation), the signal handlers, and
//! [`crate::deviceplugin::run`].

use std::sync::Arc;

use super::{DevicePluginArgs, EXIT_OK};
use crate::deviceplugin::signals::Checks;
use crate::deviceplugin::{self, Options};
use crate::watch::{self, Regenerate as _};

pub(crate) fn run(args: &DevicePluginArgs) -> anyhow::Result<u8> {
    let w = &args.watch;
    let pipeline = super::watch::pipeline(w)?.with_device_info(false);
    let subsystems = watch::all_subsystems(&pipeline.watched());
    let kind = w.events;
    let control = super::watch::control()?;
    let config = super::watch::config(w);
    let options = Options {
        plugin_dir: args.plugin_dir.clone(),
        pod_resources: args.pod_resources_socket.clone(),
        output_dir: w.output_dir.clone(),
        devinfo_dir: w.devinfo_dir.clone(),
        legacy: args.legacy_edits,
        pod_uid: super::dra_driver::pod_uid(args.pod_uid.as_deref())?,
        health: Checks::ignoring(args.health.ignore_health.iter().copied()),
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
