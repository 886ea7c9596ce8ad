#!/usr/bin/env bash
# Cross-compiles virtctl as kubectl-virt for each PLATFORM (os/arch), packs each into an archive
# (tar.gz; zip for windows) with a sha256 sum, and renders the krew manifest krew/out/virt.yaml from
# krew/virt.yaml.tmpl.
#   hack/krew/release.sh OUT_DIR VERSION URL_BASE PLATFORM...
set -euo pipefail
out=$1 version=$2 url_base=$3; shift 3
[ $# -gt 0 ] || { echo "release: no platforms" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out"
stamp=$(hack/version.sh "$version") # every archive's kubectl-virt reports the release (virtctl version)
platforms=""
for p in "$@"; do
  os=${p%/*} arch=${p#*/}
  bin=kubectl-virt; [ "$os" = windows ] && bin=kubectl-virt.exe
  stage=$(mktemp -d)
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="-s -w $stamp" -o "$stage/$bin" ./cmd/virtctl
  name=kubectl-virt_${os}_${arch}
  if [ "$os" = windows ]; then
    archive=$name.zip; (cd "$stage" && zip -q "$OLDPWD/$out/$archive" "$bin")
  else
    archive=$name.tar.gz; tar -C "$stage" -czf "$out/$archive" "$bin"
  fi
  rm -rf "$stage"
  sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
  echo "$sum  $archive" >> "$out/sha256sums.txt"
  platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url_base/$archive
    sha256: $sum
    bin: $bin
    files:
    - from: $bin
      to: .
"
  echo "release: $out/$archive ($(du -h "$out/$archive" | cut -f1))"
done
awk -v version="$version" -v platforms="$platforms" '
  /^#/ && NR <= 2 { next }
  { gsub(/{{VERSION}}/, version) }
  /{{PLATFORMS}}/ { printf "%s", platforms; next }
  { print }' krew/virt.yaml.tmpl > "$out/virt.yaml"
echo "release: $out/virt.yaml"
