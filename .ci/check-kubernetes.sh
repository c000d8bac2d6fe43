#!/usr/bin/env bash
# Validates the manifests in deploy/kubernetes against the Kubernetes API
# schemas (kubernetes-validate, from PyPI, with its bundled schemas: no
# cluster, no network once installed), strictly (unknown fields fail), for
# the oldest version the DaemonSet is written for (1.30: recursiveReadOnly)
# and the newest the validator knows.
# Usage: .ci/check-kubernetes.sh   (run from the repository root)
set -euo pipefail
version=1.37.0   # kubernetes-validate; its default schema version is the same
venv=target/ci-venv
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi
manifests=()
for f in deploy/kubernetes/*.yaml; do
    # kustomization.yaml is kustomize's, not an API object.
    [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
done
for k8s in 1.30.0 "$version"; do
    "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k8s" "${manifests[@]}"
done
# Every resource kustomization.yaml lists exists, and every manifest is listed.
listed=$(sed -n 's/^  - \(.*\.yaml\)$/\1/p' deploy/kubernetes/kustomization.yaml | sort)
present=$(for f in "${manifests[@]}"; do basename "$f"; done | sort)
[ "$listed" = "$present" ] || { echo "kustomization.yaml lists: $listed; present: $present" >&2; exit 1; }
echo "check-kubernetes: ok"
