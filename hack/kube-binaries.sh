#!/usr/bin/env bash
# Builds Kubernetes and etcd binaries from the Go module proxy and caches them by version.
#
#   hack/kube-binaries.sh [BINARY...]     (default: all)
#
# BINARY is one of kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd.
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces staging modules with local paths), so
# this writes a small wrapper module that requires it and replaces each staging module with its
# published tag, then builds from there. Prints the directory holding the binaries on stdout.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
CACHE=${PODVIRT_CACHE:-/var/cache/podvirt}
BIN="$CACHE/bin/kubernetes-$KUBE_VERSION-etcd-$ETCD_VERSION"
all=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

missing=()
for b in "${want[@]}"; do
  case " ${all[*]} " in *" $b "*) ;; *) echo "kube-binaries: unknown binary '$b' (want one of: ${all[*]})" >&2; exit 2 ;; esac
  [ -x "$BIN/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"

staging_minor=${KUBE_VERSION#v1.}   # 36.3 -> staging modules are tagged v0.36.3
staging_tag="v0.$staging_minor"

wrap_kube() {
  local dir="$CACHE/src/kubernetes-$KUBE_VERSION"
  if [ ! -f "$dir/go.sum" ]; then
    mkdir -p "$dir"
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    {
      echo "module podvirt.local/kubebuild"
      echo "go 1.26"
      echo "require k8s.io/kubernetes $KUBE_VERSION"
      sed -n '/^replace (/,/^)/p' "$gomod" | grep -o 'k8s.io/[a-z0-9-]* =>' | sed "s/ =>//" |
        while read -r m; do echo "replace $m => $m $staging_tag"; done
    } > "$dir/go.mod"
    cat > "$dir/tools.go" <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    (cd "$dir" && go mod tidy -e >&2)
  fi
  echo "$dir"
}

wrap_etcd() {
  local dir="$CACHE/src/etcd-$ETCD_VERSION"
  if [ ! -f "$dir/go.sum" ]; then
    mkdir -p "$dir"
    cat > "$dir/go.mod" <<MOD
module podvirt.local/etcdbuild
go 1.26
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
MOD
    cat > "$dir/tools.go" <<GO
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
    (cd "$dir" && go mod tidy -e >&2)
  fi
  echo "$dir"
}

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
major=1; minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
stamp=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  stamp+=" -X $p.gitTreeState=clean -X $p.buildDate=$now"
done

for b in "${missing[@]}"; do
  start=$(date +%s)
  if [ "$b" = etcd ]; then
    dir=$(wrap_etcd)
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN/.$b.tmp" go.etcd.io/etcd/server/v3)
  else
    dir=$(wrap_kube)
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $stamp" -o "$BIN/.$b.tmp" "k8s.io/kubernetes/cmd/$b")
  fi
  mv "$BIN/.$b.tmp" "$BIN/$b"
  echo "kube-binaries: built $b in $(( $(date +%s) - start ))s" >&2
done
echo "$BIN"
