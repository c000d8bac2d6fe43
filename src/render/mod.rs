//! Rendering: handlebars templates turn selected devices into spec text,
//! which is parsed straight back into the typed [`Spec`].
//!
//! A template file declares the contract it is written to ([`CONTRACTS`]):
//! contract 1 (no declaration) renders the whole spec from one context
//! holding every CDI device; contract 2 (`{{!-- cdigen-template: 2 --}}`)
//! has a device part (`{{#*inline "device"}}...{{/inline}}`), rendered and
//! parsed once per CDI device with that device's context alone, and a
//! spec-level part, rendered once without the devices. Contract 2 keeps
//! one device's context and text in memory at a time, not the whole
//! spec's (handlebars turns its context into JSON values: the whole
//! context of 1024 VFs is tens of MB).
//!
//! The registry runs in strict mode (a missing variable is an error), and
//! HTML escaping is replaced: `{{value}}` is escaped as the inside of a JSON
//! string, and the `json` helper writes a whole JSON value. A quote,
//! newline, backslash or `{{` in a sysfs value therefore comes out as data.
//! A template that opts out of escaping (`{{{x}}}`, `{{&x}}`, in any
//! spelling and at any depth: see [`unescaped_outputs`]) is refused when it
//! is loaded; the parsed template is checked, not its text.
//! Parsing the result with unknown fields rejected means a template or a
//! value can never add a field the model does not know.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use handlebars::{
    Context, Handlebars, Helper, HelperResult, Output, RenderContext, RenderErrorReason,
};
use serde::Serialize;

use crate::cdi::{self, DeviceNode, Spec};
use crate::generator::{Generator, LinkMode, NameStrategy};
use crate::model::{Device, Link};
use crate::sysfs::PciAddress;

/// The shipped templates: (name, content).
pub const BUILTIN: &[(&str, &str)] = &[
    ("drm", include_str!("../../templates/drm.json.hbs")),
    ("generic", include_str!("../../templates/generic.json.hbs")),
    ("nvidia", include_str!("../../templates/nvidia.json.hbs")),
    ("rdma", include_str!("../../templates/rdma.json.hbs")),
    ("sriov", include_str!("../../templates/sriov.json.hbs")),
    ("vdpa", include_str!("../../templates/vdpa.json.hbs")),
    ("vfio", include_str!("../../templates/vfio.json.hbs")),
];

/// Node roles every device of a spec needs, offered as `common_nodes`.
pub const COMMON_ROLES: [&str; 4] = crate::model::NVIDIA_CONTROL_ROLES;

/// Largest template file read.
pub const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

/// File suffix of templates in a directory.
pub const SUFFIX: &str = ".json.hbs";

/// The template contracts this version knows, oldest first.
pub const CONTRACTS: [u32; 2] = [1, 2];

/// The word of a contract declaration: a top-level comment
/// `{{!-- cdigen-template: 2 --}}`. A template without one is contract 1.
pub const DECLARATION: &str = "cdigen-template";

/// The name of a contract-2 template's device part: a top-level
/// `{{#*inline "device"}}...{{/inline}}`.
pub const DEVICE_PART: &str = "device";

/// Under which name the registry holds the device part of the template
/// `name`: not a name a template file can have (it cannot hold `/`).
fn device_part_name(name: &str) -> String {
    format!("{name}/{DEVICE_PART}")
}

/// Rendering failures; every variant names the template's file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The template directory or a template could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A template file that is not a regular file, too large, or
    /// unreadable (the message names it).
    #[error(transparent)]
    File(#[from] crate::fsio::Error),
    /// A template does not compile.
    #[error("{}: {message}", path.display())]
    Compile {
        /// The template file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A generator names a template that does not exist.
    #[error("generator {generator:?}: no template named {name:?} (known: {known})")]
    Missing {
        /// The generator.
        generator: String,
        /// The template name.
        name: String,
        /// The templates there are.
        known: String,
    },
    /// Rendering failed (a missing variable in strict mode, ...).
    #[error("{}: {message}", path.display())]
    Render {
        /// The template file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The rendered text is not a spec.
    #[error("{}: rendered output is not a valid spec document: {message}", path.display())]
    Output {
        /// The template file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// What a contract-2 template's device part wrote for one CDI device
    /// is not one CDI device.
    #[error("{}: {message}", path.display())]
    DeviceOutput {
        /// The template file.
        path: PathBuf,
        /// Which CDI device, and what is wrong with it.
        message: String,
    },
}

/// The template registry.
pub struct Templates {
    registry: Handlebars<'static>,
    sources: BTreeMap<String, PathBuf>,
    /// The templates of contract 2: their device parts are registered
    /// apart ([`device_part_name`]).
    per_device: std::collections::BTreeSet<String>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("sources", &self.sources)
            .finish()
    }
}

/// Escapes text as the inside of a JSON string.
pub fn json_escape(s: &str) -> String {
    let quoted = serde_json::Value::String(s.to_string()).to_string();
    quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default()
        .to_string()
}

/// Why a template with unescaped output is refused.
pub const UNESCAPED: &str = "unescaped output ({{{value}}} or {{&value}}, in any spelling) is not \
     allowed: use {{json value}} or \"{{value}}\", which escape values as JSON";

/// Where an element of a parsed template starts, as handlebars numbers
/// them (from 1); unknown when the template has no mapping for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line.
    pub line: usize,
    /// Column.
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, col {}", self.line, self.column)
    }
}

/// Every place where `template` writes a value without escaping it, in
/// template order: the expressions handlebars parses as HTML (unescaped)
/// expressions, whatever the spelling (`{{{x}}}`, `{{~{x}~}}`,
/// `{{ {x} }}`, `{{&x}}`, `{{~& x}}`), at any depth: in the blocks and
/// `else` branches of helpers (`{{#each}}`, `{{#if}}`), inline partials
/// (`{{#*inline}}`) and partial blocks. The text of a raw block
/// (`{{{{raw}}}}...{{{{/raw}}}}`) is literal template text, so it is fine.
/// An element kind this version does not know counts as unescaped.
pub fn unescaped_outputs(template: &handlebars::Template) -> Vec<Position> {
    let mut found = Vec::new();
    walk(template, &mut found);
    found
}

/// Where the `i`th top-level element of `template` starts (0:0 when
/// handlebars kept no mapping for it).
fn position(template: &handlebars::Template, i: usize) -> Position {
    template
        .mapping
        .get(i)
        .map_or(Position { line: 0, column: 0 }, |m| Position {
            line: m.0,
            column: m.1,
        })
}

fn walk(template: &handlebars::Template, found: &mut Vec<Position>) {
    use handlebars::template::TemplateElement as E;
    for (i, element) in template.elements.iter().enumerate() {
        let at = position(template, i);
        match element {
            E::RawString(_) | E::Comment(_) => {}
            // Escaped (`{{x}}`, `{{helper x}}`): the escape function runs.
            E::Expression(h) => walk_params(&h.params, h.hash.values(), at, found),
            E::HelperBlock(h) => {
                walk_params(&h.params, h.hash.values(), at, found);
                for t in [&h.template, &h.inverse].into_iter().flatten() {
                    walk(t, found);
                }
            }
            E::DecoratorExpression(d) | E::PartialExpression(d) => {
                walk_params(&d.params, d.hash.values(), at, found);
            }
            E::DecoratorBlock(d) | E::PartialBlock(d) => {
                walk_params(&d.params, d.hash.values(), at, found);
                if let Some(t) = &d.template {
                    walk(t, found);
                }
            }
            // `{{{x}}}`, `{{&x}}` and every spelling of them.
            E::HtmlExpression(_) => found.push(at),
            // A kind of element added in a later handlebars: refused until
            // it is known to escape.
            _ => found.push(at),
        }
    }
}

/// Subexpressions (`{{json (lookup a b)}}`) are values handed to a helper,
/// never written themselves: handlebars parses each as an escaped
/// expression whose own parameters may hold more. Anything else there
/// (which the grammar does not produce today) counts as unescaped, at the
/// position of the element that holds it.
fn walk_params<'a>(
    params: &'a [handlebars::template::Parameter],
    hash: impl Iterator<Item = &'a handlebars::template::Parameter>,
    at: Position,
    found: &mut Vec<Position>,
) {
    use handlebars::template::{Parameter, TemplateElement as E};
    for p in params.iter().chain(hash) {
        if let Parameter::Subexpression(s) = p {
            match s.element.as_ref() {
                E::Expression(h) => walk_params(&h.params, h.hash.values(), at, found),
                _ => found.push(at),
            }
        }
    }
}

/// Renders a `template` name strategy for `device` (checked when its
/// definition was parsed: [`crate::generator::check_name_template`]) and
/// checks that the result is a valid CDI device name.
///
/// # Errors
/// Why the device gets no name from it (a missing value, an invalid name).
pub fn render_name(template: &str, device: &Device) -> Result<String, String> {
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    let name = hb
        .render_template(template, device)
        .map_err(|e| format!("template {template:?}: {}", e.reason()))?;
    cdi::name::validate_device_name(&name).map_err(|e| e.to_string())?;
    Ok(name)
}

/// `{{json value}}`: the value as JSON (strings quoted and escaped).
fn json_helper(
    h: &Helper,
    _: &Handlebars,
    _: &Context,
    _: &mut RenderContext,
    out: &mut dyn Output,
) -> HelperResult {
    let param = h
        .param(0)
        .ok_or(RenderErrorReason::ParamNotFoundForIndex("json", 0))?;
    if param.is_value_missing() {
        return Err(RenderErrorReason::MissingVariable(param.relative_path().cloned()).into());
    }
    let text = serde_json::to_string(param.value())
        .map_err(|e| RenderErrorReason::Other(e.to_string()))?;
    out.write(&text)?;
    Ok(())
}

impl Templates {
    /// The shipped templates, then those in `user_dir` (`<name>.json.hbs`),
    /// which replace shipped ones of the same name.
    ///
    /// # Errors
    /// [`Error`] naming the template file that cannot be read or compiled.
    pub fn load(user_dir: Option<&Path>) -> Result<Templates, Error> {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        registry.register_escape_fn(json_escape);
        registry.register_helper("json", Box::new(json_helper));
        let mut t = Templates {
            registry,
            sources: BTreeMap::new(),
            per_device: std::collections::BTreeSet::new(),
        };
        for (name, text) in BUILTIN {
            t.add(
                name,
                PathBuf::from(format!("builtin:templates/{name}{SUFFIX}")),
                text,
            )?;
        }
        if let Some(dir) = user_dir {
            let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
                path: dir.to_path_buf(),
                source,
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(SUFFIX))
                .collect();
            files.sort();
            for path in files {
                let Some(name) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(SUFFIX))
                    .map(str::to_string)
                else {
                    continue;
                };
                // Followed only to a regular file, read bounded.
                let text = crate::fsio::read_to_string(
                    &path,
                    MAX_TEMPLATE_BYTES,
                    crate::fsio::Links::Follow,
                )?;
                t.add(&name, path, &text)?;
            }
        }
        Ok(t)
    }

    fn add(&mut self, name: &str, path: PathBuf, text: &str) -> Result<(), Error> {
        let template =
            handlebars::Template::compile_with_name(text, name.to_string()).map_err(|e| {
                Error::Compile {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
        // Unescaped output would let a sysfs value write JSON structure.
        // What is registered is what was checked: the parsed template.
        if let Some(at) = unescaped_outputs(&template).first() {
            return Err(Error::Compile {
                path,
                message: format!("{at}: {UNESCAPED}"),
            });
        }
        let compile_error = |message: String| Error::Compile {
            path: path.clone(),
            message,
        };
        let contract = contract(&template).map_err(compile_error)?;
        // A template replacing another of its name replaces its parts.
        self.registry.unregister_template(&device_part_name(name));
        self.per_device.remove(name);
        if contract == 2 {
            let (spec, device) = split(template).map_err(compile_error)?;
            self.registry.register_template(name, spec);
            self.registry
                .register_template(&device_part_name(name), device);
            self.per_device.insert(name.to_string());
        } else {
            self.registry.register_template(name, template);
        }
        self.sources.insert(name.to_string(), path);
        Ok(())
    }

    /// The contract the template `name` is written to ([`CONTRACTS`]),
    /// `None` when there is no such template.
    pub fn contract(&self, name: &str) -> Option<u32> {
        self.sources
            .contains_key(name)
            .then(|| if self.per_device.contains(name) { 2 } else { 1 })
    }

    /// Names of the templates, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.sources.keys().map(String::as_str).collect()
    }

    /// Renders the spec for `generator` from its selected `devices` and
    /// parses it strictly. `cdiVersion` is left as the template wrote it.
    /// The context's warnings (devices left unnamed) are logged.
    ///
    /// # Errors
    /// [`Error`] naming the template.
    pub fn render(&self, generator: &Generator, devices: &[Device]) -> Result<Spec, Error> {
        let rendered = self.render_devices(generator, devices)?;
        for w in &rendered.warnings {
            tracing::warn!("generator {}: {w}", generator.name);
        }
        Ok(rendered.spec)
    }

    /// [`Templates::render`], with the warnings returned instead of logged
    /// and the devices the spec names: a caller trying devices one by one
    /// logs only what it keeps.
    ///
    /// # Errors
    /// [`Error`] naming the template.
    pub fn render_devices(
        &self,
        generator: &Generator,
        devices: &[Device],
    ) -> Result<Rendered, Error> {
        let Some(path) = self.sources.get(&generator.template) else {
            return Err(Error::Missing {
                generator: generator.name.clone(),
                name: generator.template.clone(),
                known: self.names().join(", "),
            });
        };
        let ctx = context(generator, devices);
        let spec = self.render_spec(&generator.template, path, &ctx)?;
        if spec.kind != generator.kind {
            return Err(Error::Output {
                path: path.clone(),
                message: format!(
                    "kind is {:?}, but generator {:?} has kind {:?} (use {{{{json kind}}}})",
                    spec.kind, generator.name, generator.kind
                ),
            });
        }
        let named = ctx
            .devices
            .iter()
            .flat_map(|e| e.members.iter().map(|m| m.id.clone()))
            .collect();
        let members = ctx
            .devices
            .iter()
            .map(|e| Named {
                name: e.name.clone(),
                ids: e.members.iter().map(|m| m.id.clone()).collect(),
                stability: e.stability,
            })
            .collect();
        Ok(Rendered {
            spec,
            warnings: ctx.warnings,
            named,
            members,
        })
    }
}

/// Which part of a template a rendered text is ([`Templates::texts`]).
#[derive(Debug, Clone, Copy)]
enum Part<'c> {
    /// Contract 1: the whole spec.
    Whole,
    /// Contract 2: the spec without its devices.
    Spec,
    /// Contract 2: one CDI device.
    Device(&'c CdiDevice<'c>),
}

impl Templates {
    /// Renders the template `name` from `ctx` and hands each text it
    /// writes to `each` as soon as it is written: contract 1's whole spec
    /// at once; contract 2's spec-level part (from a context without the
    /// devices), then each CDI device from its own context, into one
    /// reused buffer, so that one device's context and text are held at a
    /// time.
    ///
    /// # Errors
    /// [`Error::Render`] naming the file (and the CDI device), or what
    /// `each` returns.
    fn texts<'c>(
        &self,
        name: &str,
        path: &Path,
        ctx: &'c TemplateContext<'c>,
        mut each: impl FnMut(Part<'c>, &str) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let failed = |device: Option<&str>, e: handlebars::RenderError| Error::Render {
            path: path.to_path_buf(),
            message: match device {
                Some(d) => format!("device part, CDI device {d:?}: {e}"),
                None => e.to_string(),
            },
        };
        if !self.per_device.contains(name) {
            let text = self
                .registry
                .render(name, ctx)
                .map_err(|e| failed(None, e))?;
            return each(Part::Whole, &text);
        }
        let spec_ctx = SpecContext {
            kind: ctx.kind,
            generator: ctx.generator,
            resource_env: &ctx.resource_env,
            common_nodes: &ctx.common_nodes,
            common_mounts: &ctx.common_mounts,
            common_hooks: &ctx.common_hooks,
        };
        let text = self
            .registry
            .render(name, &spec_ctx)
            .map_err(|e| failed(None, e))?;
        each(Part::Spec, &text)?;
        let part = device_part_name(name);
        let mut buf: Vec<u8> = Vec::new();
        for device in &ctx.devices {
            let device_ctx = DeviceContext {
                kind: ctx.kind,
                generator: ctx.generator,
                resource_env: &ctx.resource_env,
                device,
            };
            buf.clear();
            self.registry
                .render_to_write(&part, &device_ctx, &mut buf)
                .map_err(|e| failed(Some(&device.name), e))?;
            // handlebars writes only `str`s.
            let text = String::from_utf8_lossy(&buf);
            each(Part::Device(device), &text)?;
        }
        Ok(())
    }

    /// The spec the template `name` renders from `ctx`, parsed strictly:
    /// contract 1's at once, contract 2's device by device as each is
    /// rendered (nothing kept of a device but the parsed device).
    ///
    /// # Errors
    /// [`Error`] naming the file (and the CDI device): a render error, a
    /// text that is not a spec (or not one CDI device), a contract-2
    /// spec-level part that writes devices.
    fn render_spec(&self, name: &str, path: &Path, ctx: &TemplateContext) -> Result<Spec, Error> {
        let mut spec: Option<Spec> = None;
        self.texts(name, path, ctx, |part, text| {
            match part {
                Part::Whole | Part::Spec => {
                    let parsed =
                        cdi::codec::parse(text.as_bytes(), cdi::Format::Json).map_err(|e| {
                            Error::Output {
                                path: path.to_path_buf(),
                                message: e.to_string(),
                            }
                        })?;
                    if matches!(part, Part::Spec) && !parsed.devices.is_empty() {
                        return Err(Error::Output {
                            path: path.to_path_buf(),
                            message: format!(
                                "its spec-level part writes devices: with contract 2 they come \
                                 from its device part ({{{{#*inline \"{DEVICE_PART}\"}}}}) alone"
                            ),
                        });
                    }
                    spec = Some(parsed);
                }
                Part::Device(device) => {
                    let parsed = cdi::codec::parse_device_json(text).map_err(|e| {
                        let why = match e {
                            cdi::codec::ParseError::Empty => "it is empty".to_string(),
                            e => e.to_string(),
                        };
                        Error::DeviceOutput {
                            path: path.to_path_buf(),
                            message: format!(
                                "device part, CDI device {:?}: rendered output is not one valid \
                                 CDI device: {why}",
                                device.name
                            ),
                        }
                    })?;
                    if let Some(s) = spec.as_mut() {
                        s.devices.push(parsed);
                    }
                }
            }
            Ok(())
        })?;
        Ok(spec.unwrap_or_default())
    }
}

/// What a contract-2 template's spec-level part sees: the spec-wide values
/// of [`TemplateContext`], without the devices.
#[derive(Serialize)]
struct SpecContext<'c> {
    kind: &'c str,
    generator: &'c str,
    resource_env: &'c str,
    common_nodes: &'c [DeviceNode],
    common_mounts: &'c [crate::model::MountSpec],
    common_hooks: &'c [crate::cdi::Hook],
}

/// What a contract-2 template's device part sees: one CDI device's fields
/// ([`CdiDevice`]: `name`, `members`, `nodes`, ...) beside `kind`,
/// `generator` and `resource_env`.
#[derive(Serialize)]
struct DeviceContext<'c, 'a> {
    kind: &'c str,
    generator: &'c str,
    resource_env: &'c str,
    #[serde(flatten)]
    device: &'c CdiDevice<'a>,
}

/// The contract `template` declares ([`DECLARATION`]): 1 when it declares
/// none.
///
/// # Errors
/// A declaration that is malformed, repeated, or names a contract this
/// version does not know (the message lists those it knows).
fn contract(template: &handlebars::Template) -> Result<u32, String> {
    use handlebars::template::TemplateElement as E;
    let known = CONTRACTS
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let mut declared: Option<u32> = None;
    for (i, element) in template.elements.iter().enumerate() {
        let E::Comment(text) = element else { continue };
        let at = position(template, i);
        // `{{!-- x --}}`, `{{! x }}`, `{{~!-- x --~}}`: the words alone.
        let words =
            text.trim_matches(|c: char| c == '~' || c == '!' || c == '-' || c.is_whitespace());
        // `cdigen-template: 2`, or a mistake in one; not `cdigen-templates`.
        let Some(rest) = words
            .strip_prefix(DECLARATION)
            .filter(|r| r.is_empty() || r.starts_with(':') || r.starts_with(char::is_whitespace))
        else {
            continue;
        };
        let rest = rest.trim_start();
        let version = rest
            .strip_prefix(':')
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                format!(
                    "{at}: a contract declaration reads {{{{!-- {DECLARATION}: N --}}}} \
                     (N one of {known})"
                )
            })?;
        if declared.is_some() {
            return Err(format!("{at}: a second contract declaration"));
        }
        let n = version
            .parse::<u32>()
            .ok()
            .filter(|n| CONTRACTS.contains(n))
            .ok_or_else(|| {
                format!(
                    "{at}: template contract {version} is not known to this cdigen (it knows \
                     {known}): write the template to one of those"
                )
            })?;
        declared = Some(n);
    }
    Ok(declared.unwrap_or(1))
}

/// Whether `element` is the inline partial `{{#*inline "<name>"}}`.
fn inline_name(element: &handlebars::template::TemplateElement) -> Option<&str> {
    use handlebars::template::{Parameter, TemplateElement as E};
    let E::DecoratorBlock(d) = element else {
        return None;
    };
    match (&d.name, d.params.first()) {
        (Parameter::Name(n), Some(Parameter::Literal(serde_json::Value::String(p))))
            if n == "inline" =>
        {
            Some(p)
        }
        _ => None,
    }
}

/// Splits a contract-2 template into its spec-level part (every top-level
/// element but the device part) and its device part, which gets the
/// template's other top-level inline partials, so that it can use them.
///
/// # Errors
/// No top-level device part, or more than one.
fn split(
    template: handlebars::Template,
) -> Result<(handlebars::Template, handlebars::Template), String> {
    use handlebars::template::TemplateElement as E;
    let wanted = format!(
        "contract 2 needs one device part, a top-level {{{{#*inline \"{DEVICE_PART}\"}}}}...{{{{/inline}}}}"
    );
    let parts = template
        .elements
        .iter()
        .filter(|e| inline_name(e) == Some(DEVICE_PART))
        .count();
    if parts != 1 {
        return Err(if parts == 0 {
            format!("{wanted}; it has none")
        } else {
            format!("{wanted}; it has {parts}")
        });
    }
    let mut spec = template.clone();
    spec.elements.clear();
    spec.mapping.clear();
    let mut inlines = Vec::new();
    let mut device = None;
    for (i, element) in template.elements.into_iter().enumerate() {
        let mapping = template.mapping.get(i).cloned();
        match inline_name(&element) {
            Some(DEVICE_PART) => {
                if let E::DecoratorBlock(d) = element {
                    device = Some(d.template.unwrap_or_default());
                }
                continue;
            }
            Some(_) => inlines.push((element.clone(), mapping.clone())),
            None => {}
        }
        spec.elements.push(element);
        if let Some(m) = mapping {
            spec.mapping.push(m);
        }
    }
    let mut device = device.ok_or(wanted)?;
    if !inlines.is_empty() {
        let (mut elements, mut mapping): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
        for (e, m) in inlines {
            elements.push(e);
            mapping.extend(m);
        }
        elements.append(&mut device.elements);
        mapping.append(&mut device.mapping);
        device.elements = elements;
        device.mapping = mapping;
    }
    device.name = template.name.map(|n| device_part_name(&n));
    Ok((spec, device))
}

/// A rendered spec ([`Templates::render_devices`]).
#[derive(Debug)]
pub struct Rendered {
    /// The spec, parsed back.
    pub spec: Spec,
    /// Devices left unnamed by a strategy, and names given to no device.
    pub warnings: Vec<String>,
    /// Identities of the devices in at least one CDI device of the
    /// context (`all` included).
    pub named: std::collections::BTreeSet<String>,
    /// Every CDI device of the context with its members, in spec order.
    pub members: Vec<Named>,
}

/// What a template sees.
#[derive(Debug, Serialize)]
pub struct TemplateContext<'a> {
    /// `vendor/class`.
    pub kind: &'a str,
    /// The generator's name.
    pub generator: &'a str,
    /// Nodes every device of this spec needs (NVIDIA's control nodes):
    /// templates may put them in the spec-level edits.
    pub common_nodes: Vec<DeviceNode>,
    /// Mounts every device of this spec needs (NVIDIA driver files), in
    /// container-path order.
    pub common_mounts: Vec<crate::model::MountSpec>,
    /// Hooks every device of this spec needs (`cdigen hook` steps for
    /// NVIDIA driver files), in the order they run.
    pub common_hooks: Vec<crate::cdi::Hook>,
    /// The kind as an environment variable suffix: `nvidia.com/mlx_rdma`
    /// → `NVIDIA_COM_MLX_RDMA` (the SR-IOV device plugin's convention).
    pub resource_env: String,
    /// The CDI devices to emit.
    pub devices: Vec<CdiDevice<'a>>,
    /// Devices left unnamed by a strategy, and names given to no device
    /// because several would share them: logged by [`Templates::render`].
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// One CDI device to emit.
#[derive(Debug, Serialize)]
pub struct CdiDevice<'a> {
    /// Its CDI name.
    pub name: String,
    /// The CDI name as an environment variable suffix ([`env_suffix`]:
    /// `0000:3b:00.2` → `0000_3B_00_2`, `all` → `ALL`). CDI runtimes merge
    /// the `env` of every injected device by variable name, the last value
    /// winning, so a variable each device sets is named per device with it
    /// (`PCIDEVICE_<KIND>_<NAME>`); a plan whose devices set one variable to
    /// different values is refused.
    pub name_env: String,
    /// The model devices it stands for (one, or all for `all`). Templates
    /// see each without its `driver_files`: the driver's files are in the
    /// spec-wide `common_mounts` and `common_hooks`, once.
    #[serde(serialize_with = "members_without_driver_files")]
    pub members: Vec<&'a Device>,
    /// CDI device nodes, as the generator's settings want them.
    pub nodes: Vec<DeviceNode>,
    /// `nodes` without the common ones (see `common_nodes`).
    pub own_nodes: Vec<DeviceNode>,
    /// `/dev` links to bring into the container (empty with `links: none`).
    pub links: Vec<Link>,
    /// The members' identities, comma-joined (`0000:3b:00.2`, `vdpa0`).
    pub ids: String,
    /// The members' PCI addresses, comma-joined (empty when none has one).
    pub pci_addresses: String,
    /// The members' netdevs (`net.netdevs`), each once, comma-joined
    /// (empty when none has one).
    pub netdevs: String,
    /// IOMMU groups of the members that hold more than one device: the
    /// group node gives access to all of them.
    pub shared_groups: Vec<SharedGroup>,
    /// How stable the name is ([`NameStrategy`] rank: lower is steadier).
    #[serde(skip)]
    pub stability: u8,
}

/// A CDI device of a rendered spec and the devices it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The CDI device name (`0000:3b:00.2`, `all`).
    pub name: String,
    /// Identities of its members.
    pub ids: Vec<String>,
    /// How stable the name is across reboots and re-plugs: lower is
    /// steadier ([`stability`]).
    pub stability: u8,
}

/// How stable the names of `strategy` are across reboots and re-plugs,
/// lower being steadier: UUIDs and PCI addresses, then `/dev` links and
/// attributes (serial numbers), then templates, kernel names, indexes
/// (which shift when a device goes), groups and `all`.
pub fn stability(strategy: &NameStrategy) -> u8 {
    match strategy {
        NameStrategy::Uuid => 0,
        NameStrategy::Pci | NameStrategy::PciUid => 1,
        NameStrategy::Link(_) => 2,
        NameStrategy::Attr(_) | NameStrategy::Usb => 3,
        NameStrategy::Template(_) => 4,
        NameStrategy::Node => 5,
        NameStrategy::Index => 6,
        NameStrategy::Group => 7,
        NameStrategy::All => 8,
    }
}

/// The name the `pci` strategy gives `d`: its identity (a PCI address,
/// `platform:gpu`, `vdpa:0000:3b:00.2`), but for a generic device the
/// address of the nearest PCI function above it (a Coral Edge TPU's
/// `apex_0` is `0000:03:00.0`), as its DRA device's `pciBusID`; a generic
/// device outside PCI keeps its identity (`tty:ttyS0`).
pub fn pci_name(d: &Device) -> String {
    if d.generic.is_some()
        && d.pci.is_none()
        && let Some(address) = d.pci_function_path().and_then(|f| f.rsplit('/').next())
    {
        return address.to_string();
    }
    d.id.clone()
}

/// Intel's device UID (`DeviceUIDFromPCIinfo`): the PCI address with `:`
/// and `.` as `-`, then the device ID (`0000-03-00-0-0x56c0`).
pub fn pci_uid(p: &crate::model::PciInfo) -> String {
    format!("{}-{}", p.address.replace([':', '.'], "-"), p.device_id)
}

/// An IOMMU group with several devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedGroup {
    /// Group number.
    pub group: String,
    /// Its devices, comma-joined.
    pub devices: String,
}

/// A kind or a CDI device name as an environment variable suffix: ASCII
/// letters upper-cased, digits kept, anything else `_`
/// (`nvidia.com/mlx_rdma` → `NVIDIA_COM_MLX_RDMA`, `0000:3b:00.2` →
/// `0000_3B_00_2`). Not one-to-one: `vdpa-1` and `vdpa_1` give one suffix.
pub fn env_suffix(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Orders device identities, as `index` names number them: PCI addresses
/// by value (as [`cdi::codec::natural_cmp`] compares them), each followed by its parts (`<address>/<part>`:
/// AMD compute partitions `0000:05:00.0/xcp1`, MIG devices) in natural
/// order of the part (`xcp2` before `xcp10`), before other ids, which go in
/// natural order (`platform:gpu2` before `platform:gpu10`).
pub fn identity_cmp(a: &str, b: &str) -> Ordering {
    let split = |s: &'_ str| -> Option<(PciAddress, Option<String>)> {
        let (address, part) = match s.split_once('/') {
            Some((address, part)) => (address, Some(part.to_string())),
            None => (s, None),
        };
        Some((address.parse().ok()?, part))
    };
    match (split(a), split(b)) {
        (Some((x, xp)), Some((y, yp))) => x.cmp(&y).then_with(|| match (xp, yp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(xp), Some(yp)) => cdi::codec::natural_cmp(&xp, &yp),
        }),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => cdi::codec::natural_cmp(a, b),
    }
    .then_with(|| a.cmp(b))
}

/// Serializes `members` as the template context has them: every device's
/// own facts, without the driver's files it shares with the others (128
/// GPUs of one driver would repeat its files 256 times: once per device,
/// once in `all`).
fn members_without_driver_files<S: serde::Serializer>(
    members: &[&Device],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq as _;
    let mut seq = s.serialize_seq(Some(members.len()))?;
    for d in members {
        if d.driver_files.is_some() {
            let own = Device {
                driver_files: None,
                ..(*d).clone()
            };
            seq.serialize_element(&own)?;
        } else {
            seq.serialize_element(d)?;
        }
    }
    seq.end()
}

/// Builds the template context: one entry per selected device and naming
/// strategy, plus `all`.
pub fn context<'a>(generator: &'a Generator, devices: &'a [Device]) -> TemplateContext<'a> {
    let mut sorted: Vec<&Device> = devices.iter().collect();
    sorted.sort_by(|a, b| identity_cmp(&a.id, &b.id));
    let to_cdi = |n: &crate::model::Node| {
        let mut node = DeviceNode {
            path: n.path.clone(),
            ..Default::default()
        };
        if generator.device_nodes.numbers {
            node.node_type = n.node_type.clone();
            node.major = i64::from(n.major);
            node.minor = i64::from(n.minor);
        }
        if generator.device_nodes.owner
            && let Some(h) = n.host
        {
            node.file_mode = Some(h.mode);
            node.uid = Some(h.uid);
            node.gid = Some(h.gid);
        }
        node
    };
    let is_common = |n: &crate::model::Node| COMMON_ROLES.contains(&n.role.as_str());
    let mut common_nodes: Vec<DeviceNode> = Vec::new();
    for n in sorted
        .iter()
        .flat_map(|d| d.nodes.iter())
        .filter(|n| is_common(n))
    {
        if !common_nodes.iter().any(|x| x.path == n.path) {
            common_nodes.push(to_cdi(n));
        }
    }
    // Every device of a driver shares its files: the first device's say
    // what the spec mounts.
    let driver_edits = sorted
        .iter()
        .find_map(|d| d.driver_files.as_deref())
        .map(|drv| driver::edits(&generator.driver.clone().unwrap_or_default(), drv))
        .unwrap_or_default();
    let entry = |name: String, members: Vec<&'a Device>| {
        let mut own_nodes: Vec<DeviceNode> = Vec::new();
        for n in members
            .iter()
            .flat_map(|d| d.nodes.iter())
            .filter(|n| !is_common(n))
        {
            if !own_nodes.iter().any(|x| x.path == n.path) {
                own_nodes.push(to_cdi(n));
            }
        }
        let mut nodes: Vec<DeviceNode> = Vec::new();
        let mut links: Vec<Link> = Vec::new();
        for d in &members {
            for n in &d.nodes {
                if !nodes.iter().any(|x| x.path == n.path) {
                    nodes.push(to_cdi(n));
                }
            }
            if generator.links == LinkMode::Mount {
                for l in &d.links {
                    if !links.iter().any(|x| x.path == l.path) {
                        links.push(l.clone());
                    }
                }
            }
        }
        let ids = members
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let pci_addresses = members
            .iter()
            .filter_map(|d| {
                d.pci
                    .as_ref()
                    .map(|p| p.address.as_str())
                    .or_else(|| d.vdpa.as_ref().and_then(|v| v.pci_address.as_deref()))
            })
            .collect::<Vec<_>>()
            .join(",");
        let mut netdevs: Vec<&str> = Vec::new();
        for n in members
            .iter()
            .filter_map(|d| d.net.as_ref())
            .flat_map(|n| n.netdevs.iter())
        {
            if !netdevs.contains(&n.as_str()) {
                netdevs.push(n);
            }
        }
        let netdevs = netdevs.join(",");
        let mut shared_groups: Vec<SharedGroup> = Vec::new();
        for v in members.iter().filter_map(|d| d.vfio.as_ref()) {
            if v.group_devices.len() > 1 && !shared_groups.iter().any(|g| g.group == v.group) {
                shared_groups.push(SharedGroup {
                    group: v.group.clone(),
                    devices: v.group_devices.join(","),
                });
            }
        }
        CdiDevice {
            name_env: env_suffix(&name),
            name,
            members,
            nodes,
            own_nodes,
            links,
            ids,
            pci_addresses,
            netdevs,
            shared_groups,
            stability: stability(&NameStrategy::All),
        }
    };
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for strategy in &generator.names {
        let before = out.len();
        match strategy {
            NameStrategy::All => {}
            NameStrategy::Group => {
                let mut groups: Vec<(u64, String, Vec<&Device>)> = Vec::new();
                for d in &sorted {
                    let Some(v) = &d.vfio else {
                        warnings.push(format!(
                            "{}: not bound to a VFIO driver (no IOMMU group), so no name from \
                             `{strategy}`",
                            d.id
                        ));
                        continue;
                    };
                    match groups.iter_mut().find(|(_, g, _)| *g == v.group) {
                        Some((_, _, m)) => m.push(*d),
                        None => groups.push((
                            v.group.parse().unwrap_or(u64::MAX),
                            v.group.clone(),
                            vec![*d],
                        )),
                    }
                }
                groups.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
                for (_, g, members) in groups {
                    out.push(entry(g, members));
                }
            }
            NameStrategy::Index => {
                // NVIDIA: GPUs by PCI order, MIG devices `<gpu>:<mig>`.
                let gpus: Vec<&&Device> = sorted
                    .iter()
                    .filter(|d| d.nvidia.as_ref().is_none_or(|n| n.mig.is_none()))
                    .collect();
                for (i, d) in gpus.iter().enumerate() {
                    out.push(entry(i.to_string(), vec![**d]));
                }
                for (i, gpu) in gpus.iter().enumerate() {
                    let migs = sorted.iter().filter(|d| {
                        d.nvidia
                            .as_ref()
                            .and_then(|n| n.mig.as_ref())
                            .is_some_and(|m| m.parent == gpu.id)
                    });
                    for (j, m) in migs.enumerate() {
                        out.push(entry(format!("{i}:{j}"), vec![*m]));
                    }
                }
            }
            NameStrategy::Uuid => {
                for d in &sorted {
                    match d.any_uuid() {
                        Some(u) => out.push(entry(u.to_string(), vec![*d])),
                        // Expected without NVML, which alone knows MIG
                        // UUIDs: said at -v, not on every run.
                        None if d.nvidia.is_some() => tracing::info!(
                            "{}: a MIG device's UUID comes from NVML only, so no name from \
                             `{strategy}`",
                            d.id
                        ),
                        None => warnings.push(format!(
                            "{}: no UUID known (NVIDIA GPUs and MIG devices have one, and AMD \
                             GPUs whose KFD topology gives a unique_id), so no name from \
                             `{strategy}`",
                            d.id
                        )),
                    }
                }
            }
            NameStrategy::Pci => {
                for d in &sorted {
                    out.push(entry(pci_name(d), vec![*d]));
                }
            }
            NameStrategy::PciUid => {
                for d in &sorted {
                    match &d.pci {
                        Some(p) => out.push(entry(pci_uid(p), vec![*d])),
                        None => warnings.push(format!(
                            "{}: not a PCI device, so no name from `{strategy}`",
                            d.id
                        )),
                    }
                }
            }
            NameStrategy::Node => {
                for d in &sorted {
                    let name = match d.generic.as_ref().filter(|g| g.group.is_some()) {
                        Some(g) => g.name.clone(),
                        None => d
                            .nodes
                            .iter()
                            .find(|n| n.role != "kfd")
                            .map_or_else(|| d.id.clone(), |n| n.name.clone()),
                    };
                    out.push(entry(name, vec![*d]));
                }
            }
            NameStrategy::Usb => {
                for d in &sorted {
                    match usb_name(d, &sorted) {
                        Ok(name) => out.push(entry(name, vec![*d])),
                        Err(why) => {
                            warnings.push(format!("{}: {why}, so no name from `{strategy}`", d.id))
                        }
                    }
                }
            }
            NameStrategy::Attr(_) | NameStrategy::Link(_) | NameStrategy::Template(_) => {
                for d in &sorted {
                    match strategy_name(strategy, d) {
                        Ok(name) => out.push(entry(name, vec![*d])),
                        Err(why) => {
                            warnings.push(format!("{}: {why}, so no name from `{strategy}`", d.id))
                        }
                    }
                }
            }
        }
        // Every strategy's names are checked, not only those made of
        // values: an identity, a kernel name, a group or a UUID is what
        // the host says, and one odd name must not sink the whole spec.
        let fresh = out.split_off(before);
        for mut e in fresh {
            e.stability = stability(strategy);
            match cdi::name::validate_device_name(&e.name) {
                Ok(()) => out.push(e),
                Err(why) => warnings.push(format!(
                    "{}: {why}, so no name from `{strategy}`",
                    e.members
                        .iter()
                        .map(|m| m.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            }
        }
    }
    // Two strategies giving one device the same name (`node` and a
    // template that yields the kernel name) make one CDI device, not a
    // collision.
    let mut seen: std::collections::BTreeSet<(String, Vec<String>)> =
        std::collections::BTreeSet::new();
    out.retain(|e| {
        seen.insert((
            e.name.clone(),
            e.members.iter().map(|m| m.id.clone()).collect(),
        ))
    });
    // Never two CDI devices with one name: a name several devices would
    // get (two adapters with one serial number) is given to none of them.
    let with_all = generator.names.contains(&NameStrategy::All) && !sorted.is_empty();
    // name -> the entries that have it (an entry may stand for several
    // devices: a VFIO group)
    let mut by_name: BTreeMap<&str, Vec<&CdiDevice>> = BTreeMap::new();
    for e in &out {
        by_name.entry(e.name.as_str()).or_default().push(e);
    }
    let shared: Vec<String> = by_name
        .iter()
        .filter(|(name, entries)| entries.len() > 1 || (with_all && **name == "all"))
        .map(|(name, entries)| {
            // A USB node says which adapter it is and where it is plugged:
            // two adapters with one serial number are told apart.
            let ids: Vec<String> = entries
                .iter()
                .flat_map(|e| e.members.iter())
                .map(|m| match m.generic.as_ref().and_then(|g| g.usb.as_ref()) {
                    Some(u) => format!("{} (USB device {} at {})", m.id, u.device, u.path),
                    None => m.id.clone(),
                })
                .collect();
            warnings.push(if entries.len() > 1 {
                format!(
                    "{name:?} would name {}; naming none of them so",
                    ids.join(" and ")
                )
            } else {
                format!(
                    "{name:?} would name {} and the `all` device; naming only `all` so",
                    ids.join(" and ")
                )
            });
            (*name).to_string()
        })
        .collect();
    out.retain(|e| !shared.contains(&e.name));
    if with_all {
        out.push(entry("all".into(), sorted.clone()));
    }
    TemplateContext {
        kind: &generator.kind,
        generator: &generator.name,
        resource_env: env_suffix(&generator.kind),
        common_nodes,
        common_mounts: driver_edits.mounts,
        common_hooks: driver_edits.hooks,
        devices: out,
        warnings,
    }
}

/// The name the `usb` strategy gives `d` among the generator's `devices`
/// ([`NameStrategy::Usb`]): its USB device's serial number (else its
/// port path), then `-if<NN>` when that USB device has several of the
/// devices, and `-port<N>` when its interface has several.
fn usb_name(d: &Device, devices: &[&Device]) -> Result<String, String> {
    let usb = |d: &Device| d.generic.as_ref().and_then(|g| g.usb.clone());
    let u = usb(d).ok_or("not below a USB device")?;
    let same_device: Vec<crate::model::UsbPort> = devices
        .iter()
        .filter_map(|o| usb(o))
        .filter(|o| o.device == u.device)
        .collect();
    let mut name = u.serial.clone().unwrap_or_else(|| u.path.clone());
    if same_device.len() > 1 {
        let i = u.interface.as_deref().ok_or_else(|| {
            format!(
                "USB device {} has {} ports and this one has no interface number",
                u.device,
                same_device.len()
            )
        })?;
        name.push_str(&format!("-if{i}"));
        if same_device
            .iter()
            .filter(|o| o.interface == u.interface)
            .count()
            > 1
        {
            let p = u.port.ok_or_else(|| {
                format!("interface {i} of USB device {} has several ports and this one has no port number", u.device)
            })?;
            name.push_str(&format!("-port{p}"));
        }
    }
    cdi::name::validate_device_name(&name).map_err(|e| e.to_string())?;
    Ok(name)
}

/// The name an `attr`, `link` or `template` strategy gives `d`.
fn strategy_name(strategy: &NameStrategy, d: &Device) -> Result<String, String> {
    let name = match strategy {
        NameStrategy::Attr(a) => d
            .attrs
            .get(a)
            .cloned()
            .ok_or_else(|| format!("no attribute {a}"))?,
        NameStrategy::Link(dir) => {
            let base = Path::new("/dev").join(dir);
            let mut names: Vec<&str> = d
                .links
                .iter()
                .filter(|l| Path::new(&l.path).parent() == Some(base.as_path()))
                .filter_map(|l| Path::new(&l.path).file_name()?.to_str())
                .collect();
            names.sort_unstable();
            names
                .first()
                .map(|n| (*n).to_string())
                .ok_or_else(|| format!("no link in {}", base.display()))?
        }
        NameStrategy::Template(t) => return render_name(t, d),
        _ => return Err(format!("{strategy} is not a per-device name")),
    };
    cdi::name::validate_device_name(&name).map_err(|e| e.to_string())?;
    Ok(name)
}

pub mod driver;

#[cfg(test)]
mod tests;
