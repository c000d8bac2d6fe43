#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::{FileTypeExt as _, symlink};
use std::path::{Path, PathBuf};

use super::*;
use crate::hook::inroot::Resolver;
use crate::hook::test_support::{ReadOnlyMount, listing, mkfifo, with_timeout};

fn dev(path: &str, kind: &str, minor: i64) -> ConfigDevice {
    ConfigDevice {
        path: PathBuf::from(path),
        kind: kind.into(),
        major: Some(195),
        minor: Some(minor),
    }
}

/// GPUs with minors 2 and 5 among the control nodes of a CDI spec.
fn devices() -> Vec<ConfigDevice> {
    vec![
        dev("/dev/nvidia2", "c", 2),
        dev("/dev/nvidia5", "c", 5),
        dev("/dev/nvidiactl", "c", 255),
        dev("/dev/nvidia-modeset", "c", 254),
        dev("/dev/nvidia-uvm", "c", 0),
        dev("/dev/nvidia-caps/nvidia-cap1", "c", 1),
        dev("/dev/dri/renderD128", "c", 128),
        // Not character devices, or not GPU names.
        dev("/dev/nvidia7", "b", 7),
        dev("/dev/nvidia", "c", 9),
        dev("/dev/nvidia12345", "c", 9),
        dev("/dev/nvidia+1", "c", 1),
        dev("/dev/sub/nvidia3", "c", 3),
    ]
}

fn open(root: &Path, resolver: Resolver) -> InRoot {
    InRoot::with_resolver(root, resolver).unwrap()
}

#[test]
fn only_gpu_character_nodes_count() {
    let d = devices();
    let got: Vec<(String, i64)> = gpu_minors(&d)
        .into_iter()
        .map(|(p, m)| (p.display().to_string(), m))
        .collect();
    assert_eq!(
        got,
        [("/dev/nvidia2".into(), 2), ("/dev/nvidia5".into(), 5)]
    );
}

#[test]
fn the_profile_holds_the_mask_of_the_containers_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let got = update_application_profile(&open(tmp.path(), Resolver::Openat2), &devices()).unwrap();
    assert_eq!(
        got,
        Outcome {
            action: Action::Written(0b10_0100),
            skipped: vec![]
        }
    );
    let text = std::fs::read_to_string(tmp.path().join(PROFILE.trim_start_matches('/'))).unwrap();
    assert_eq!(
        text,
        "{\"profiles\":[{\"name\":\"cdigen-container\",\"settings\":[\"EGLVisibleDGPUDevices\",0x24]}],\
\"rules\":[{\"pattern\":[],\"profile\":\"cdigen-container\"}]}\n"
    );
}

#[test]
fn minors_the_mask_cannot_hold_are_skipped_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let d = vec![
        dev("/dev/nvidia63", "c", 63),
        dev("/dev/nvidia64", "c", 64),
        dev("/dev/nvidia1", "c", -1),
    ];
    let got = update_application_profile(&open(tmp.path(), Resolver::Walk), &d).unwrap();
    assert_eq!(
        got,
        Outcome {
            action: Action::Written(1 << 63),
            skipped: vec![("/dev/nvidia64".into(), 64), ("/dev/nvidia1".into(), -1)]
        }
    );
}

#[test]
fn without_gpus_nothing_is_written_and_a_stale_profile_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let none = vec![dev("/dev/nvidiactl", "c", 255)];
    let got = update_application_profile(&open(tmp.path(), Resolver::Openat2), &none).unwrap();
    assert_eq!(
        got.action,
        Action::NoGpus {
            removed_stale: false
        }
    );
    assert!(listing(tmp.path()).is_empty());
    update_application_profile(&open(tmp.path(), Resolver::Openat2), &devices()).unwrap();
    let got = update_application_profile(&open(tmp.path(), Resolver::Openat2), &none).unwrap();
    assert_eq!(
        got.action,
        Action::NoGpus {
            removed_stale: true
        }
    );
    assert!(!tmp.path().join(PROFILE.trim_start_matches('/')).exists());
}

#[test]
fn hostile_profile_directories_stay_inside_the_root() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        // Absolute and relative links that would leave the root on the host.
        for target in ["/", "../../../.."] {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("root");
            std::fs::create_dir_all(root.join("etc")).unwrap();
            symlink(target, root.join("etc/nvidia")).unwrap();
            let outside = |t: &tempfile::TempDir| -> Vec<String> {
                listing(t.path())
                    .into_iter()
                    .filter(|p| !p.starts_with("root"))
                    .collect()
            };
            let before = outside(&tmp);
            let got = update_application_profile(&open(&root, resolver), &devices()).unwrap();
            assert_eq!(got.action, Action::Written(0x24));
            // Either way /etc/nvidia is the root itself.
            assert!(
                root.join("nvidia-application-profiles-rc.d/10-cdigen-container.conf")
                    .is_file(),
                "{resolver:?} {target}"
            );
            assert_eq!(outside(&tmp), before, "{resolver:?} {target}");
        }
    }
}

#[test]
fn a_fifo_where_the_profile_goes_is_an_error_and_never_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join(PROFILE.trim_start_matches('/'));
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    mkfifo(&fifo);
    let r = open(tmp.path(), Resolver::Openat2);
    let e = with_timeout(move || update_application_profile(&r, &devices()).unwrap_err());
    assert_eq!(
        e.to_string(),
        "/etc/nvidia/nvidia-application-profiles-rc.d/10-cdigen-container.conf: a FIFO is there, \
         not a regular file: not replacing it"
    );
    let r = open(tmp.path(), Resolver::Openat2);
    let e = with_timeout(move || update_application_profile(&r, &[]).unwrap_err());
    assert!(e.to_string().ends_with("not removing it"), "{e}");
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_read_only_root_is_reported() {
    let Some(ro) = ReadOnlyMount::new(|_| {}) else {
        return;
    };
    let got = update_application_profile(&open(ro.path(), Resolver::Openat2), &devices()).unwrap();
    assert_eq!(got.action, Action::ReadOnly(0x24));
}
