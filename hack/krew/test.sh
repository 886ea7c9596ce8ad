#!/usr/bin/env bash
# Installs the kubectl virt plugin with the real krew CLI, as a user does from a release
# (krew install --manifest --archive) into a temporary KREW_ROOT, then checks that the real kubectl
# finds it and that it runs as `kubectl virt`. Builds this machine's platform only.
set -euo pipefail
out=krew/out
krew=$(hack/krew/build.sh)
kubectl=$(hack/kube-binaries.sh kubectl)/kubectl
platform=$(go env GOOS)/$(go env GOARCH)
archive=$out/kubectl-virt_$(go env GOOS)_$(go env GOARCH).tar.gz
hack/krew/release.sh "$out" "${VERSION:-v0.1.0-dev}" "https://github.com/podvirt/podvirt/releases/download/${VERSION:-v0.1.0-dev}" "$platform"
root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
KREW_ROOT=$root KREW_NO_UPGRADE_CHECK=1 "$krew" install --manifest="$out/virt.yaml" --archive="$archive"
export PATH=$root/bin:$PATH
fail() { echo "krew-test: FAILED: $*" >&2; exit 1; }
"$kubectl" plugin list 2>/dev/null | grep -q "$root/bin/kubectl-virt" || fail "kubectl plugin list does not show $root/bin/kubectl-virt"
"$kubectl" virt version --client | grep -q '^Client Version: ' || fail "kubectl virt version --client printed no version"
"$kubectl" virt --help | grep -q 'kubectl virt \[command\]' || fail "kubectl virt --help does not call itself kubectl virt"
msg=$("$kubectl" virt stop vm --force 2>&1) && fail "kubectl virt stop --force without --grace-period succeeded"
grep -q "see 'kubectl virt stop --help'" <<<"$msg" || fail "the plugin's error does not say kubectl virt: $msg"
echo "krew-test: kubectl virt installed with krew ($("$krew" version 2>/dev/null | grep -m1 GitTag || true)) and runs as the kubectl plugin"
