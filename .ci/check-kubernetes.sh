#!/usr/bin/env bash
# Validates the manifests in deploy/kubernetes (`cdigen watch`),
# deploy/kubernetes/device-plugin (`cdigen device-plugin`) and
# deploy/kubernetes/dra (`cdigen dra-driver`, with its examples/) against
# the Kubernetes API schemas (kubernetes-validate, from PyPI, with its
# bundled schemas: no cluster, no network once installed), strictly
# (unknown fields fail), for the oldest version they are written for (1.30:
# recursiveReadOnly; 1.34 for the DRA manifests, resource.k8s.io/v1) and the
# newest the validator knows; a kind the validator has no schema for fails
# (it would only warn). The golden ResourceSlices of `cdigen dra-driver
# --print-slices` (fixtures/*/expected/dra/*.yaml) are validated the same
# way for 1.34 and the newest. Checks that each kustomization.yaml lists
# exactly the manifests beside it. The kind recipe's pod
# (contrib/kind/pod.yaml) is validated too. Where kubectl is installed,
# every kustomization (contrib/kind's included) is also built and its
# output validated.
# Usage: .ci/check-kubernetes.sh   (run from the repository root)
set -euo pipefail
version=1.37.0   # kubernetes-validate; its default schema version is the same
venv=target/ci-venv
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi

# The oldest Kubernetes version validated against: 1.30 by default, 1.34
# for the DRA manifests (resource.k8s.io/v1 is GA there; an older schema
# does not have the kinds).
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

# DRA: resource.k8s.io/v1 (Kubernetes >= 1.34). DeviceClass's
# extendedResourceName (KEP-5004, alpha in 1.34) is in the 1.34 schema, so
# the examples are validated against 1.34 and the newest like the rest.
oldest=1.34.0
check_dir deploy/kubernetes/dra
check_dir deploy/kubernetes/dra/examples
cmp deploy/kubernetes/namespace.yaml deploy/kubernetes/dra/namespace.yaml || {
    echo "deploy/kubernetes/dra/namespace.yaml differs from deploy/kubernetes/namespace.yaml" >&2
    exit 1
}
slices=(fixtures/*/expected/dra/*.yaml)
if [ "${#slices[@]}" -lt 5 ] || [ ! -e "${slices[0]}" ]; then
    echo "no golden ResourceSlices in fixtures/*/expected/dra/" >&2
    exit 1
fi
validate "${slices[@]}"
oldest=1.30.0

if command -v kubectl >/dev/null; then
    rendered=$(mktemp -d)
    trap 'rm -rf "$rendered"' EXIT
    for dir in deploy/kubernetes deploy/kubernetes/device-plugin contrib/kind \
        deploy/kubernetes/dra deploy/kubernetes/dra/examples; do
        case $dir in
            deploy/kubernetes/dra*) oldest=1.34.0 ;;
            *) oldest=1.30.0 ;;
        esac
        out="$rendered/$(tr / - <<< "$dir").yaml"
        kubectl kustomize "$dir" > "$out"
        validate "$out"
    done
else
    echo "check-kubernetes: kubectl not found: kustomizations not built" >&2
fi
echo "check-kubernetes: ok"
