//! The hooks of a spec that would let a container run code as root on the
//! host, in any producer's spec: one check that `validate`, `check` and
//! `inject` share.
//!
//! Runtimes run every hook as root from the host. runc runs the
//! `createContainer`, `createRuntime` and `startContainer` hooks of a spec
//! that gives them no `env` with the container's environment (the image's
//! `ENV`, the pod's `env`): an image's `LD_PRELOAD` or `LD_AUDIT` then
//! loads the image's code into the hook (CVE-2025-23266). And a hook whose
//! program someone other than root could replace runs that someone's code.
//! So each of those three hooks must have an `env` (not empty: the CDI
//! library drops an empty one), and every hook's `path` must be a program
//! [`crate::trust::program`] trusts, looked at on the host the runtime
//! runs on (this machine's `/`, or the `--root` of `check` and `inject`).
//! A program that does not exist or is not executable is reported apart
//! ([`HookFinding::missing`]): the runtime fails the start of every
//! container given the device, and nothing runs.

use std::path::{Path, PathBuf};

use super::spec::{ContainerEdits, Hook, Spec};
use crate::trust::Untrusted;

/// The hooks runc runs with the container's environment when they have no
/// `env`.
pub const CONTAINER_ENV_HOOKS: [&str; 3] = ["createContainer", "createRuntime", "startContainer"];

/// One hook at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFinding {
    /// The program does not exist or is not executable: runtimes fail
    /// the start of the containers given it (each command says how it
    /// reports that).
    pub missing: bool,
    /// Where in the spec: `containerEdits.hooks[0]`, `device "gpu0":
    /// containerEdits.hooks[1]`.
    pub location: String,
    /// The device whose edits hold the hook (its name in the spec); `None`
    /// for the spec's own edits.
    pub device: Option<String>,
    /// The hook's `path`.
    pub path: String,
    /// What is wrong and why it matters, naming the hook.
    pub message: String,
}

/// How a hook's program is looked at: [`crate::trust::program`] on this
/// machine, [`crate::root::HostRoot::program`] under a `--root`.
pub type Program<'a> = &'a dyn Fn(&Path) -> Result<PathBuf, Untrusted>;

/// The findings of every hook in `spec`, in spec order, its programs
/// looked at by `program`. The programs are only looked at, never run.
pub fn inspect(spec: &Spec, program: Program<'_>) -> Vec<HookFinding> {
    let mut out = Vec::new();
    edits(
        &mut out,
        program,
        None,
        "containerEdits",
        &spec.container_edits,
    );
    for d in &spec.devices {
        let at = format!("device {:?}: containerEdits", d.name);
        edits(&mut out, program, Some(&d.name), &at, &d.container_edits);
    }
    out
}

fn edits(
    out: &mut Vec<HookFinding>,
    program: Program<'_>,
    device: Option<&str>,
    at: &str,
    e: &ContainerEdits,
) {
    for (i, h) in e.hooks.iter().enumerate() {
        let location = format!("{at}.hooks[{i}]");
        for (missing, why) in hook(h, program) {
            out.push(HookFinding {
                missing,
                location: location.clone(),
                device: device.map(str::to_string),
                path: h.path.clone(),
                message: format!(
                    "{} hook {}: {why}",
                    crate::text::quoted(&h.hook_name, 40),
                    crate::text::quoted(&h.path, 200)
                ),
            });
        }
    }
}

/// What is wrong with one hook: (the program is missing, why).
fn hook(h: &Hook, program: Program<'_>) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    if CONTAINER_ENV_HOOKS.contains(&h.hook_name.as_str()) && h.env.is_empty() {
        out.push((
            false,
            "no env: runtimes run it with the container's environment, so an image's LD_PRELOAD \
             or LD_AUDIT loads the image's code into it, as root on the host (give it an env, \
             such as [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"])"
                .to_string(),
        ));
    }
    match program(Path::new(&h.path)) {
        Ok(_) => {}
        Err(e) if e.is_missing() => out.push((
            true,
            format!(
                "{}: runtimes fail to start a container given it",
                e.reason_for(Path::new(&h.path))
            ),
        )),
        Err(e) => out.push((
            false,
            format!(
                "{}: whoever can change it runs code as root on the host",
                e.reason_for(Path::new(&h.path))
            ),
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::cdi::spec::Device;
    use std::os::unix::fs::PermissionsExt as _;

    fn h(name: &str, path: &str, env: &[&str]) -> Hook {
        Hook {
            hook_name: name.into(),
            path: path.into(),
            args: vec!["x".into()],
            env: env.iter().map(|s| s.to_string()).collect(),
            timeout: None,
        }
    }

    fn spec(common: Vec<Hook>, device: Vec<Hook>) -> Spec {
        let mut s = Spec {
            cdi_version: "0.5.0".into(),
            kind: "example.com/gpu".into(),
            ..Default::default()
        };
        s.container_edits.hooks = common;
        s.devices.push(Device {
            name: "gpu0".into(),
            container_edits: ContainerEdits {
                hooks: device,
                ..Default::default()
            },
            ..Default::default()
        });
        s
    }

    #[test]
    fn a_hook_without_env_is_an_error_for_the_hooks_that_get_the_containers() {
        let env = ["PATH=/bin"];
        let s = spec(
            vec![
                h("createContainer", "/bin/sh", &[]),
                h("createContainer", "/bin/sh", &env),
                h("poststop", "/bin/sh", &[]),
            ],
            vec![
                h("createRuntime", "/bin/sh", &[]),
                h("startContainer", "/bin/sh", &[]),
            ],
        );
        let got: Vec<(String, Option<String>)> = inspect(&s, &crate::trust::program)
            .into_iter()
            .map(|f| {
                assert!(!f.missing);
                assert!(f.message.contains(": no env: runtimes run it with the container's environment, so an image's LD_PRELOAD or LD_AUDIT loads the image's code into it, as root on the host"), "{}", f.message);
                (f.location, f.device)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("containerEdits.hooks[0]".to_string(), None),
                (
                    "device \"gpu0\": containerEdits.hooks[0]".to_string(),
                    Some("gpu0".to_string())
                ),
                (
                    "device \"gpu0\": containerEdits.hooks[1]".to_string(),
                    Some("gpu0".to_string())
                ),
            ]
        );
        assert_eq!(
            inspect(&s, &crate::trust::program)[0].message,
            "\"createContainer\" hook \"/bin/sh\": no env: runtimes run it with the container's \
             environment, so an image's LD_PRELOAD or LD_AUDIT loads the image's code into it, as \
             root on the host (give it an env, such as [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"])"
        );
    }

    #[test]
    fn every_hooks_program_must_be_trusted_and_a_missing_one_is_a_warning() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("hook");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
        let env = ["PATH=/bin"];
        let missing = t.path().join("missing");
        let s = spec(
            vec![
                h("poststop", p.to_str().unwrap(), &env),
                h("createContainer", missing.to_str().unwrap(), &env),
            ],
            vec![],
        );
        let got: Vec<(bool, String)> = inspect(&s, &crate::trust::program)
            .into_iter()
            .map(|f| (f.missing, f.message))
            .collect();
        assert_eq!(
            got,
            [
                (
                    false,
                    format!(
                        "\"poststop\" hook \"{}\": is writable by others: whoever can change it runs code as root on the host",
                        p.display()
                    )
                ),
                (
                    true,
                    format!(
                        "\"createContainer\" hook \"{}\": No such file or directory (os error 2): runtimes fail to start a container given it",
                        missing.display()
                    )
                ),
            ]
        );
        if rustix::process::geteuid().is_root() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::os::unix::fs::chown(&p, Some(1000), None).unwrap();
            let s = spec(
                vec![h("createContainer", p.to_str().unwrap(), &env)],
                vec![],
            );
            assert_eq!(
                inspect(&s, &crate::trust::program)[0].message,
                format!(
                    "\"createContainer\" hook \"{}\": is owned by uid 1000, not root: whoever can change it runs code as root on the host",
                    p.display()
                )
            );
        }
        let fine = spec(vec![h("createContainer", "/bin/sh", &env)], vec![]);
        assert_eq!(inspect(&fine, &crate::trust::program), []);
    }

    #[test]
    fn a_hook_program_not_executable_or_not_on_the_roots_host_cannot_run() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let bin = root.join("usr/bin");
        std::fs::create_dir_all(&bin).unwrap();
        for d in [root.join("usr"), bin.clone()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let p = bin.join("cdigen-hook");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let env = ["PATH=/bin"];
        let s = spec(
            vec![],
            vec![h("createContainer", "/usr/bin/cdigen-hook", &env)],
        );
        let got: Vec<(bool, Option<String>, String)> =
            inspect(&s, &|p| crate::trust::program_in(root, p))
                .into_iter()
                .map(|f| (f.missing, f.device, f.message))
                .collect();
        assert_eq!(
            got,
            [(
                true,
                Some("gpu0".to_string()),
                "\"createContainer\" hook \"/usr/bin/cdigen-hook\": is not executable (mode 0644): \
                 runtimes fail to start a container given it"
                    .to_string()
            )]
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(inspect(&s, &|p| crate::trust::program_in(root, p)), []);
        // /bin/sh is this machine's, not that host's.
        let s = spec(vec![h("createContainer", "/bin/sh", &env)], vec![]);
        assert_eq!(
            inspect(&s, &|p| crate::trust::program_in(root, p))[0].message,
            "\"createContainer\" hook \"/bin/sh\": /bin: No such file or directory (os error 2): \
             runtimes fail to start a container given it"
        );
    }
}
