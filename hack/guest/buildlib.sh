# The steps both guest builds share (build.sh: the busybox guest; fedora-like.sh: the Fedora-like
# guest): Debian packages and the image tool's version. Sourced, never run. The caller sets REPO, CACHE
# (its outputs' cache directory; downloaded packages go to $CACHE/debs) and LOG_PREFIX (its messages').

log() { printf '%s: %s\n' "${LOG_PREFIX:-guest}" "$*" >&2; }
die() { printf '%s: error: %s\n' "${LOG_PREFIX:-guest}" "$*" >&2; exit 1; }

# apt_install installs Debian packages on the build host, one apt at a time across builds.
apt_install() {
	log "installing $*"
	flock /var/lib/podvirt-apt.lock apt-get install -y --no-install-recommends "$@" >&2
}

# candidate prints the version apt would download for package $1 (running apt-get update once if needed).
candidate() {
	local v
	v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
	if [[ -z $v || $v == "(none)" ]]; then
		flock /var/lib/podvirt-apt.lock apt-get update >&2
		v=$(apt-cache policy "$1" | awk '/Candidate:/ {print $2}')
	fi
	[[ -n $v && $v != "(none)" ]] || die "apt has no package $1"
	printf '%s\n' "$v"
}

# fetch_deb downloads package $1 at version $2 into the cache (once) and unpacks it; prints the unpack dir.
fetch_deb() {
	local pkg=$1 ver=$2 dir="$CACHE/debs/$1_${2//:/%3a}"
	if [[ ! -e $dir/.unpacked ]]; then
		rm -rf "$dir" && mkdir -p "$dir/deb" "$dir/root"
		(cd "$dir/deb" && apt-get -o APT::Sandbox::User=root download "$pkg=$ver" >&2) || die "apt-get download $pkg=$ver"
		dpkg -x "$dir"/deb/*.deb "$dir/root"
		rm -rf "$dir/deb"
		touch "$dir/.unpacked"
	fi
	printf '%s\n' "$dir/root"
}

# image_tool_key hashes the Go sources of cmd/podvirt-image and the packages of this module it uses.
image_tool_key() {
	(cd "$REPO" && go list -deps -f '{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}' ./cmd/podvirt-image |
		while read -r d; do find "$d" -maxdepth 1 -name '*.go' ! -name '*_test.go'; done |
		LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
}

# prune removes the cache's outputs (the 16-character version-key directories) of other keys than $1.
prune() {
	local d
	for d in "$CACHE"/????????????????; do
		[[ -d $d && ${d##*/} != "$1" ]] && rm -rf "$d"
	done
	return 0
}
