//! `cdigen inject`: what a container gets when a runtime injects some CDI
//! devices ([`crate::cdi::inject`]), as text or one document.

use std::io::Write;

use anyhow::Context as _;

use super::output::{OutputFormat, write_structured};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, InjectArgs};
use crate::cdi::dirs::{Input, Severity, scan};
use crate::cdi::inject::{FindingKind, Injection, Oci, inject};
use crate::text::Escaped;

pub(crate) fn run(
    args: &InjectArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<u8> {
    let root = crate::root::HostRoot::open(&args.root)
        .with_context(|| format!("cannot use {} as the root", crate::text::path(&args.root)))?;
    let inputs: Vec<Input> = super::inputs(&args.spec_dirs);
    let view = scan(&inputs);
    // A spec directory the user named that cannot be read: the answer
    // would be about other directories than those meant.
    if !view.input_errors.is_empty() {
        for e in &view.input_errors {
            writeln!(err, "cdigen: {}", Escaped(e))?;
        }
        return Ok(EXIT_ERROR);
    }
    let result = inject(&view, &inputs, &args.devices, &root);
    match args.output_format {
        OutputFormat::Text => text(out, &result)?,
        format => write_structured(out, format, &result)?,
    }
    Ok(if result.injected {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}

/// The edits by section, then one line per finding, then a summary.
fn text(out: &mut dyn Write, result: &Injection) -> anyhow::Result<()> {
    if let Some(oci) = &result.oci {
        edits(out, oci)?;
    }
    let mut warnings = 0;
    for f in &result.findings {
        // The refusal is the summary line.
        if f.kind == FindingKind::InjectionFailed {
            continue;
        }
        let severity = match f.severity {
            Severity::Error => "error",
            Severity::Warning => {
                warnings += 1;
                "warning"
            }
        };
        let subject = if f.subject.is_empty() {
            String::new()
        } else {
            format!("{}: ", Escaped(&f.subject))
        };
        writeln!(
            out,
            "{severity}: {}: {subject}{}",
            f.kind.name(),
            Escaped(&f.message)
        )?;
    }
    match &result.error {
        Some(e) => writeln!(out, "not injected: {}", Escaped(e))?,
        None => writeln!(
            out,
            "injected {}: {}",
            plural(result.devices.len(), "device"),
            plural(warnings, "warning")
        )?,
    }
    Ok(())
}

/// The OCI edits, one section per kind, empty sections left out.
fn edits(out: &mut dyn Write, oci: &Oci) -> anyhow::Result<()> {
    if !oci.env.is_empty() {
        writeln!(out, "env:")?;
        for e in &oci.env {
            writeln!(out, "  {}", Escaped(e))?;
        }
    }
    if !oci.devices.is_empty() {
        writeln!(out, "devices:")?;
        for d in &oci.devices {
            let mut line = format!("  {}: {}", Escaped(&d.path), Escaped(&d.node_type));
            if d.node_type != "p" {
                line.push_str(&format!(" {}:{}", d.major, d.minor));
            }
            if let Some(m) = d.file_mode {
                line.push_str(&format!(" mode {m:04o}"));
            }
            if let Some(u) = d.uid {
                line.push_str(&format!(" uid {u}"));
            }
            if let Some(g) = d.gid {
                line.push_str(&format!(" gid {g}"));
            }
            writeln!(out, "{line}")?;
        }
    }
    if !oci.cgroup_devices.is_empty() {
        writeln!(out, "cgroup device rules:")?;
        for r in &oci.cgroup_devices {
            writeln!(
                out,
                "  {} {} {}:{} {}",
                if r.allow { "allow" } else { "deny" },
                Escaped(&r.node_type),
                r.major,
                r.minor,
                Escaped(&r.access)
            )?;
        }
    }
    if !oci.mounts.is_empty() {
        writeln!(out, "mounts:")?;
        for m in &oci.mounts {
            let mut line = format!("  {}: {}", Escaped(&m.destination), Escaped(&m.source));
            if !m.mount_type.is_empty() {
                line.push_str(&format!(" type {}", Escaped(&m.mount_type)));
            }
            if !m.options.is_empty() {
                line.push_str(&format!(" options {}", Escaped(&m.options.join(","))));
            }
            writeln!(out, "{line}")?;
        }
    }
    let mut hooks = oci.hooks.iter().peekable();
    if hooks.peek().is_some() {
        writeln!(out, "hooks:")?;
        for (name, h) in hooks {
            let mut line = format!("  {name}: {}", Escaped(&h.path));
            if !h.args.is_empty() {
                line.push_str(&format!(" args {}", Escaped(&h.args.join(" "))));
            }
            if !h.env.is_empty() {
                line.push_str(&format!(" env {}", Escaped(&h.env.join(" "))));
            }
            if let Some(t) = h.timeout {
                line.push_str(&format!(" timeout {t}s"));
            }
            writeln!(out, "{line}")?;
        }
    }
    if !oci.additional_gids.is_empty() {
        let gids: Vec<String> = oci.additional_gids.iter().map(u32::to_string).collect();
        writeln!(out, "additional gids: {}", gids.join(" "))?;
    }
    if let Some(rdt) = &oci.intel_rdt {
        let mut parts = Vec::new();
        if !rdt.clos_id.is_empty() {
            parts.push(format!("closID {}", Escaped(&rdt.clos_id)));
        }
        if !rdt.schemata.is_empty() {
            parts.push(format!("schemata {}", Escaped(&rdt.schemata.join("; "))));
        }
        if !rdt.l3_cache_schema.is_empty() {
            parts.push(format!("l3CacheSchema {}", Escaped(&rdt.l3_cache_schema)));
        }
        if !rdt.mem_bw_schema.is_empty() {
            parts.push(format!("memBwSchema {}", Escaped(&rdt.mem_bw_schema)));
        }
        if rdt.enable_monitoring {
            parts.push("enableMonitoring".to_string());
        }
        writeln!(out, "intelRdt: {}", parts.join(", "))?;
    }
    if !oci.net_devices.is_empty() {
        writeln!(out, "net devices:")?;
        for (host, d) in &oci.net_devices {
            writeln!(out, "  {}: {}", Escaped(host), Escaped(&d.name))?;
        }
    }
    Ok(())
}

/// `1 device`, `2 devices`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
