//! MIG reconfiguration, noticed within seconds: creating or destroying a
//! GPU or compute instance (`nvidia-smi mig -cgi/-dci`) sends no uevent,
//! but the driver adds or removes its capability directories,
//! `/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/ci<C>`. While the
//! last discovery found NVIDIA GPUs, the watch lists those directories
//! every [`POLL`] ([`fingerprint`]: a few directory reads through the
//! root, no file content) and regenerates the NVIDIA generators when the
//! listing changed. `benches/generate.rs` measures one poll.

use std::path::Path;
use std::time::Duration;

use crate::root::{HostRoot, proc_path};
use crate::sysfs::node_number;

/// How often the MIG directories are listed.
pub const POLL: Duration = Duration::from_secs(2);

/// The MIG instances the driver exposes, as the sorted paths of every
/// entry of their directories (`gpu0/gi1`, `gpu0/gi1/access`,
/// `gpu0/gi1/ci0`, `gpu0/gi1/ci0/access`): equal fingerprints mean no
/// instance was created or destroyed. The `access` files count, so that an
/// instance seen half made (its directory before its file) is seen again
/// once whole. Directories that cannot be read count as empty (a GPU
/// gone, MIG off).
pub fn fingerprint(root: &HostRoot) -> Vec<String> {
    let caps = proc_path("driver/nvidia/capabilities");
    let mut out = Vec::new();
    for gpu in root.list_dir_opt(&caps).unwrap_or_default() {
        if node_number(&gpu, "gpu").is_none() {
            continue;
        }
        let mig = caps.join(&gpu).join("mig");
        for gi in entries(root, &mig).filter(|n| node_number(n, "gi").is_some()) {
            let gi_dir = mig.join(&gi);
            for entry in entries(root, &gi_dir) {
                if node_number(&entry, "ci").is_some() {
                    for file in entries(root, &gi_dir.join(&entry)) {
                        out.push(format!("{gpu}/{gi}/{entry}/{file}"));
                    }
                }
                out.push(format!("{gpu}/{gi}/{entry}"));
            }
            out.push(format!("{gpu}/{gi}"));
        }
    }
    out.sort();
    out
}

/// The entry names of `dir` (none when it cannot be listed).
fn entries(root: &HostRoot, dir: &Path) -> impl Iterator<Item = String> {
    root.list_dir_opt(dir).unwrap_or_default().into_iter()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::fs;

    use super::*;

    #[test]
    fn instances_and_their_access_files_make_the_fingerprint() {
        let tmp = tempfile::tempdir().unwrap();
        let caps = tmp.path().join("proc/driver/nvidia/capabilities");
        let fp = || fingerprint(&HostRoot::open(tmp.path()).unwrap());
        // No driver: nothing.
        assert_eq!(fp(), Vec::<String>::new());
        // MIG off: an empty mig/ (a placeholder in fixtures), and the
        // capabilities that are not GPUs.
        fs::create_dir_all(caps.join("gpu0/mig")).unwrap();
        fs::write(caps.join("gpu0/mig/.keep"), "").unwrap();
        fs::create_dir_all(caps.join("mig")).unwrap();
        fs::write(caps.join("mig/config"), "DeviceFileMinor: 1\n").unwrap();
        assert_eq!(fp(), Vec::<String>::new());
        // An instance seen half made, then whole: two changes.
        fs::create_dir_all(caps.join("gpu0/mig/gi1/ci0")).unwrap();
        let half = fp();
        assert_eq!(half, ["gpu0/gi1", "gpu0/gi1/ci0"]);
        fs::write(caps.join("gpu0/mig/gi1/access"), "").unwrap();
        fs::write(caps.join("gpu0/mig/gi1/ci0/access"), "").unwrap();
        assert_eq!(
            fp(),
            [
                "gpu0/gi1",
                "gpu0/gi1/access",
                "gpu0/gi1/ci0",
                "gpu0/gi1/ci0/access"
            ]
        );
        // Another GPU's instance.
        fs::create_dir_all(caps.join("gpu1/mig/gi2")).unwrap();
        assert_eq!(fp().last().map(String::as_str), Some("gpu1/gi2"));
    }
}
