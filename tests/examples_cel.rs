//! The Kubernetes examples select what the documentation (README.md and
//! docs/) says they select.
//!
//! Every DeviceClass, ResourceClaim and ResourceClaimTemplate under
//! `deploy/` is written for a shipped fixture machine, declared in
//! [`EXAMPLES`] (and in a comment next to the example; README.md names it
//! too). Its CEL selectors are evaluated as the scheduler evaluates them
//! (`k8s.io/dynamic-resource-allocation/cel`, `structured`) on that
//! fixture's golden ResourceSlices (`fixtures/*/expected/dra/`, checked by
//! `tests/dra_slices.rs`), and the devices they select must be exactly the
//! expected ones, at least as many as the claim asks for, with a group
//! that satisfies its `matchAttribute` constraints. Every class must also
//! evaluate without error on every fixture: a CEL runtime error (such as a
//! missing attribute) fails the whole allocation on that node, as the
//! scheduler does. The DRA objects in README.md (its YAML blocks and
//! here-documents) must be those of `deploy/`, except the kind recipe's,
//! which are for a kind node's /dev/fuse: they are evaluated on the slices
//! `--print-slices` gives for such a node, made here. The README's device
//! plugin example must match the example machine's CDI spec.
//!
//! The CEL environment mirrors Kubernetes': one variable `device` with the
//! fields `driver`, `attributes`, `capacity` and `allowMultipleAllocations`;
//! `attributes` and `capacity` map a domain to a map of names, an
//! unqualified name being under the driver's domain; a domain the device
//! has nothing under is an empty map, a missing name is an error
//! (`no such key`). The interpreter is the `cel` crate; what it does not
//! have (type checking) is done here for what the selectors can get wrong:
//! undeclared variables and unknown fields of `device`. Quantities
//! (capacity), semantic versions and Kubernetes' CEL libraries (`cel.bind`,
//! `quantity()`, `semver()`) are not emulated: a selector that uses one
//! fails here with an error instead of selecting silently.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/golden.rs"]
mod golden;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::traits::{Container, Indexer};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceClaim, DeviceClass, DeviceSelector, ResourceClaim,
    ResourceClaimTemplate, ResourceSlice,
};

/// The DRA driver name the examples and the fixtures' slices use.
const DRIVER: &str = "dra.cdigen.io";

/// One example: a DeviceClass, or a ResourceClaim(Template) (its only
/// request), in a file of `deploy/`, the fixture it is written for (its
/// golden slices file under `fixtures/<fixture>/expected/dra/`), and the
/// devices it selects there.
struct Example {
    file: &'static str,
    kind: &'static str,
    name: &'static str,
    fixture: &'static str,
    slices: &'static str,
    selects: &'static [&'static str],
}

const NVIDIA_GPUS_NUMA0: &[&str] = &[
    "nvidia-gpu-28d6d6dc-8439-44c9-87b7-adf3a4e132a0",
    "nvidia-gpu-4ff91c78-7bf9-4efd-ae71-9acc5b592350",
    "nvidia-gpu-92db70b1-7aac-4fef-86ef-0ae807e1ecac",
    "nvidia-gpu-bd55cda7-79ea-41fd-a0ae-840ebc3ea676",
];

const NVIDIA_GPUS: &[&str] = &[
    "nvidia-gpu-16044fad-82e2-4a2c-9435-9141b3472e3f",
    "nvidia-gpu-28d6d6dc-8439-44c9-87b7-adf3a4e132a0",
    "nvidia-gpu-4ff91c78-7bf9-4efd-ae71-9acc5b592350",
    "nvidia-gpu-50a60ef6-8938-4be8-bb06-a3048c2e656e",
    "nvidia-gpu-92db70b1-7aac-4fef-86ef-0ae807e1ecac",
    "nvidia-gpu-bd55cda7-79ea-41fd-a0ae-840ebc3ea676",
    "nvidia-gpu-bdafccb3-3d7e-4795-ba25-947abde0a8c7",
    "nvidia-gpu-ce6345b9-b8fb-41c0-8208-8a82efa354d4",
];

/// The VFs of the example machine's PF ens1f0np0 (all on NUMA node 0).
const EXAMPLE_VFS: &[&str] = &[
    "sriov-0000-3b-00-2",
    "sriov-0000-3b-00-3",
    "sriov-0000-3b-00-4",
    "sriov-0000-3b-00-5",
];

const SERIAL_ADAPTERS: &[&str] = &[
    "usb-serial-usb-1a86-usb-serial-if00-port0",
    "usb-serial-usb-arduino-www-arduino-cc-0043-857343232-bf56a9b0c5",
    "usb-serial-usb-ftdi-ft232r-usb-uart-a10k5pqr-if00-port0",
    "usb-serial-usb-ftdi-quad-rs232-hs-ft4qa7b2-if00-port0",
    "usb-serial-usb-ftdi-quad-rs232-hs-ft4qa7b2-if01-port0",
    "usb-serial-usb-ftdi-quad-rs232-hs-ft4qa7b2-if02-port0",
    "usb-serial-usb-ftdi-quad-rs232-hs-ft4qa7b2-if03-port0",
    "usb-serial-usb-prolific-technology-inc-usb-serial-co-3023d9cf49",
    "usb-serial-usb-quectel-ec25-eux-0123456789abcdef-if00-port0",
    "usb-serial-usb-quectel-ec25-eux-0123456789abcdef-if01-port0",
    "usb-serial-usb-quectel-ec25-eux-0123456789abcdef-if02-port0",
    "usb-serial-usb-quectel-ec25-eux-0123456789abcdef-if03-port0",
];

const EXAMPLES: &[Example] = &[
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclasses.yaml",
        kind: "DeviceClass",
        name: "gpu.cdigen.io",
        fixture: "dgx-8gpu",
        slices: "resourceslices.yaml",
        // Not the BMC's display (drm-0000-03-00-0, class gpu too).
        selects: NVIDIA_GPUS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclasses.yaml",
        kind: "DeviceClass",
        name: "gpu-numa0.cdigen.io",
        fixture: "dgx-8gpu",
        slices: "resourceslices.yaml",
        selects: NVIDIA_GPUS_NUMA0,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclasses.yaml",
        kind: "DeviceClass",
        name: "vf-ens1f0np0.cdigen.io",
        fixture: "example",
        slices: "resourceslices.yaml",
        selects: EXAMPLE_VFS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclasses.yaml",
        kind: "DeviceClass",
        name: "vf-passthrough.cdigen.io",
        fixture: "example",
        slices: "resourceslices.yaml",
        selects: EXAMPLE_VFS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclasses.yaml",
        kind: "DeviceClass",
        name: "serial.cdigen.io",
        fixture: "serial-host",
        slices: "resourceslices-usb-serial.yaml",
        selects: SERIAL_ADAPTERS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/deviceclass-extended-resource.yaml",
        kind: "DeviceClass",
        name: "vf.cdigen.io",
        fixture: "example",
        slices: "resourceslices.yaml",
        selects: EXAMPLE_VFS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/gpu.yaml",
        kind: "ResourceClaimTemplate",
        name: "one-gpu",
        fixture: "dgx-8gpu",
        slices: "resourceslices.yaml",
        selects: NVIDIA_GPUS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/two-vfs-one-numa.yaml",
        kind: "ResourceClaimTemplate",
        name: "two-vfs-one-numa",
        fixture: "example",
        slices: "resourceslices.yaml",
        selects: EXAMPLE_VFS,
    },
    Example {
        file: "deploy/kubernetes/examples/dra/serial-adapter.yaml",
        kind: "ResourceClaimTemplate",
        name: "serial-a10k5pqr",
        fixture: "serial-host",
        slices: "resourceslices-usb-serial.yaml",
        selects: &["usb-serial-usb-ftdi-ft232r-usb-uart-a10k5pqr-if00-port0"],
    },
];

const DRA_KINDS: &[&str] = &["DeviceClass", "ResourceClaim", "ResourceClaimTemplate"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------- CEL

/// A value the test does not emulate (a capacity's quantity, a semantic
/// version): any operation on it is an error, so a selector using one
/// cannot pass here by accident.
#[derive(Clone, Debug)]
struct Unemulated(&'static Type);

static QUANTITY: Type = Type::new_unspecified_type("kubernetes.Quantity");
static SEMVER: Type = Type::new_unspecified_type("kubernetes.Semver");

impl Val for Unemulated {
    fn get_type(&self) -> &Type {
        self.0
    }
    fn cel_type() -> &'static Type {
        &QUANTITY
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

/// `device.attributes` or `device.capacity`: domain → (name → value); a
/// domain the device has nothing under reads as an empty map (Kubernetes'
/// `newStringInterfaceMapWithDefault`), while `in` sees only the domains
/// it has.
#[derive(Clone, Debug, Default)]
struct Domains {
    domains: CelMap<'static>,
    empty: CelMap<'static>,
}

impl Indexer for Domains {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.domains.get(idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&self.empty)),
            other => other,
        }
    }
    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Container for Domains {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        self.domains.contains(value)
    }
}

impl Val for Domains {
    fn get_type(&self) -> &Type {
        self.domains.get_type()
    }
    fn cel_type() -> &'static Type {
        CelMap::cel_type()
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

/// Kubernetes' parseQualifiedName: `domain/id`, or the driver's domain.
fn split_qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// An attribute's one value (Kubernetes' getAttributeValue).
fn attribute_value(name: &str, a: &DeviceAttribute) -> Result<Box<dyn Val>, String> {
    Ok(match a {
        DeviceAttribute { int: Some(i), .. } => Box::new(CelInt::from(*i)),
        DeviceAttribute { bool: Some(b), .. } => Box::new(CelBool::from(*b)),
        DeviceAttribute {
            string: Some(s), ..
        } => Box::new(CelString::from(s.clone())),
        DeviceAttribute {
            version: Some(_), ..
        } => Box::new(Unemulated(&SEMVER)),
        _ => return Err(format!("attribute {name}: unsupported attribute value")),
    })
}

fn domains(entries: Vec<(&str, &str, Box<dyn Val>)>) -> Domains {
    let mut by_domain: BTreeMap<&str, HashMap<CelMapKey<'static>, Box<dyn Val>>> = BTreeMap::new();
    for (domain, id, value) in entries {
        by_domain
            .entry(domain)
            .or_default()
            .insert(CelMapKey::from(id.to_owned()), value);
    }
    let outer: HashMap<CelMapKey<'static>, Box<dyn Val>> = by_domain
        .into_iter()
        .map(|(d, m)| {
            (
                CelMapKey::from(d.to_owned()),
                Box::new(CelMap::from(m)) as Box<dyn Val>,
            )
        })
        .collect();
    Domains {
        domains: CelMap::from(outer),
        empty: CelMap::default(),
    }
}

/// The `device` variable for a device of `driver` (Kubernetes'
/// DeviceMatches, with the DRAConsumableCapacity field).
fn device_value(driver: &str, device: &Device) -> Result<Box<dyn Val>, String> {
    let mut attributes = Vec::new();
    for (name, a) in device.attributes.iter().flatten() {
        let (domain, id) = split_qualified(name, driver);
        attributes.push((domain, id, attribute_value(name, a)?));
    }
    let capacity = device
        .capacity
        .iter()
        .flatten()
        .map(|(name, _)| {
            let (domain, id) = split_qualified(name, driver);
            (domain, id, Box::new(Unemulated(&QUANTITY)) as Box<dyn Val>)
        })
        .collect();
    let fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = [
        (
            "driver",
            Box::new(CelString::from(driver.to_owned())) as Box<dyn Val>,
        ),
        (
            "allowMultipleAllocations",
            Box::new(CelBool::from(
                device.allow_multiple_allocations.unwrap_or(false),
            )),
        ),
        ("attributes", Box::new(domains(attributes))),
        ("capacity", Box::new(domains(capacity))),
    ]
    .into_iter()
    .map(|(k, v)| (CelMapKey::from(k.to_owned()), v))
    .collect();
    Ok(Box::new(CelMap::from(fields)))
}

/// The fields of Kubernetes' `kubernetes.DRADevice` type.
const DEVICE_FIELDS: &[&str] = &[
    "driver",
    "attributes",
    "capacity",
    "allowMultipleAllocations",
];

/// `device.X` with an X that `kubernetes.DRADevice` does not have, found
/// anywhere in `e` (the type checker's "undefined field").
fn undefined_device_field(e: &IdedExpr) -> Option<String> {
    let sub: Vec<&IdedExpr> = match &e.expr {
        Expr::Select(s) => {
            if matches!(&s.operand.expr, Expr::Ident(i) if i == "device")
                && !DEVICE_FIELDS.contains(&s.field.as_str())
            {
                return Some(s.field.clone());
            }
            vec![&s.operand]
        }
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => vec![],
    };
    sub.into_iter().find_map(undefined_device_field)
}

/// Compiles a selector as Kubernetes' CompileCELExpression would accept or
/// refuse it (its message: "compilation failed: ...").
fn compile(expression: &str) -> Result<Program, String> {
    let program = Program::compile(expression).map_err(|e| format!("compilation failed: {e}"))?;
    if let Some(v) = program
        .references()
        .variables()
        .into_iter()
        .find(|v| *v != "device")
    {
        return Err(format!("compilation failed: undeclared reference to '{v}'"));
    }
    if let Some(f) = undefined_device_field(program.expression()) {
        return Err(format!("compilation failed: undefined field '{f}'"));
    }
    Ok(program)
}

/// One selector on one device: matches or not, or the runtime error in
/// cel-go's words where they differ.
fn matches(program: &Program, device: Box<dyn Val>) -> Result<bool, String> {
    let mut context = Context::default();
    context.add_variable_as_val("device", device);
    match program.execute(&context) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!(
            "CEL result of type {:?} could not be converted to bool",
            other.type_of()
        )),
        Err(ExecutionError::NoSuchKey(k)) => Err(format!("no such key: {k}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The devices (of `candidates`, when given) that all `selectors` match,
/// evaluated in order as the scheduler's allocator does: the first
/// compile or runtime error fails the whole selection, in its words
/// (`owner` is "class X" or "claim Y").
fn select<'d>(
    owner: &str,
    selectors: &[DeviceSelector],
    devices: &[&'d Device],
    candidates: Option<&BTreeSet<&'d str>>,
) -> Result<BTreeSet<&'d str>, String> {
    let programs = selectors
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let cel = s
                .cel
                .as_ref()
                .ok_or_else(|| format!("{owner}: selector #{i}: no cel"))?;
            compile(&cel.expression)
                .map_err(|e| format!("{owner}: selector #{i}: CEL compile error: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = BTreeSet::new();
    'device: for d in devices {
        if candidates.is_some_and(|c| !c.contains(d.name.as_str())) {
            continue;
        }
        for (i, p) in programs.iter().enumerate() {
            let value = device_value(DRIVER, d)
                .map_err(|e| format!("{owner}: selector #{i}: CEL runtime error: {e}"))?;
            match matches(p, value) {
                Ok(true) => {}
                Ok(false) => continue 'device,
                Err(e) => {
                    return Err(format!(
                        "{owner}: selector #{i}: CEL runtime error: device {}: {e}",
                        d.name
                    ));
                }
            }
        }
        out.insert(d.name.as_str());
    }
    Ok(out)
}

// ---------------------------------------------------------------- inputs

/// The devices of a fixture's golden slices of `DRIVER`.
fn fixture_devices(fixture: &str, slices: &str) -> Vec<Device> {
    let path = repo()
        .join("fixtures")
        .join(fixture)
        .join("expected/dra")
        .join(slices);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let slices: Vec<ResourceSlice> = serde_saphyr::from_str_multiple(&text).unwrap();
    slices
        .into_iter()
        .filter(|s| s.spec.driver == DRIVER)
        .flat_map(|s| s.spec.devices.unwrap_or_default())
        .collect()
}

/// Every golden slices file: (fixture, file name).
fn all_slices() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir(repo().join("fixtures")).unwrap() {
        let dir = e.unwrap().path().join("expected/dra");
        let Ok(files) = fs::read_dir(&dir) else {
            continue;
        };
        for f in files {
            let f = f.unwrap().file_name().into_string().unwrap();
            if f.ends_with(".yaml") {
                let fixture = dir.parent().unwrap().parent().unwrap();
                out.push((fixture.file_name().unwrap().to_str().unwrap().to_owned(), f));
            }
        }
    }
    out.sort();
    out
}

/// The YAML documents of a file, as JSON values.
fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_str_multiple::<serde_json::Value, Vec<_>>(text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// Every DeviceClass, ResourceClaim and ResourceClaimTemplate under
/// `deploy/kubernetes` (the Helm chart's templates are not YAML until
/// rendered): (file relative to the repository, document).
fn deploy_objects() -> Vec<(String, serde_json::Value)> {
    let mut files = Vec::new();
    yaml_files(&repo().join("deploy/kubernetes"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(repo()).unwrap().to_str().unwrap().to_owned();
        for d in documents(&fs::read_to_string(&f).unwrap()) {
            if DRA_KINDS.contains(&kind_of(&d)) {
                out.push((rel.clone(), d));
            }
        }
    }
    out
}

fn kind_of(d: &serde_json::Value) -> &str {
    d["kind"].as_str().unwrap_or("")
}

fn name_of(d: &serde_json::Value) -> &str {
    d["metadata"]["name"].as_str().unwrap_or("")
}

fn classes() -> BTreeMap<String, DeviceClass> {
    deploy_objects()
        .into_iter()
        .filter(|(_, d)| kind_of(d) == "DeviceClass")
        .map(|(_, d)| (name_of(&d).to_owned(), serde_json::from_value(d).unwrap()))
        .collect()
}

/// The devices part of a claim or a claim template.
fn device_claim(d: &serde_json::Value) -> DeviceClaim {
    let spec = match kind_of(d) {
        "ResourceClaim" => {
            serde_json::from_value::<ResourceClaim>(d.clone())
                .unwrap()
                .spec
        }
        "ResourceClaimTemplate" => {
            serde_json::from_value::<ResourceClaimTemplate>(d.clone())
                .unwrap()
                .spec
                .spec
        }
        k => panic!("not a claim: {k}"),
    };
    spec.devices.unwrap_or_default()
}

// ---------------------------------------------------------------- evaluation

fn class_selects<'d>(
    class: &DeviceClass,
    devices: &'d [Device],
) -> Result<BTreeSet<&'d str>, String> {
    let refs: Vec<&Device> = devices.iter().collect();
    let selectors = class.spec.selectors.clone().unwrap_or_default();
    select(
        &format!("class {}", class.metadata.name.as_deref().unwrap_or("")),
        &selectors,
        &refs,
        None,
    )
}

/// What a claim's only request selects (its class's selectors, then its
/// own), how many devices it asks for, and whether some group of that
/// many satisfies its `matchAttribute` constraints.
fn claim_selects<'d>(
    name: &str,
    claim: &DeviceClaim,
    classes: &BTreeMap<String, DeviceClass>,
    devices: &'d [Device],
) -> Result<(BTreeSet<&'d str>, i64), String> {
    let requests = claim.requests.clone().unwrap_or_default();
    assert_eq!(requests.len(), 1, "claim {name}: one request expected");
    let exactly = requests[0]
        .exactly
        .clone()
        .unwrap_or_else(|| panic!("claim {name}: not an exactly request"));
    let class = classes.get(&exactly.device_class_name).ok_or_else(|| {
        format!(
            "claim {name}: DeviceClass {} is not in deploy/",
            exactly.device_class_name
        )
    })?;
    let of_class = class_selects(class, devices)?;
    let refs: Vec<&Device> = devices.iter().collect();
    let selected = select(
        &format!("claim {name}"),
        &exactly.selectors.unwrap_or_default(),
        &refs,
        Some(&of_class),
    )?;
    let count = match exactly.allocation_mode.as_deref().unwrap_or("ExactCount") {
        "ExactCount" => exactly.count.unwrap_or(1),
        "All" => selected.len() as i64,
        m => panic!("claim {name}: allocation mode {m}"),
    };
    for c in claim.constraints.iter().flatten() {
        let Some(attr) = &c.match_attribute else {
            continue;
        };
        let mut groups: BTreeMap<String, usize> = BTreeMap::new();
        for d in devices
            .iter()
            .filter(|d| selected.contains(d.name.as_str()))
        {
            if let Some(v) = lookup_attribute(d, attr) {
                *groups.entry(format!("{v:?}")).or_default() += 1;
            }
        }
        if !groups.values().any(|n| *n as i64 >= count) {
            return Err(format!(
                "claim {name}: no {count} selected devices share {attr} ({groups:?})"
            ));
        }
    }
    Ok((selected, count))
}

/// Kubernetes' lookupAttribute for constraints: the fully qualified name,
/// or, in the driver's domain, the bare name.
fn lookup_attribute<'d>(d: &'d Device, qualified: &str) -> Option<&'d DeviceAttribute> {
    let attrs = d.attributes.as_ref()?;
    attrs.get(qualified).or_else(|| {
        let (domain, id) = qualified.split_once('/')?;
        (domain == DRIVER).then(|| attrs.get(id)).flatten()
    })
}

// ---------------------------------------------------------------- tests

#[test]
fn every_deploy_example_declares_its_fixture() {
    let objects = deploy_objects();
    let mut failures = Vec::new();
    for (file, d) in &objects {
        let (kind, name) = (kind_of(d), name_of(d));
        match EXAMPLES.iter().find(|e| e.kind == kind && e.name == name) {
            None => failures.push(format!(
                "{file}: {kind} {name} has no entry in EXAMPLES (tests/examples_cel.rs)"
            )),
            Some(e) if e.file != file => {
                failures.push(format!("{file}: {kind} {name} is listed under {}", e.file));
            }
            Some(e) => {
                let text = fs::read_to_string(repo().join(file)).unwrap();
                let named = format!("fixtures/{}", e.fixture);
                if !text.contains(&named) {
                    failures.push(format!(
                        "{file}: does not name {named}, the fixture of {name}"
                    ));
                }
            }
        }
    }
    for e in EXAMPLES {
        if !objects
            .iter()
            .any(|(_, d)| kind_of(d) == e.kind && name_of(d) == e.name)
        {
            failures.push(format!(
                "{} {} (EXAMPLES) is not in deploy/",
                e.kind, e.name
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn examples_select_the_expected_devices_of_their_fixture() {
    let classes = classes();
    let objects = deploy_objects();
    let mut failures = Vec::new();
    let mut slices = BTreeMap::new();
    for e in EXAMPLES {
        let devices: &Vec<Device> = slices
            .entry((e.fixture, e.slices))
            .or_insert_with(|| fixture_devices(e.fixture, e.slices));
        let Some((_, doc)) = objects
            .iter()
            .find(|(_, d)| kind_of(d) == e.kind && name_of(d) == e.name)
        else {
            failures.push(format!("{} {}: not in deploy/", e.kind, e.name));
            continue;
        };
        let want: BTreeSet<&str> = e.selects.iter().copied().collect();
        let got = if e.kind == "DeviceClass" {
            class_selects(&classes[e.name], devices).map(|s| (s, 1))
        } else {
            claim_selects(e.name, &device_claim(doc), &classes, devices)
        };
        match got {
            Err(err) => failures.push(format!("fixtures/{}: {err}", e.fixture)),
            Ok((got, count)) => {
                if got != want {
                    failures.push(format!(
                        "{} {} on fixtures/{}/expected/dra/{}: selects {got:?}, expected {want:?}",
                        e.kind, e.name, e.fixture, e.slices
                    ));
                }
                if (got.len() as i64) < count.max(1) {
                    failures.push(format!(
                        "{} {} on fixtures/{}: asks for {count}, {} selected",
                        e.kind,
                        e.name,
                        e.fixture,
                        got.len()
                    ));
                }
                // A tainted (unhealthy) device is not allocated where
                // DRADeviceTaints is on: the fixture must show healthy ones.
                for d in devices.iter().filter(|d| got.contains(d.name.as_str())) {
                    if !d.taints.as_ref().is_none_or(Vec::is_empty) {
                        failures.push(format!(
                            "{} {} on fixtures/{}: selects {}, which is tainted",
                            e.kind, e.name, e.fixture, d.name
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A class applies to every node: on a fixture it is not written for it
/// must select without a CEL error (which would fail every claim of it
/// there).
#[test]
fn example_classes_evaluate_without_error_on_every_fixture() {
    let classes = classes();
    let mut failures = Vec::new();
    for (fixture, slices) in all_slices() {
        let devices = fixture_devices(&fixture, &slices);
        for class in classes.values() {
            if let Err(e) = class_selects(class, &devices) {
                failures.push(format!("fixtures/{fixture}/expected/dra/{slices}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn example_vf() -> Device {
    fixture_devices("example", "resourceslices.yaml")
        .into_iter()
        .find(|d| d.name == "sriov-0000-3b-00-2")
        .unwrap()
}

fn one(expression: &str, device: &Device) -> Result<bool, String> {
    matches(&compile(expression)?, device_value(DRIVER, device)?)
}

#[test]
fn the_cel_environment_is_kubernetes_dra() {
    let vf = example_vf();
    for (expression, want) in [
        (r#"device.driver == "dra.cdigen.io""#, true),
        // Unqualified attributes are under the driver's domain.
        (
            r#"device.attributes["dra.cdigen.io"].pfName == "ens1f0np0""#,
            true,
        ),
        (r#"device.attributes["dra.cdigen.io"].vfIndex == 0"#, true),
        (r#"device.attributes["dra.cdigen.io"].healthy"#, true),
        (
            r#"device.attributes["resource.kubernetes.io"].numaNode == 0"#,
            true,
        ),
        (r#""pfName" in device.attributes["dra.cdigen.io"]"#, true),
        (r#"has(device.attributes["dra.cdigen.io"].uuid)"#, false),
        // A domain the device has nothing under is an empty map.
        (r#""x" in device.attributes["example.com"]"#, false),
        (r#""example.com" in device.attributes"#, false),
        (r#"device.capacity["dra.cdigen.io"].size() == 0"#, true),
        (r#"device.allowMultipleAllocations"#, false),
        // An error on one side of && or || is absorbed as in cel-go.
        (
            r#"device.attributes["dra.cdigen.io"].nope == 1 || true"#,
            true,
        ),
        (
            r#"false && device.attributes["dra.cdigen.io"].nope == 1"#,
            false,
        ),
    ] {
        assert_eq!(one(expression, &vf), Ok(want), "{expression}");
    }
}

#[test]
fn errors_are_reported_as_kubernetes_reports_them() {
    let vf = example_vf();
    for (expression, want) in [
        (
            r#"device.attributes["dra.cdigen.io"].pfname == "ens1f0np0""#,
            "no such key: pfname",
        ),
        (
            r#"device.attributes["resource.kubernetes.io"].pfName == "x""#,
            "no such key: pfName",
        ),
        (
            r#"devce.driver == "dra.cdigen.io""#,
            "compilation failed: undeclared reference to 'devce'",
        ),
        (
            r#"device.drivr == "dra.cdigen.io""#,
            "compilation failed: undefined field 'drivr'",
        ),
        (
            r#"device.attributes["dra.cdigen.io"].class =="#,
            "compilation failed: ERROR: <input>:1:44: Syntax error",
        ),
        (
            r#"device.attributes["dra.cdigen.io"].class"#,
            "could not be converted to bool",
        ),
    ] {
        let err = one(expression, &vf).unwrap_err();
        assert!(err.contains(want), "{expression}: {err}");
    }

    // A missing attribute fails the class on the node, naming the
    // selector and the device, as the scheduler's allocator does: the
    // devices before it that have the attribute do not save it.
    let devices = fixture_devices("example", "resourceslices.yaml");
    let class: DeviceClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "bad.cdigen.io"},
        "spec": {"selectors": [
            {"cel": {"expression": "device.driver == \"dra.cdigen.io\""}},
            {"cel": {"expression": "device.attributes[\"dra.cdigen.io\"].pfName == \"ens1f0np0\""}},
        ]},
    }))
    .unwrap();
    assert_eq!(
        class_selects(&class, &devices).unwrap_err(),
        "class bad.cdigen.io: selector #1: CEL runtime error: device amd-gpu-0000-03-00-0: \
         no such key: pfName"
    );
    // A capacity's quantity is not emulated: using one is an error, never
    // a silent match.
    let mut gpu = devices[0].clone();
    gpu.capacity = Some(BTreeMap::from([(
        "memory".to_owned(),
        k8s_openapi::api::resource::v1::DeviceCapacity {
            value: k8s_openapi::apimachinery::pkg::api::resource::Quantity("40Gi".to_owned()),
            ..Default::default()
        },
    )]));
    assert!(
        one(
            r#"device.capacity["dra.cdigen.io"].memory.compareTo(quantity("1Gi")) > 0"#,
            &gpu
        )
        .is_err()
    );
    assert_eq!(
        one(r#""memory" in device.capacity["dra.cdigen.io"]"#, &gpu),
        Ok(true)
    );
}

/// The user documentation: README.md and docs/*.md, one after the other
/// (the Kubernetes sections live in docs/).
fn user_docs() -> String {
    let mut files: Vec<_> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.insert(0, repo().join("README.md"));
    files
        .iter()
        .map(|p| fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fenced YAML blocks of the user documentation.
fn readme_yaml_blocks() -> Vec<String> {
    let text = user_docs();
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        match &mut block {
            None if line.trim_start() == "```yaml" => block = Some(String::new()),
            Some(b) if line.trim_start() == "```" => {
                out.push(std::mem::take(b));
                block = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

/// The YAML documents of the user documentation: its YAML blocks and its
/// shell here-documents (`<<'YAML'`), as JSON values.
fn readme_documents() -> Vec<serde_json::Value> {
    let readme = user_docs();
    let heredocs = readme
        .split("<<'YAML'\n")
        .skip(1)
        .map(|rest| rest.split("\nYAML\n").next().unwrap().to_owned());
    readme_yaml_blocks()
        .into_iter()
        .chain(heredocs)
        .flat_map(|b| {
            // Fragments that are not Kubernetes objects (a generator
            // definition's keys) are left to the tests of those.
            serde_saphyr::from_str_multiple::<serde_json::Value, Vec<_>>(&b).unwrap_or_default()
        })
        .filter(|d| !d.is_null())
        .collect()
}

/// The README's DRA objects are those of `deploy/` (so the test above
/// covers them); a comment that quotes a class's selector quotes what the
/// class says; a pod's claims name templates that exist.
#[test]
fn readme_dra_examples_are_the_deploy_examples() {
    let objects = deploy_objects();
    let classes = classes();
    let mut failures = Vec::new();
    let mut seen = 0;
    for block in readme_yaml_blocks() {
        // "# DeviceClass NAME: ..." and the comment lines that follow it.
        let mut comments: Vec<(String, String)> = Vec::new();
        let mut open = false;
        for line in block.lines() {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix("# DeviceClass ") {
                let name = rest.split(':').next().unwrap().to_owned();
                comments.push((name, rest.to_owned()));
                open = true;
            } else if open && line.starts_with('#') {
                comments.last_mut().unwrap().1.push_str(line);
            } else {
                open = false;
            }
        }
        for (name, comment) in comments {
            let Some(class) = classes.get(&name) else {
                failures.push(format!("README: DeviceClass {name} is not in deploy/"));
                continue;
            };
            let expressions: String = class
                .spec
                .selectors
                .iter()
                .flatten()
                .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
                .collect();
            for quoted in comment.split('"').skip(1).step_by(2) {
                if !expressions.contains(&format!("\"{quoted}\"")) {
                    failures.push(format!(
                        "README: the comment on {name} quotes \"{quoted}\", which its selectors do not have"
                    ));
                }
            }
        }
    }
    for d in readme_documents() {
        let (kind, name) = (kind_of(&d), name_of(&d));
        if KIND_RECIPE.contains(&(kind, name)) {
            continue;
        }
        if DRA_KINDS.contains(&kind) {
            seen += 1;
            match objects
                .iter()
                .find(|(_, o)| kind_of(o) == kind && name_of(o) == name)
            {
                None => failures.push(format!("README: {kind} {name} is not in deploy/")),
                Some((file, o)) if o["spec"] != d["spec"] => failures.push(format!(
                    "README: {kind} {name} differs from {file}:\n{}\n{}",
                    d["spec"], o["spec"]
                )),
                Some(_) => {}
            }
        }
        if kind == "Pod" {
            for c in d["spec"]["resourceClaims"].as_array().into_iter().flatten() {
                let (claim_kind, claim) = match (
                    c["resourceClaimTemplateName"].as_str(),
                    c["resourceClaimName"].as_str(),
                ) {
                    (Some(t), _) => ("ResourceClaimTemplate", t),
                    (_, Some(c)) => ("ResourceClaim", c),
                    _ => continue,
                };
                if !KIND_RECIPE.contains(&(claim_kind, claim))
                    && !objects
                        .iter()
                        .any(|(_, o)| kind_of(o) == claim_kind && name_of(o) == claim)
                {
                    failures.push(format!(
                        "README: pod {name}: {claim_kind} {claim} is not in deploy/"
                    ));
                }
            }
        }
    }
    assert!(seen >= 3, "README: only {seen} DRA objects found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The objects of the README's kind recipe, which is for a kind node's
/// /dev/fuse and no fixture: their selectors are checked in
/// `readme_kind_recipe_selects_fuse`.
const KIND_RECIPE: &[(&str, &str)] =
    &[("DeviceClass", "fuse.cdigen.io"), ("ResourceClaim", "fuse")];

/// The README's kind recipe: on a node with /dev/fuse (its sysfs entry,
/// made here) and `contrib/kind/fuse.yaml`, `--print-slices` publishes the
/// device of kind `cdigen.io/fuse` the recipe says, and the recipe's class
/// and claim select it.
#[test]
fn readme_kind_recipe_selects_fuse() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let fuse = root.join("sys/devices/virtual/misc/fuse");
    fs::create_dir_all(&fuse).unwrap();
    fs::create_dir_all(root.join("sys/bus")).unwrap();
    fs::create_dir_all(root.join("sys/class/misc")).unwrap();
    fs::write(fuse.join("dev"), "10:229\n").unwrap();
    fs::write(fuse.join("uevent"), "MAJOR=10\nMINOR=229\nDEVNAME=fuse\n").unwrap();
    std::os::unix::fs::symlink(
        "../../devices/virtual/misc/fuse",
        root.join("sys/class/misc/fuse"),
    )
    .unwrap();
    let defs = tmp.path().join("generators.d");
    fs::create_dir_all(&defs).unwrap();
    fs::copy(
        repo().join("contrib/kind/fuse.yaml"),
        defs.join("fuse.yaml"),
    )
    .unwrap();
    let (code, stdout, stderr) = golden::cdigen(&[
        "dra-driver",
        "--print-slices",
        "--node",
        "cdigen-control-plane",
        "--root",
        root.to_str().unwrap(),
        "--generators",
        defs.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    // The device is tainted DeviceNodeMissing here (the root has sysfs
    // only, no /dev/fuse), as it is not on a kind node: the selectors are
    // what this checks.
    let slices: Vec<ResourceSlice> = serde_saphyr::from_str_multiple(&stdout).unwrap();
    let devices: Vec<Device> = slices
        .into_iter()
        .flat_map(|s| s.spec.devices.unwrap_or_default())
        .collect();

    let docs = readme_documents();
    let find = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| kind_of(d) == kind && name_of(d) == name)
            .unwrap_or_else(|| panic!("README: no {kind} {name}"))
            .clone()
    };
    let class: DeviceClass = serde_json::from_value(find("DeviceClass", "fuse.cdigen.io")).unwrap();
    let want = BTreeSet::from(["fuse-misc-fuse"]);
    assert_eq!(class_selects(&class, &devices).unwrap(), want);
    let classes = BTreeMap::from([("fuse.cdigen.io".to_owned(), class)]);
    let (got, count) = claim_selects(
        "fuse",
        &device_claim(&find("ResourceClaim", "fuse")),
        &classes,
        &devices,
    )
    .unwrap();
    assert_eq!((got, count), (want, 1));
}

/// The README's device plugin example ("A pod with two VFs", on the
/// example machine's VFs 0000:3b:00.2 and 0000:3b:00.3): the device nodes
/// and variables it says the container gets are in the example machine's
/// spec, with the device-info files it names.
#[test]
fn readme_device_plugin_example_matches_the_example_fixture() {
    let readme = user_docs();
    assert!(readme.contains("`0000:3b:00.3` (`fixtures/example`)"));
    let expected = repo().join("fixtures/example/expected");
    let spec: serde_json::Value = serde_saphyr::from_str(
        &fs::read_to_string(expected.join("cdi/cdigen.io-vf.yaml")).unwrap(),
    )
    .unwrap();
    let mut nodes = BTreeSet::new();
    let mut env = BTreeSet::new();
    for d in spec["devices"].as_array().unwrap() {
        let name = d["name"].as_str().unwrap();
        if name != "0000:3b:00.2" && name != "0000:3b:00.3" {
            continue;
        }
        for n in d["containerEdits"]["deviceNodes"].as_array().unwrap() {
            nodes.insert(n["path"].as_str().unwrap().to_owned());
        }
        for e in d["containerEdits"]["env"].as_array().unwrap() {
            env.insert(e.as_str().unwrap().split('=').next().unwrap().to_owned());
        }
    }
    let want: BTreeSet<String> = [
        "uverbs2", "umad2", "issm2", "uverbs3", "umad3", "issm3", "rdma_cm",
    ]
    .iter()
    .map(|n| format!("/dev/infiniband/{n}"))
    .collect();
    assert_eq!(nodes, want);
    assert!(readme.contains(
        "`uverbs2`, `umad2`, `issm2`, `uverbs3`,\n  `umad3`, `issm3` and `rdma_cm` in `/dev/infiniband`"
    ));
    assert_eq!(
        env,
        BTreeSet::from([
            "PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2".to_owned(),
            "PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_3".to_owned(),
        ])
    );
    assert!(readme.contains("`PCIDEVICE_CDIGEN_IO_VF_<ADDR>`, one\n  per VF"));
    for vf in ["0000:3b:00.2", "0000:3b:00.3"] {
        assert!(
            expected
                .join(format!("devinfo/cdigen.io-vf-{vf}-device.json"))
                .is_file()
        );
    }
    assert!(readme.contains("/devinfo/dp/cdigen.io-vf-0000:3b:00.2-device.json"));
    // "cdigen.io/vf":"4": the example machine has four VFs.
    assert_eq!(spec["devices"].as_array().unwrap().len(), 4);
    assert!(readme.contains(r#""cdigen.io/vf":"4""#));
}
