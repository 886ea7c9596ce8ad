#!/usr/bin/env bash
# Builds the krew CLI (kubernetes-sigs/krew at commit db921d5, Apache-2.0; its source snapshot is
# krew-src-db921d5.tar.gz beside this script because the Go module proxy does not serve krew; its
# dependencies come from the proxy) and caches it by the snapshot's name. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
snapshot=krew-src-db921d5
out=${PODVIRT_CACHE:-/var/cache/podvirt}/bin/$snapshot/krew
if [ ! -x "$out" ]; then
  src=$(mktemp -d); trap 'rm -rf "$src"' EXIT
  tar -xzf "$here/$snapshot.tar.gz" -C "$src"
  mkdir -p "$(dirname "$out")"
  (cd "$src/krew" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" ./cmd/krew) >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
