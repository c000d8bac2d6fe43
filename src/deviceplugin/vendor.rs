//! Other device plugins on the node that serve a resource cdigen is told
//! to advertise: a vendor's name (`nvidia.com/gpu`) chosen explicitly with
//! `device_plugin.resource`, for a user migrating from that vendor's
//! plugin.
//!
//! Two plugins registering one resource replace each other at the
//! kubelet (the last to register wins, and the devices of the other go
//! unhealthy for the pods that hold them), so cdigen refuses to start
//! while another plugin serves that name: a live socket in the kubelet's
//! device-plugin directory under the name the vendor plugins use for it.
//! The kubelet's checkpoint (`kubelet_internal_checkpoint`) keeps the
//! names registered before, by any plugin, also after that plugin is
//! gone: a name it lists with no live socket is only warned about (it may
//! be cdigen's own registration from before a restart).
//!
//! Resources in cdigen's own domain ([`super::inventory::OWN_DOMAIN`]) are
//! never checked: no other plugin uses that domain.

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use super::inventory::{OWN_DOMAIN, ResourceDef};

/// The kubelet's record of the devices plugins registered, in its
/// device-plugin directory.
pub const CHECKPOINT: &str = "kubelet_internal_checkpoint";

/// Largest checkpoint read.
const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;

/// Another plugin serving a resource cdigen would register.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "generator {generator} ({}): resource {resource} is already served by another device plugin \
on this node (its socket {} accepts connections): two plugins of one resource replace each other \
at the kubelet. Stop that plugin first (remove its DaemonSet from this node), or leave the name \
to it: remove device_plugin.resource from {} (cdigen then advertises {default})",
    source_file.display(), socket.display(), source_file.display()
)]
pub struct Served {
    /// The generator.
    pub generator: String,
    /// Its definition file.
    pub source_file: PathBuf,
    /// The resource.
    pub resource: String,
    /// The other plugin's socket.
    pub socket: PathBuf,
    /// What cdigen advertises without the explicit name.
    pub default: String,
}

/// The socket file names the vendor plugins use for `resource`
/// (`domain/name`): NVIDIA's `nvidia-<name>.sock`, Habana's
/// `<name>_habanalabs.sock`, Intel's `<domain>-<name>.sock`, and
/// `<domain>_<name>` with or without `.sock` (the device-plugin-manager
/// library AMD's plugin is built on, and the SR-IOV network device
/// plugin).
pub fn socket_names(resource: &str) -> Vec<String> {
    let Some((domain, name)) = resource.split_once('/') else {
        return Vec::new();
    };
    affixes(domain)
        .into_iter()
        .map(|(before, after)| format!("{before}{name}{after}"))
        .collect()
}

/// What comes before and after a resource's name (without its domain) in
/// the socket names of [`socket_names`], for `domain`.
fn affixes(domain: &str) -> Vec<(String, &'static str)> {
    let mut out = vec![
        (format!("{domain}_"), ""),
        (format!("{domain}_"), ".sock"),
        (format!("{domain}-"), ".sock"),
    ];
    match domain {
        "nvidia.com" => out.push(("nvidia-".into(), ".sock")),
        "habana.ai" => out.push((String::new(), "_habanalabs.sock")),
        _ => {}
    }
    out
}

/// The resources the kubelet's checkpoint in `plugin_dir` records as
/// registered; none when it is missing or not the kubelet's JSON.
pub fn checkpointed(plugin_dir: &Path) -> Vec<String> {
    let path = plugin_dir.join(CHECKPOINT);
    let Ok(text) =
        crate::fsio::read_to_string(&path, MAX_CHECKPOINT_BYTES, crate::fsio::Links::Refuse)
    else {
        return Vec::new();
    };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        tracing::debug!(
            "{}: not the kubelet's checkpoint JSON",
            crate::text::path(&path)
        );
        return Vec::new();
    };
    doc.pointer("/Data/RegisteredDevices")
        .and_then(serde_json::Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Whether a socket at `path` accepts a connection: a plugin listens.
fn live(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
        && std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// Another plugin serving devices a generator offers
/// (`device_plugin.vendor_resources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// The other plugin's resource (`nvidia.com/gpu`).
    pub resource: String,
    /// Its socket, which accepts connections.
    pub socket: PathBuf,
}

/// The first of `patterns` (`domain/name`, or `domain/prefix*` for every
/// name that starts with the prefix) that another plugin serves now: a
/// live socket in `plugin_dir` under one of the vendor plugins' names for
/// it ([`socket_names`]; for a prefix, any socket in the directory that
/// fits one). `None` when none is served.
pub fn serving(plugin_dir: &Path, patterns: &[String]) -> Option<Serving> {
    // The directory's file names, read once and only for a prefix.
    let mut listed: Option<Vec<String>> = None;
    for pattern in patterns {
        let Some((domain, name)) = pattern.split_once('/') else {
            continue;
        };
        if domain == OWN_DOMAIN {
            continue;
        }
        if let Some(prefix) = name.strip_suffix('*') {
            let names = listed.get_or_insert_with(|| list(plugin_dir));
            for file in names.iter() {
                let found = affixes(domain).into_iter().find_map(|(before, after)| {
                    file.strip_prefix(before.as_str())
                        .and_then(|rest| rest.strip_suffix(after))
                        .filter(|n| n.starts_with(prefix) && !n.is_empty())
                        .map(str::to_string)
                });
                let Some(short) = found else {
                    continue;
                };
                let socket = plugin_dir.join(file);
                if live(&socket) {
                    return Some(Serving {
                        resource: format!("{domain}/{short}"),
                        socket,
                    });
                }
            }
        } else {
            for s in socket_names(pattern) {
                let socket = plugin_dir.join(s);
                if live(&socket) {
                    return Some(Serving {
                        resource: pattern.clone(),
                        socket,
                    });
                }
            }
        }
    }
    None
}

/// The file names in `dir`, sorted; none when it cannot be read.
fn list(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Refuses a resource outside cdigen's domain that another plugin serves
/// now; warns about one the kubelet's checkpoint lists without a live
/// socket of another plugin.
///
/// # Errors
/// [`Served`] for the first such resource.
pub fn check(plugin_dir: &Path, defs: &[ResourceDef]) -> Result<(), Served> {
    let mut registered: Option<Vec<String>> = None;
    for d in defs {
        if d.name
            .split_once('/')
            .is_some_and(|(dom, _)| dom == OWN_DOMAIN)
        {
            continue;
        }
        if let Some(found) = serving(plugin_dir, std::slice::from_ref(&d.name)) {
            return Err(Served {
                generator: d.generator.clone(),
                source_file: d.source.clone(),
                resource: d.name.clone(),
                socket: found.socket,
                default: super::inventory::default_resource(&d.generator, &d.kind),
            });
        }
        let registered = registered.get_or_insert_with(|| checkpointed(plugin_dir));
        if registered.contains(&d.name) {
            tracing::warn!(
                "generator {} ({}): the kubelet has had resource {} registered before ({}), by \
                 cdigen or by another device plugin: if that was the vendor's plugin, make sure it \
                 is gone from this node, or the two will replace each other",
                d.generator,
                crate::text::path(&d.source),
                d.name,
                crate::text::path(&plugin_dir.join(CHECKPOINT))
            );
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn def(name: &str) -> ResourceDef {
        ResourceDef {
            name: name.into(),
            generator: "nvidia".into(),
            kind: "nvidia.com/gpu".into(),
            source: PathBuf::from("/etc/cdigen/generators.d/nvidia.yaml"),
            replicas: 1,
            pool: false,
            register_empty: false,
            vendor_resources: Vec::new(),
        }
    }

    #[test]
    fn a_live_vendor_socket_refuses_its_name_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let _l = std::os::unix::net::UnixListener::bind(dir.join("nvidia-gpu.sock")).unwrap();
        let e = check(dir, &[def("nvidia.com/gpu")]).unwrap_err();
        assert_eq!(e.socket, dir.join("nvidia-gpu.sock"));
        assert_eq!(e.default, "cdigen.io/nvidia");
        // cdigen's own domain is never checked; another name is free.
        assert_eq!(check(dir, &[def("cdigen.io/nvidia")]), Ok(()));
        assert_eq!(check(dir, &[def("amd.com/gpu")]), Ok(()));
        // A stale socket (nobody listening) is no plugin.
        drop(_l);
        assert_eq!(check(dir, &[def("nvidia.com/gpu")]), Ok(()));
    }

    #[test]
    fn a_live_socket_of_a_vendor_resource_or_prefix_is_serving() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let nvidia = vec!["nvidia.com/gpu".to_string(), "nvidia.com/mig-*".to_string()];
        assert_eq!(serving(dir, &nvidia), None);
        // A stale socket (nobody listening) and a plain file are no plugin.
        drop(std::os::unix::net::UnixListener::bind(dir.join("nvidia-gpu.sock")).unwrap());
        std::fs::write(dir.join("nvidia-mig-1g.10gb.sock"), "").unwrap();
        assert_eq!(serving(dir, &nvidia), None);
        let mig = std::os::unix::net::UnixListener::bind(dir.join("nvidia-mig-2g.20gb.sock"));
        assert_eq!(
            serving(dir, &nvidia),
            Some(Serving {
                resource: "nvidia.com/mig-2g.20gb".into(),
                socket: dir.join("nvidia-mig-2g.20gb.sock"),
            })
        );
        drop(mig);
        std::fs::remove_file(dir.join("nvidia-gpu.sock")).unwrap();
        let _gpu = std::os::unix::net::UnixListener::bind(dir.join("nvidia-gpu.sock")).unwrap();
        assert_eq!(
            serving(dir, &nvidia).map(|s| s.resource),
            Some("nvidia.com/gpu".into())
        );
        // Another vendor's prefix does not take NVIDIA's socket; cdigen's
        // own domain is never another plugin's.
        assert_eq!(serving(dir, &["amd.com/*".to_string()]), None);
        assert_eq!(serving(dir, &["cdigen.io/*".to_string()]), None);
        // Intel's `<domain>-<name>.sock`, by prefix.
        let _xe =
            std::os::unix::net::UnixListener::bind(dir.join("gpu.intel.com-xe.sock")).unwrap();
        assert_eq!(
            serving(dir, &["gpu.intel.com/*".to_string()]).map(|s| s.resource),
            Some("gpu.intel.com/xe".into())
        );
    }

    #[test]
    fn socket_names_of_the_vendor_plugins() {
        assert!(socket_names("nvidia.com/gpu").contains(&"nvidia-gpu.sock".to_string()));
        assert!(socket_names("amd.com/gpu").contains(&"amd.com_gpu".to_string()));
        assert!(
            socket_names("gpu.intel.com/i915").contains(&"gpu.intel.com-i915.sock".to_string())
        );
        assert!(socket_names("habana.ai/gaudi").contains(&"gaudi_habanalabs.sock".to_string()));
        assert!(socket_names("no-slash").is_empty());
    }

    #[test]
    fn the_checkpoint_lists_registered_resources() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join(CHECKPOINT),
            r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"nvidia.com/gpu":["GPU-1"]}},"Checksum":1}"#,
        )
        .unwrap();
        assert_eq!(checkpointed(tmp.path()), ["nvidia.com/gpu"]);
        std::fs::write(tmp.path().join(CHECKPOINT), "{not json").unwrap();
        assert!(checkpointed(tmp.path()).is_empty());
    }
}
