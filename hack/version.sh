#!/usr/bin/env bash
# Prints the -ldflags that stamp internal/version with this checkout's release, as kubectl and
# KubeVirt stamp theirs:
#   gitVersion    `git describe` of the newest v* tag (v1.2.3, v1.2.3-4-gabcdef123456), or, with no
#                 tag yet, VERSION (v0.1.0-dev) + the commit: v0.1.0-dev+abcdef123456; -dirty when
#                 the tree has changes
#   gitCommit     the full commit hash
#   gitTreeState  clean or dirty (any change git status shows, untracked files included)
#   buildDate     the commit's date (UTC): the same commit builds the same binaries and images
#
#   hack/version.sh              the ldflags for this checkout
#   hack/version.sh v1.2.3       the same with gitVersion v1.2.3 (a release: make release VERSION=…)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pkg=github.com/podvirt/podvirt/internal/version
if ! commit=$(git rev-parse HEAD 2>/dev/null); then
  exit 0 # not a git checkout: binaries report "(devel)"
fi
state=clean
[ -z "$(git --no-optional-locks status --porcelain 2>/dev/null)" ] || state=dirty
if ! v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 2>/dev/null); then
  v="${VERSION:-v0.1.0-dev}+$(git rev-parse --short=12 HEAD)"
fi
[ "$state" = clean ] || v="$v-dirty"
[ -z "${1:-}" ] || v=$1
# The version lands in -ldflags inside quotes of make recipes: a tag or VERSION with anything but
# these characters is refused, not passed on (a tag name may hold quotes, $ and ;).
if ! [[ $v =~ ^[0-9A-Za-z.+_-]+$ ]]; then
  echo "version.sh: refusing version '$v': only letters, digits and . + _ - are allowed" >&2
  exit 1
fi
date=$(TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
printf -- '-X %s.gitVersion=%s -X %s.gitCommit=%s -X %s.gitTreeState=%s -X %s.buildDate=%s\n' \
  "$pkg" "$v" "$pkg" "$commit" "$pkg" "$state" "$pkg" "$date"
