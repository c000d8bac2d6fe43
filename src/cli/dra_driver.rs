//! `cdigen dra-driver`: `--print-slices` (the host read once, the slices
//! printed) or the driver itself ([`crate::dra`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use anyhow::Context as _;

use super::{DraDriverArgs, EXIT_OK};
use crate::deviceplugin::inventory::{self, Inventory};
use crate::deviceplugin::signals::Checks;
use crate::dra::run::Options;
use crate::dra::{names, slices};
use crate::generate::{Planned, plan_all};
use crate::watch::{self, Regenerate as _};

pub(crate) fn run(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if args.print_slices {
        print_slices(args, out)
    } else {
        serve(args)
    }
}

/// The node name of `--node` (or `NODE_NAME`), checked.
fn node_name(args: &DraDriverArgs) -> anyhow::Result<&str> {
    let node = args.node.as_deref().context(
        "no node name: pass --node NAME or set NODE_NAME (the slices' nodeName and pool)",
    )?;
    slices::check_node_name(node).map_err(anyhow::Error::msg)?;
    slices::check_driver_name(&args.driver_name).map_err(anyhow::Error::msg)?;
    Ok(node)
}

/// `--print-slices`: the ResourceSlices the driver would publish now, pool
/// generation 1, as YAML documents. The host is read as the driver reads
/// it after a pass (the same definitions, discovery, plans and
/// inventory), but the plans stay in memory: nothing is written.
fn print_slices(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let node = node_name(args)?;
    let w = &args.watch;
    let (generators, templates, broken) = super::pipeline::definitions(&w.defs, &w.source)?;
    for b in &broken {
        tracing::error!("{b}");
    }
    let (root, found) = super::pipeline::discover_for_generate(&w.source, &generators)?;
    let defs = inventory::resources(&generators)?;
    let planned = plan_all(&generators, &templates, &found, w.format.map(Into::into));
    for f in planned.failed {
        tracing::warn!("{:#}", anyhow::Error::from(f.error));
    }
    let plans: BTreeMap<String, Arc<Planned>> = planned
        .planned
        .into_iter()
        .map(|p| (p.generator.clone(), Arc::new(p)))
        .collect();
    let (inv, collisions) = inventory::build_with(
        &defs,
        &plans,
        &root,
        &w.output_dir,
        &Inventory::default(),
        &BTreeSet::new(),
        &Checks::ignoring(args.health.ignore_health.iter().copied()),
        inventory::Read::All,
    );
    for c in collisions {
        tracing::warn!("{c}; both left out");
    }
    let devices = names::devices(&inv);
    for s in slices::slices(&devices, &args.driver_name, node, 1) {
        let options = serde_saphyr::ser_options! { quote_all: true };
        let text = serde_saphyr::to_string_with_options(&s, options)
            .context("cannot encode a ResourceSlice as YAML")?;
        writeln!(out, "---")?;
        out.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            writeln!(out)?;
        }
    }
    Ok(EXIT_OK)
}

/// `--pod-uid`: `None` when not given or empty (the downward API gives
/// an empty value to no pod), else a checked UID.
///
/// # Errors
/// A value that is not a UID.
pub(crate) fn pod_uid(uid: Option<&str>) -> anyhow::Result<Option<String>> {
    match uid.filter(|u| !u.is_empty()) {
        None => Ok(None),
        Some(u) => {
            crate::write::check_pod_uid(u).map_err(|e| anyhow::anyhow!("--pod-uid: {e}"))?;
            Ok(Some(u.to_string()))
        }
    }
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
    let pipeline = super::watch::pipeline(w)?.with_device_info(false);
    let subsystems = watch::all_subsystems(&pipeline.watched());
    let kind = w.events;
    let control = super::watch::control()?;
    let config = super::watch::config(w);
    // Absolute: the kubelet dials the endpoint GetInfo names, and the
    // per-claim specs mount the metadata files by their host paths.
    let absolute = |p: &std::path::Path| {
        std::path::absolute(p).with_context(|| format!("cannot make {} absolute", p.display()))
    };
    let options = Options {
        driver: args.driver_name.clone(),
        node,
        plugin_dir: absolute(&args.plugin_dir)?,
        registry_dir: absolute(&args.registry_dir)?,
        output_dir: w.output_dir.clone(),
        root: Arc::new(w.source.host_root()?),
        pod_uid: pod_uid(args.pod_uid.as_deref())?,
        health: Checks::ignoring(args.health.ignore_health.iter().copied()),
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
