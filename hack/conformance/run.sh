#!/usr/bin/env bash
# Runs KubeVirt's conformance suite (hack/conformance/build.sh) against the local cluster, as
# KubeVirt's hack/conformance.sh selects it: the specs labelled conformance, skipping [Disruptive],
# and (there is no outside network here) those labelled RequiresOutsideConnectivity.
#   run.sh OUTDIR [FOCUS-REGEX]
# FOCUS-REGEX narrows the run to the specs whose names match (ginkgo --focus), e.g. test ids.
# Writes OUTDIR/junit.xml and OUTDIR/run.log; the exit code is the suite's.
# Environment: KUBECONFIG, KUBECTL (binary), VIRTCTL (binary), CONFORMANCE_TIMEOUT (default 3h),
# CONFORMANCE_SKIP_FILES: FILE:LINE of specs to leave out (ginkgo --skip-file), e.g. those needing a
# guest image Podvirt does not build yet: they are reported as skipped and count as failed.
set -euo pipefail

out=${1:?usage: run.sh OUTDIR [FOCUS-REGEX]}
focus=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
bin=$("$here/build.sh" | tail -n 1)
: "${KUBECONFIG:?set KUBECONFIG}" "${KUBECTL:?set KUBECTL}" "${VIRTCTL:?set VIRTCTL}"

filter='(conformance)&&(!RequiresOutsideConnectivity)'

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/artifacts" "$out/junit.xml" "$out/run.log" "$out/config.json" # this script's files only
mkdir -p "$out/artifacts"
# The suite's storage classes (tests/default-config.json names): the local cluster's hostPath
# provisioner for read-write-once filesystems; none for block, read-write-many or snapshots, so
# specs that need those skip or fail saying so.
echo '{"storageClassRhel":"podvirt-local","storageClassWindows":"podvirt-local","storageRWOFileSystem":"podvirt-local"}' > "$out/config.json"

# Leftover test namespaces of an aborted run break the next one's set-up.
for ns in kubevirt-test-default1 kubevirt-test-alternative1 kubevirt-test-operator1 kubevirt-test-privileged1; do
	"$KUBECTL" delete namespace "$ns" --ignore-not-found --wait=true --timeout=5m >/dev/null
done

skips=()
for f in ${CONFORMANCE_SKIP_FILES:-}; do skips+=("--ginkgo.skip-file=$f"); done
echo "conformance: label filter $filter${focus:+, focus $focus}${CONFORMANCE_SKIP_FILES:+, left out $CONFORMANCE_SKIP_FILES}" >&2
rc=0
(cd "$out" && "$bin" \
	--kubeconfig="$KUBECONFIG" \
	--kubectl-path="$KUBECTL" \
	--virtctl-path="$VIRTCTL" \
	--installed-namespace=podvirt \
	--container-prefix=docker.io/podvirt \
	--container-tag=dev \
	--config="$out/config.json" \
	--artifacts="$out/artifacts" \
	--skip-dual-stack-test \
	--ginkgo.label-filter="$filter" \
	--ginkgo.skip='\[Disruptive\]' \
	${focus:+--ginkgo.focus="$focus"} \
	"${skips[@]}" \
	--ginkgo.junit-report="$out/junit.xml" \
	--ginkgo.timeout="${CONFORMANCE_TIMEOUT:-3h}" \
	--ginkgo.fail-on-empty \
	--ginkgo.no-color \
	--ginkgo.v) >"$out/run.log" 2>&1 || rc=$?
tail -n 30 "$out/run.log" >&2
exit "$rc"
