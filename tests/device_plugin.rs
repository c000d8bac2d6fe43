//! `cdigen device-plugin` against a fake kubelet (tests/support/kubelet.rs)
//! on copies of fixture machines: registration and the kubelet's checks,
//! ListAndWatch, GetPreferredAllocation, Allocate and PreStartContainer,
//! kubelet restarts, hotplug and health changes under the running plugin,
//! and the device-info files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/kubelet.rs"]
mod kubelet;
#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use kubelet::FakeKubelet;

const WAIT: Duration = Duration::from_secs(30);

/// The plugin over `tmp/root`, sockets in `tmp/plugins`, stderr to
/// `tmp/log`.
struct Plugin {
    child: Child,
}

impl Plugin {
    fn spawn(tmp: &Path, kubelet: &FakeKubelet, extra: &[&str]) -> Plugin {
        let log = fs::File::create(tmp.join("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_cdigen"))
            .current_dir(tmp)
            .args([
                "device-plugin",
                "--root",
                "root",
                "--output-dir",
                "cdi",
                "--devinfo-dir",
                "devinfo",
                "--source",
                "none",
                "--ready-file",
                "ready",
            ])
            .arg("--plugin-dir")
            .arg(&kubelet.dir)
            .arg("--pod-resources-socket")
            .arg(&kubelet.pod_resources)
            .args(extra)
            .env_remove("CDIGEN_ROOT")
            .env_remove("CDIGEN_TEMPLATES")
            .env_remove("CDIGEN_PLUGIN_DIR")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env("RUST_LOG", "info")
            .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Plugin { child }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// SIGTERM, and the exit code.
    fn stop(mut self) -> Option<i32> {
        self.signal("TERM");
        let t = Instant::now();
        while t.elapsed() < WAIT {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        None
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ids(devices: &[cdigen::deviceplugin::api::v1beta1::Device]) -> Vec<(String, String)> {
    devices
        .iter()
        .map(|d| (d.id.clone(), d.health.clone()))
        .collect()
}

#[test]
fn example_machine_registers_lists_and_allocates() {
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    let vf = kubelet.devices("cdigen.io/vf");
    assert_eq!(
        ids(&vf),
        [
            "0000:3b:00.2",
            "0000:3b:00.3",
            "0000:3b:00.4",
            "0000:3b:00.5"
        ]
        .map(|i| (i.to_string(), "Healthy".to_string()))
    );
    assert_eq!(vf[0].topology.as_ref().unwrap().nodes[0].id, 0);
    let r = kubelet
        .allocate("cdigen.io/vf", &["0000:3b:00.2", "0000:3b:00.3"])
        .unwrap();
    let c = &r.container_responses[0];
    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["cdigen.io/vf=0000:3b:00.2", "cdigen.io/vf=0000:3b:00.3"]
    );
    assert_eq!(
        c.envs.get("PCIDEVICE_CDIGEN_IO_VF").map(String::as_str),
        Some("0000:3b:00.2,0000:3b:00.3")
    );
    assert!(tmp.path().join("cdi/cdigen.io-vf.yaml").is_file());
    let err = kubelet
        .allocate("cdigen.io/vf", &["0000:3b:00.9"])
        .unwrap_err();
    assert_eq!(
        err.message(),
        "resource cdigen.io/vf: unknown device ID \"0000:3b:00.9\""
    );
    assert_eq!(plugin.stop(), Some(0));
    assert!(
        !kubelet.dir.join("cdigen-cdigen.io_vf.sock").exists(),
        "its socket is removed on SIGTERM"
    );
    let log = fs::read_to_string(tmp.path().join("log")).unwrap();
    assert!(log.contains("registered"), "{log}");
}
