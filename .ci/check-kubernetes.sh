#!/usr/bin/env bash
# Validates the manifests in deploy/kubernetes (`cdigen watch`) and
# deploy/kubernetes/device-plugin (`cdigen device-plugin`) against the
# Kubernetes API schemas (kubernetes-validate, from PyPI, with its bundled
# schemas: no cluster, no network once installed), strictly (unknown fields
# fail), for the oldest version the DaemonSets are written for (1.30:
# recursiveReadOnly) and the newest the validator knows; checks that each
# kustomization.yaml lists exactly the manifests beside it. The kind
# recipe's pod (contrib/kind/pod.yaml) is validated too. Where kubectl is
# installed, every kustomization (contrib/kind's included) is also built and
# its output validated.
# Usage: .ci/check-kubernetes.sh   (run from the repository root)
set -euo pipefail
version=1.37.0   # kubernetes-validate; its default schema version is the same
venv=target/ci-venv
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi

# validate FILE...: strictly, for both Kubernetes versions.
validate() {
    local k8s
    for k8s in 1.30.0 "$version"; do
        "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k8s" "$@"
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
    listed=$(sed -n 's/^  - \(.*\.yaml\)$/\1/p' "$dir/kustomization.yaml" | sort)
    present=$(for f in "${manifests[@]}"; do basename "$f"; done | sort)
    [ "$listed" = "$present" ] || {
        echo "$dir/kustomization.yaml lists: $listed; present: $present" >&2
        exit 1
    }
}

check_dir deploy/kubernetes
check_dir deploy/kubernetes/device-plugin
# kustomize loads no file from outside a kustomization's directory, so the
# device plugin has its own copy of the namespace; it must stay the same.
cmp deploy/kubernetes/namespace.yaml deploy/kubernetes/device-plugin/namespace.yaml || {
    echo "deploy/kubernetes/device-plugin/namespace.yaml differs from deploy/kubernetes/namespace.yaml" >&2
    exit 1
}
validate contrib/kind/pod.yaml

if command -v kubectl >/dev/null; then
    rendered=$(mktemp -d)
    trap 'rm -rf "$rendered"' EXIT
    for dir in deploy/kubernetes deploy/kubernetes/device-plugin contrib/kind; do
        out="$rendered/$(tr / - <<< "$dir").yaml"
        kubectl kustomize "$dir" > "$out"
        validate "$out"
    done
else
    echo "check-kubernetes: kubectl not found: kustomizations not built" >&2
fi
echo "check-kubernetes: ok"
