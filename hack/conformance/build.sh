#!/usr/bin/env bash
# Builds KubeVirt's functional test binary (which holds its conformance suite) from the source snapshot
# in ../shared/kubevirt, offline, once per snapshot: the output is cached under
# $PODVIRT_CACHE/kubevirt-tests/<sha256 of the snapshot>/tests.test. Prints the binary's path last.
# The snapshot is KubeVirt's code (Apache-2.0): it is built and run from the cache, never copied
# into this tree.
set -euo pipefail

snapshot=${KUBEVIRT_SNAPSHOT:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/kubevirt/kubevirt-src-d923fdb.tar.gz}
[ -f "$snapshot" ] || { echo "conformance: KubeVirt's source snapshot not found at $snapshot (set KUBEVIRT_SNAPSHOT)" >&2; exit 2; }
sum=$(sha256sum "$snapshot" | cut -d' ' -f1)
dir=${PODVIRT_CACHE:-/var/cache/podvirt}/kubevirt-tests/$sum
bin=$dir/tests.test
if [ ! -x "$bin" ]; then
	echo "conformance: building KubeVirt's suite from $(basename "$snapshot") (once, about 7 minutes)" >&2
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	tar xzf "$snapshot" -C "$dir/src"
	(cd "$dir/src" && GOFLAGS=-mod=vendor GOPROXY=off flock -o /tmp/podvirt-heavy.lock \
		go test -tags selinux -c -o "$bin.tmp" ./tests)
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
