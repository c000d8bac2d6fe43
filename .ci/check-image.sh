#!/usr/bin/env bash
# Checks an OCI image archive deploy/image.sh wrote (as deploy/release.sh
# does): the oci-layout file, index.json naming one manifest, every blob the
# index, manifest and config name present with the digest and size they
# are named by, the layer's diff_id, the entry point, and /usr/bin/cdigen
# and the static /usr/bin/cdigen-hook in the layer, which run.
# Usage: .ci/check-image.sh cdigen-VERSION-oci.tar
set -euo pipefail
archive=$(realpath "${1:?usage: .ci/check-image.sh IMAGE.tar}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-image: FAIL: $*" >&2; exit 1; }

tar -xf "$archive" -C "$work"
layer=$(python3 - "$work" <<'EOF'
import hashlib, json, os, sys

root = sys.argv[1]
def fail(msg):
    sys.exit(f"check-image: FAIL: {msg}")
def blob(desc, media):
    if desc.get("mediaType") != media:
        fail(f"{desc.get('digest')}: media type {desc.get('mediaType')}, not {media}")
    algo, _, hexd = desc["digest"].partition(":")
    path = os.path.join(root, "blobs", algo, hexd)
    if algo != "sha256" or not os.path.isfile(path):
        fail(f"blob {desc['digest']} missing")
    data = open(path, "rb").read()
    if hashlib.sha256(data).hexdigest() != hexd:
        fail(f"blob {desc['digest']}: content does not match its digest")
    if len(data) != desc["size"]:
        fail(f"blob {desc['digest']}: {len(data)} bytes, named with size {desc['size']}")
    return path, data

if json.load(open(os.path.join(root, "oci-layout"))) != {"imageLayoutVersion": "1.0.0"}:
    fail("oci-layout is not imageLayoutVersion 1.0.0")
index = json.load(open(os.path.join(root, "index.json")))
if index.get("schemaVersion") != 2 or len(index.get("manifests", [])) != 1:
    fail("index.json: not schemaVersion 2 with one manifest")
desc = index["manifests"][0]
name = desc.get("annotations", {}).get("io.containerd.image.name", "")
if not name:
    fail("index.json: no io.containerd.image.name annotation")
_, data = blob(desc, "application/vnd.oci.image.manifest.v1+json")
manifest = json.loads(data)
_, data = blob(manifest["config"], "application/vnd.oci.image.config.v1+json")
config = json.loads(data)
if config["config"].get("Entrypoint") != ["/usr/bin/cdigen"]:
    fail(f"entry point {config['config'].get('Entrypoint')}")
layers = [blob(l, "application/vnd.oci.image.layer.v1.tar")[0] for l in manifest["layers"]]
diff_ids = ["sha256:" + os.path.basename(p) for p in layers]
if config["rootfs"]["diff_ids"] != diff_ids:
    fail(f"config diff_ids {config['rootfs']['diff_ids']} are not the layers' {diff_ids}")
if len(layers) != 1:
    fail(f"{len(layers)} layers, deploy/image.sh writes one")
print(f"check-image: ok: {name}, manifest {desc['digest']}, layer digests match", file=sys.stderr)
print(layers[0])
EOF
) || exit 1
mkdir "$work/root"
tar -xf "$layer" -C "$work/root" ./usr/bin/cdigen ./usr/bin/cdigen-hook
"$work/root/usr/bin/cdigen" --version >/dev/null || fail "the image's cdigen does not run"
if readelf -l "$work/root/usr/bin/cdigen-hook" | grep -q 'program interpreter'; then
  fail "the image's cdigen-hook is not static"
fi
"$work/root/usr/bin/cdigen-hook" --version >/dev/null || fail "the image's cdigen-hook does not run"
echo "check-image: ok: /usr/bin/cdigen runs, /usr/bin/cdigen-hook static and runs"
