#!/usr/bin/env bash
# Builds KubeVirt's functional test binary (which holds its conformance suite) from KubeVirt's source
# snapshot, offline, once: the output is cached under
# $PODVIRT_CACHE/kubevirt-tests/<sha256 of the snapshot>/tests.test. Prints the binary's path last.
# The snapshot is KubeVirt's code (Apache-2.0): it is built and run from the cache, never copied
# into this tree. It is looked for in $KUBEVIRT_SNAPSHOT, then beside the repository
# (../shared/kubevirt/), then /work/shared/kubevirt/, then the copy the first build keeps in the cache
# (a clone elsewhere on this machine finds it there); only the snapshot of SHA256 below is built.
set -euo pipefail

name=kubevirt-src-d923fdb.tar.gz
want=40bb98c535b465dabe6017f0dcccec5cca8cb7e44b5ddeee341d5de0c1769710
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${PODVIRT_CACHE:-/var/cache/podvirt}/kubevirt-tests
dir=$cache/$want
bin=$dir/tests.test
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

snapshot=
for f in "${KUBEVIRT_SNAPSHOT:-}" "$repo/../shared/kubevirt/$name" "/work/shared/kubevirt/$name" "$cache/$name"; do
	if [ -n "$f" ] && [ -f "$f" ]; then snapshot=$f; break; fi
done
[ -n "$snapshot" ] || { echo "conformance: KubeVirt's source snapshot $name not found (set KUBEVIRT_SNAPSHOT to its path)" >&2; exit 2; }
sum=$(sha256sum "$snapshot" | cut -d' ' -f1)
[ "$sum" = "$want" ] || { echo "conformance: $snapshot has sha256 $sum, not $want (KubeVirt d923fdb)" >&2; exit 2; }

mkdir -p "$dir"
exec 9>"$dir/.lock" # one build at a time per snapshot
flock 9
if [ ! -x "$bin" ]; then
	if [ "$snapshot" != "$cache/$name" ]; then
		tmp=$(mktemp "$cache/$name.XXXXXX")
		trap 'rm -f "$tmp"' EXIT
		cp "$snapshot" "$tmp"
		chmod 0644 "$tmp"
		mv "$tmp" "$cache/$name"
	fi
	echo "conformance: building KubeVirt's suite from $name (once, about 7 minutes)" >&2
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	tar xzf "$snapshot" -C "$dir/src"
	(cd "$dir/src" && GOFLAGS=-mod=vendor GOPROXY=off flock -o /tmp/podvirt-heavy.lock \
		go test -tags selinux -c -o "$bin.tmp" ./tests)
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
