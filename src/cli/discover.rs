//! `cdigen discover`: what the backends found, as a table or a document.

use std::io::Write;

use super::output::{OutputFormat, write_structured};
use super::{DiscoverArgs, EXIT_FINDINGS, EXIT_OK};

pub(crate) fn run(
    args: &DiscoverArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (generators, broken) = super::pipeline::generators(args.generators.as_deref(), &args.only)?;
    // What the backends find does not depend on a broken definition's
    // generator beyond its scan: said, and the rest is listed.
    let broken = super::pipeline::report_broken(err, &broken)?;
    let (_root, found) = super::pipeline::discover(&args.source, &generators)?;
    match args.output_format {
        OutputFormat::Text => {
            let mut rows = vec![[
                "BACKEND".to_string(),
                "DEVICE".into(),
                "DRIVER".into(),
                "NUMA".into(),
                "NODES".into(),
                "NAME".into(),
            ]];
            for d in &found.devices {
                let name = d
                    .pci
                    .as_ref()
                    .map(|p| {
                        let ids = format!(
                            "[{}:{}]",
                            p.vendor_id.trim_start_matches("0x"),
                            p.device_id.trim_start_matches("0x")
                        );
                        match (&p.vendor_name, &p.device_name) {
                            (Some(v), Some(n)) => format!("{v} {n} {ids}"),
                            (Some(v), None) => format!("{v} {ids}"),
                            _ => ids,
                        }
                    })
                    .or_else(|| d.attrs.get("compatible").cloned())
                    .or_else(|| d.attrs.get("product").cloned())
                    .unwrap_or_default();
                rows.push([
                    d.backend.clone(),
                    d.id.clone(),
                    d.driver.clone().unwrap_or_else(|| "-".into()),
                    d.numa_node.map_or_else(|| "-".into(), |n| n.to_string()),
                    d.nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    name,
                ]);
            }
            if found.devices.is_empty() {
                writeln!(out, "no devices found")?;
            } else {
                write_table(out, &rows)?;
            }
        }
        format => write_structured(out, format, &found)?,
    }
    Ok(if broken { EXIT_FINDINGS } else { EXIT_OK })
}

/// Writes rows as left-aligned columns separated by two spaces, every
/// cell escaped ([`crate::text::escape`]): device ids, drivers, `pci.ids`
/// and USB names come from the host.
fn write_table<const N: usize>(out: &mut dyn Write, rows: &[[String; N]]) -> std::io::Result<()> {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| {
            row.clone()
                .map(|cell| crate::text::escape(&cell).into_owned())
        })
        .collect();
    let mut widths = [0usize; N];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
