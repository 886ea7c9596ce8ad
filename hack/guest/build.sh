#!/usr/bin/env bash
# Builds the Podvirt demo guest from Debian packages only and caches it by a version key:
#   ${PODVIRT_CACHE:-/var/cache/podvirt}/guest/<key>/{vmlinuz,initramfs.gz,demo.qcow2,alpine.qcow2,*.tar}
#
#   hack/guest/build.sh            build everything (kernel, initramfs, bootable disk, OCI image tarballs)
#   hack/guest/build.sh kernel     build (or reuse) only the kernel and print its path
#   hack/guest/build.sh dir        print the output directory of the current sources (built or not)
#   hack/guest/build.sh import     build, then import both image tarballs into the local cluster
#
#   hack/guest/build.sh verify-kernel   rebuild the committed kernel from its recorded source and compare
#   hack/guest/build.sh update-kernel   build the kernel from today's linux-source and commit it to hack/guest/prebuilt
#
# Inputs: the kernel, busybox-static (the whole userland but the guest agent), qemu-guest-agent and the
# libraries it loads, syslinux + syslinux-common (MBR and FAT bootloader).
# The kernel is linux-source-6.1 built from hack/guest/kernel.config on top of tinyconfig, no modules. A
# build of it is committed in hack/guest/prebuilt (a cold make demo would spend 5 minutes of its 15
# compiling it); it is used while it was built from the current kernel.config, and verify-kernel shows it
# is what the source gives. PODVIRT_GUEST_KERNEL=source builds from source instead. Heavy steps run under
# nice; kernels built from source are cached by the linux-source version and config hash.
set -euo pipefail
shopt -s inherit_errexit # a failing step inside $(...) fails the build too

GUEST_RELEASE=1.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${PODVIRT_CACHE:-/var/cache/podvirt}/guest
JOBS=${GUEST_JOBS:-2}
KERNELBOOT_REF=docker.io/podvirt/demo-kernelboot:dev
CONTAINERDISK_REFS=(docker.io/podvirt/demo-containerdisk:dev docker.io/kubevirt/cirros-container-disk-demo:latest)
# The Alpine-like flavour, under the names KubeVirt's tests use for Alpine (docs/guest-images.md).
ALPINE_REFS=(docker.io/podvirt/alpine-container-disk-demo:dev docker.io/podvirt/alpine-with-test-tooling-container-disk:dev)

# shellcheck source=hack/guest/buildlib.sh
source "$HERE/buildlib.sh"

# ensure_tools installs the host tools this build uses, quickly when they are already there; with
# argument "kernel", also those a kernel build from source needs.
ensure_tools() {
	local missing=() pair pairs=(cpio:cpio mkfs.vfat:dosfstools mcopy:mtools syslinux:syslinux sfdisk:fdisk
		qemu-img:qemu-utils genisoimage:genisoimage)
	[[ ${1:-} == kernel ]] && pairs+=(gcc:gcc make:make bc:bc flex:flex bison:bison xz:xz-utils)
	for pair in "${pairs[@]}"; do
		command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
	done
	if [[ ${1:-} == kernel ]]; then
		[[ -e /usr/include/libelf.h ]] || missing+=(libelf-dev)
		[[ -e /usr/include/openssl/ssl.h ]] || missing+=(libssl-dev)
	fi
	[[ -d /usr/lib/syslinux/mbr ]] || missing+=(syslinux-common)
	[[ -e /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ]] || missing+=(syslinux-efi)
	((${#missing[@]} == 0)) && return 0
	apt_install "${missing[@]}"
}

PREBUILT=$HERE/prebuilt

# prebuilt_field prints field $1 of the committed kernel's record (hack/guest/prebuilt/kernel.env).
prebuilt_field() {
	sed -n "s/^$1=//p" "$PREBUILT/kernel.env"
}

# use_prebuilt succeeds when the committed kernel was built from the current kernel.config and
# PODVIRT_GUEST_KERNEL does not ask for a build from source.
use_prebuilt() {
	case ${PODVIRT_GUEST_KERNEL:-prebuilt} in
	prebuilt) ;;
	source) return 1 ;;
	*) die "PODVIRT_GUEST_KERNEL=${PODVIRT_GUEST_KERNEL}: want prebuilt or source" ;;
	esac
	[[ -e $PREBUILT/kernel.env ]] && [[ $(prebuilt_field KERNEL_CONFIG_SHA256) == "$(config_sha)" ]]
}

# config_sha is the sha256 of hack/guest/kernel.config.
config_sha() {
	sha256sum "$HERE/kernel.config" | cut -d' ' -f1
}

# kernel_id names the kernel the guest gets: the committed one by its sha256, or one built from
# source by the linux-source-6.1 version.
kernel_id() {
	if use_prebuilt; then echo "prebuilt $(prebuilt_field KERNEL_SHA256)"; else echo "source $(candidate linux-source-6.1)"; fi
}

# kernel prints the path of the guest's bzImage (next to it: config, release): the committed one when
# it matches kernel.config, otherwise one built from today's linux-source.
kernel() {
	if ! use_prebuilt; then
		ensure_tools kernel
		source_kernel "$(candidate linux-source-6.1)"
		return
	fi
	local want
	want=$(prebuilt_field KERNEL_SHA256)
	[[ $(sha256sum "$PREBUILT/bzImage" | cut -d' ' -f1) == "$want" ]] ||
		die "hack/guest/prebuilt/bzImage is not the kernel its kernel.env records (sha256 $want)"
	printf '%s\n' "$PREBUILT/bzImage"
}

# KERNEL_RECIPE names how source_kernel builds; a change to the steps that can change the bytes
# takes a new one, so no kernel built the old way is reused.
KERNEL_RECIPE=2

# source_kernel builds the bzImage from linux-source-6.1 version $1 with hack/guest/kernel.config
# into the cache directory named $2 (default "kernel"), reusing a build there; prints the bzImage
# path. Next to it: config, release, toolchain.
source_kernel() {
	local srcver=$1 cfghash out src work
	cfghash=$(config_sha)
	cfghash=${cfghash:0:12}
	out="$CACHE/${2:-kernel}/${srcver}-${cfghash}-r$KERNEL_RECIPE"
	if [[ -e $out/bzImage && -e $out/toolchain ]]; then
		printf '%s\n' "$out/bzImage"
		return 0
	fi
	src=$(fetch_deb linux-source-6.1 "$srcver")
	# The build's date is the source package's (its changelog's last entry), so the same source gives
	# the same bytes: the kernel prints it in its version, and dates its built-in initramfs with it
	# (it must parse as a date, or that initramfs gets the time of the build).
	local stamp
	stamp=$(zcat "$src/usr/share/doc/linux-source-6.1/changelog.Debian.gz" | awk '/^ -- / && !found {sub(/^ -- .*>  /, ""); print; found = 1}')
	[[ -n $stamp ]] && date -d "$stamp" >/dev/null 2>&1 || die "no date in linux-source-6.1 $srcver's changelog (got '$stamp')"
	work="$CACHE/tmp/kernel-$$"
	rm -rf "$work" && mkdir -p "$work"
	log "unpacking linux-source $srcver"
	tar -C "$work" -xJf "$src"/usr/src/linux-source-6.1.tar.xz || die "unpacking linux-source $srcver failed"
	local tree="$work/linux-source-6.1"
	make -s -C "$tree" tinyconfig >&2 || die "make tinyconfig failed"
	grep -v '^#' "$HERE/kernel.config" | grep . >>"$tree/.config"
	make -s -C "$tree" olddefconfig >&2 2>/dev/null || die "make olddefconfig failed"
	local line
	while read -r line; do
		grep -qx "$line" "$tree/.config" || die "kernel option $line did not survive olddefconfig"
	done < <(grep -v '^#' "$HERE/kernel.config" | grep .)
	log "building kernel $srcver (nice -n 19 make -j$JOBS, several minutes)"
	local start=$SECONDS
	KBUILD_BUILD_TIMESTAMP="$stamp" KBUILD_BUILD_USER=podvirt KBUILD_BUILD_HOST=podvirt \
		nice -n 19 make -C "$tree" -j"$JOBS" bzImage >"$work/build.log" 2>&1 ||
		{ tail -40 "$work/build.log" >&2; die "kernel build failed (log: $work/build.log)"; }
	log "kernel built in $((SECONDS - start)) s"
	rm -rf "$out.tmp" && mkdir -p "$out.tmp"
	cp "$tree/arch/x86/boot/bzImage" "$out.tmp/bzImage" &&
		cp "$tree/.config" "$out.tmp/config" &&
		make -s -C "$tree" kernelrelease >"$out.tmp/release" &&
		toolchain >"$out.tmp/toolchain" || die "saving the kernel build failed"
	rm -rf "$out" && mv "$out.tmp" "$out"
	rm -rf "$work" "$(dirname "$src")" # the source package is 139 MB; apt-get download is quick when needed again
	printf '%s\n' "$out/bzImage"
}

# toolchain prints the Debian versions of what compiles, links and compresses a kernel, comma-separated.
toolchain() {
	local out
	out=$(dpkg-query -W -f '${Package}=${Version}\n' "gcc-$(gcc -dumpversion)" binutils xz-utils make libc6) ||
		die "cannot read the toolchain's versions (dpkg-query)"
	paste -sd , <<<"$out"
}

# verify_kernel rebuilds the committed kernel from the linux-source version and kernel.config it
# records, in a cache of its own that only it writes (so never from what update-kernel built), and
# compares bzImage, config and release. It fails when they differ, and when it cannot rebuild: the
# source no longer served by Debian, or another toolchain than the record's (both mean: run make
# guest-kernel-update and commit).
verify_kernel() {
	[[ -e $PREBUILT/kernel.env ]] || die "no committed kernel (hack/guest/prebuilt/kernel.env)"
	use_prebuilt || die "hack/guest/kernel.config changed since the committed kernel was built: run make guest-kernel-update"
	local srcver want bz got tc served f
	srcver=$(prebuilt_field KERNEL_SOURCE)
	want=$(prebuilt_field KERNEL_SHA256)
	ensure_tools kernel
	candidate linux-source-6.1 >/dev/null # makes sure apt's lists exist
	served=$(apt-cache madison linux-source-6.1 | awk '{print $3}')
	grep -qxF "$srcver" <<<"$served" ||
		die "cannot verify the committed kernel: Debian no longer serves linux-source-6.1 $srcver" \
			"(it serves $(paste -sd ' ' <<<"$served")); run make guest-kernel-update and commit hack/guest/prebuilt"
	tc=$(toolchain)
	[[ $tc == "$(prebuilt_field KERNEL_TOOLCHAIN)" ]] ||
		die "cannot verify the committed kernel: it was built with $(prebuilt_field KERNEL_TOOLCHAIN), this machine has $tc;" \
			"run make guest-kernel-update and commit hack/guest/prebuilt"
	bz=$(source_kernel "$srcver" kernel-verify)
	got=$(sha256sum "$bz" | cut -d' ' -f1)
	[[ $got == "$want" ]] ||
		die "the committed kernel is not what linux-source $srcver + kernel.config + $tc give: sha256 $want committed, $got built ($bz)"
	for f in config release; do
		cmp -s "$(dirname "$bz")/$f" "$PREBUILT/$f" || die "hack/guest/prebuilt/$f is not the $f of the build from source ($(dirname "$bz")/$f)"
	done
	log "committed kernel verified: linux-source $srcver + kernel.config + $tc give sha256 $want"
}

# update_kernel builds the kernel from today's linux-source-6.1 and kernel.config and writes it, with
# its record, into hack/guest/prebuilt, to be committed.
update_kernel() {
	ensure_tools kernel
	local srcver bz dir
	srcver=$(candidate linux-source-6.1)
	rm -rf "$CACHE/kernel-update"
	bz=$(source_kernel "$srcver" kernel-update)
	dir=$(dirname "$bz")
	mkdir -p "$PREBUILT"
	cp "$bz" "$PREBUILT/bzImage"
	cp "$dir/config" "$PREBUILT/config"
	cp "$dir/release" "$PREBUILT/release"
	cat >"$PREBUILT/kernel.env" <<-EOF
		# The demo guest's kernel (bzImage; its full config and release beside it), committed so that a cold
		# make demo does not compile it. Written by make guest-kernel-update; make guest-kernel-verify (in
		# make test) rebuilds it from this record and compares.
		# KERNEL_TOOLCHAIN: the Debian versions of gcc, binutils, xz-utils, make and libc6 it was built with.
		KERNEL_SOURCE=$srcver
		KERNEL_CONFIG_SHA256=$(config_sha)
		KERNEL_TOOLCHAIN=$(cat "$dir/toolchain")
		KERNEL_SHA256=$(sha256sum "$bz" | cut -d' ' -f1)
	EOF
	rm -rf "$CACHE/kernel-update"
	log "wrote hack/guest/prebuilt from linux-source $srcver: commit it"
}

# syslinux_version is the installed syslinux (the disk's bootloader comes from the host's packages).
syslinux_version() {
	dpkg-query -W -f '${Package}=${Version} ' syslinux syslinux-common syslinux-efi
}

# version_key hashes every input of the guest: the build script, kernel config, committed kernel, rootfs
# files and package versions.
version_key() {
	{
		printf '%s\n' "$GUEST_RELEASE" "$@"
		(cd "$HERE" && find build.sh buildlib.sh kernel.config prebuilt rootfs -type f -print0 | LC_ALL=C sort -z |
			xargs -0 sha256sum)
		(cd "$HERE" && find rootfs -perm -u+x -type f | LC_ALL=C sort)
	} | sha256sum | cut -c1-16
}

# QGA_PACKAGES are the Debian packages of the guest agent: qemu-ga and the libraries it loads (the
# rest of the guest is static busybox, so these are the only shared objects in it).
QGA_PACKAGES=(qemu-guest-agent libc6 libglib2.0-0 libpcre2-8-0 libudev1 libcap2 libnuma1 liburing2)

# qga_versions prints "package=version" of each of QGA_PACKAGES, as apt would download them today.
qga_versions() {
	local pkg
	for pkg in "${QGA_PACKAGES[@]}"; do printf '%s=%s\n' "$pkg" "$(candidate "$pkg")"; done
}

# install_qga installs qemu-ga (from the package versions $2, one "package=version" a line) and the
# shared objects it needs, found by their NEEDED entries in those packages, into the stage $1; it
# fails naming a library none of them holds.
install_qga() {
	local stage=$1 line roots=() todo=() seen=" ld-linux-x86-64.so.2 " so root found
	while IFS= read -r line; do roots+=("$(fetch_deb "${line%%=*}" "${line#*=}")"); done <<<"$2"
	install -D -m 0755 "${roots[0]}/usr/sbin/qemu-ga" "$stage/usr/sbin/qemu-ga"
	mkdir -p "$stage/lib/x86_64-linux-gnu" "$stage/lib64"
	install -m 0755 "${roots[1]}/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$stage/lib/x86_64-linux-gnu/"
	ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$stage/lib64/ld-linux-x86-64.so.2"
	mapfile -t todo < <(needed "$stage/usr/sbin/qemu-ga")
	while ((${#todo[@]})); do
		so=${todo[0]} todo=("${todo[@]:1}")
		[[ $seen == *" $so "* ]] && continue
		seen+="$so "
		found=
		for root in "${roots[@]}"; do
			for found in "$root"/{lib,usr/lib}/x86_64-linux-gnu/"$so"; do [[ -e $found ]] && break 2; done
			found=
		done
		[[ -n $found ]] || die "qemu-ga needs $so, which none of ${QGA_PACKAGES[*]} holds"
		install -m 0644 "$(readlink -f "$found")" "$stage/lib/x86_64-linux-gnu/$so"
		mapfile -t -O "${#todo[@]}" todo < <(needed "$found")
	done
}

# needed prints the NEEDED shared objects of the ELF file $1.
needed() {
	readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

# initramfs packs busybox-static, the guest agent and hack/guest/rootfs into a reproducible gzip'd
# newc cpio at $2.
initramfs() {
	local busybox=$1 out=$2 release=$3 qga=$4 stage
	stage=$(mktemp -d "$CACHE/tmp/initramfs.XXXXXX")
	cp -a "$HERE/rootfs/." "$stage/"
	mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,root,var/www}
	install -m 0755 "$busybox/bin/busybox" "$stage/bin/busybox"
	ln -s busybox "$stage/bin/sh"
	install_qga "$stage" "$qga"
	mknod -m 600 "$stage/dev/console" c 5 1
	mknod -m 666 "$stage/dev/null" c 1 3
	printf '%s\n' "$release" >"$stage/etc/podvirt/release"
	# What the guest agent reports as the guest's operating system (guest-get-osinfo).
	cat >"$stage/etc/os-release" <<-EOF
		NAME="Podvirt demo guest"
		ID=podvirt
		VERSION_ID=$release
		VERSION="$release (busybox)"
		PRETTY_NAME="Podvirt demo guest $release"
	EOF
	cat >"$stage/var/www/index.html" <<-EOF
		<!DOCTYPE html>
		<html><head><title>Podvirt demo guest</title></head>
		<body><h1>Podvirt demo guest $release</h1><p>Served by busybox httpd on port 80.</p></body></html>
	EOF
	find "$stage" -exec touch -h -d @0 {} +
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
		cpio --quiet -o -H newc -R 0:0 --reproducible) | gzip -9 -n >"$out"
	rm -rf "$stage"
}

# disk builds a bootable raw disk at $3: MBR (syslinux mbr.bin), one active FAT partition holding
# syslinux (BIOS) and syslinux.efi (EFI), the kernel $1 and the initramfs $2, booting with
# the kernel command line $5; then converts it to qcow2 $4.
disk() {
	local kernel=$1 initrd=$2 raw=$3 qcow=$4 args=$5 part="$3.part"
	local start=2048 total_mib=64
	local sectors=$(((total_mib << 11) - start))
	rm -f "$raw" "$part"
	truncate -s "$((sectors * 512))" "$part"
	# Reproducible FAT: fixed volume id and times (mkfs --invariant; mtools, which syslinux also uses, honour SOURCE_DATE_EPOCH).
	export SOURCE_DATE_EPOCH=946684800 MTOOLS_SKIP_CHECK=1
	mkfs.vfat --invariant -F 16 -n PODVIRT -i 50D71F7E "$part" >/dev/null
	local cfg
	cfg=$(mktemp "$CACHE/tmp/syslinux.XXXXXX")
	cat >"$cfg" <<-EOF
		SERIAL 0 115200
		DEFAULT podvirt
		PROMPT 0
		TIMEOUT 0
		LABEL podvirt
		  KERNEL /vmlinuz
		  INITRD /initramfs.gz
		  APPEND $args
	EOF
	mmd -i "$part" ::/syslinux
	mcopy -i "$part" "$kernel" ::/vmlinuz
	mcopy -i "$part" "$initrd" ::/initramfs.gz
	mcopy -i "$part" "$cfg" ::/syslinux/syslinux.cfg
	# The same partition boots under EFI (OVMF): the removable-media path \EFI\BOOT\BOOTX64.EFI is
	# syslinux.efi, reading the same configuration next to it.
	mmd -i "$part" ::/EFI ::/EFI/BOOT
	mcopy -i "$part" /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ::/EFI/BOOT/BOOTX64.EFI
	mcopy -i "$part" /usr/lib/syslinux/modules/efi64/ldlinux.e64 ::/EFI/BOOT/ldlinux.e64
	mcopy -i "$part" "$cfg" ::/EFI/BOOT/syslinux.cfg
	rm -f "$cfg"
	syslinux --install --directory /syslinux "$part"
	truncate -s "$((total_mib << 20))" "$raw"
	printf 'label: dos\nlabel-id: 0x50d71f7e\nstart=%d, size=%d, type=e, bootable\n' "$start" "$sectors" |
		sfdisk --quiet "$raw"
	dd if=/usr/lib/syslinux/mbr/mbr.bin of="$raw" bs=440 count=1 conv=notrunc status=none
	dd if="$part" of="$raw" bs=1M seek=1 conv=notrunc,sparse status=none
	rm -f "$part"
	qemu-img convert -q -c -O qcow2 "$raw" "$qcow"
	rm -f "$raw"
}

# Kernel command lines. Direct kernel boot (kernelBoot) gets its kernelArgs from the VMI; the disk's own
# bootloader uses DISK_KERNEL_ARGS. ttyS0 last makes it /dev/console; tty1 keeps the VNC screen alive.
DISK_KERNEL_ARGS="console=tty1 console=ttyS0,115200"
KERNELBOOT_ARGS="console=ttyS0"

# build_all builds (or reuses) everything for the current sources and prints the output directory.
build_all() {
	local kid srcver bbver slver qga key out bzimage busybox
	ensure_tools
	kid=$(kernel_id)
	if use_prebuilt; then srcver=$(prebuilt_field KERNEL_SOURCE); else srcver=${kid#source }; fi
	bbver=$(candidate busybox-static)
	slver=$(syslinux_version)
	qga=$(qga_versions)
	key=$(version_key "$kid" "$bbver" "$slver" "$qga")
	out="$CACHE/$key"
	if [[ ! -e $out/.done ]]; then
		bzimage=$(kernel)
		busybox=$(fetch_deb busybox-static "$bbver")
		local release="$GUEST_RELEASE-${key:0:8}"
		log "building guest $release into $out"
		mkdir -p "$CACHE/tmp"
		rm -rf "$out" && mkdir -p "$out"
		cp "$bzimage" "$out/vmlinuz"
		cp "$(dirname "$bzimage")/config" "$out/kernel.config"
		initramfs "$busybox" "$out/initramfs.gz" "$release" "$qga"
		disk "$out/vmlinuz" "$out/initramfs.gz" "$out/demo.raw" "$out/demo.qcow2" "$DISK_KERNEL_ARGS"
		disk "$out/vmlinuz" "$out/initramfs.gz" "$out/alpine.raw" "$out/alpine.qcow2" "$DISK_KERNEL_ARGS podvirt.flavour=alpine"
		cat >"$out/guest.env" <<-EOF
			GUEST_RELEASE=$release
			GUEST_KERNEL_RELEASE=$(cat "$(dirname "$bzimage")/release")
			GUEST_LINUX_SOURCE=$srcver
			GUEST_BUSYBOX=$bbver
			GUEST_SYSLINUX=$slver
			GUEST_AGENT="$(echo $qga)"
			GUEST_KERNELBOOT_ARGS="$KERNELBOOT_ARGS"
			GUEST_DISK_KERNEL_ARGS="$DISK_KERNEL_ARGS"
		EOF
		touch "$out/.done"
		prune "$key"
	fi
	images "$out"
	printf '%s\n' "$out"
}

# images packs the OCI image tarballs with cmd/podvirt-image once that tool exists in the repo.
images() {
	local out=$1
	if [[ ! -d $REPO/cmd/podvirt-image ]]; then
		log "cmd/podvirt-image does not exist yet: no image tarballs (files are in $out)"
		return 0
	fi
	local toolkey
	toolkey=$(image_tool_key)
	if [[ ! -e $out/images-$toolkey.done ]]; then
		log "packing OCI images"
		(cd "$REPO" && CGO_ENABLED=0 go run -trimpath ./cmd/podvirt-image build --name "$KERNELBOOT_REF" \
			--layer "$out/vmlinuz=/boot/vmlinuz" --layer "$out/initramfs.gz=/boot/initramfs.gz" \
			--out "$out/kernelboot.tar") >&2
		(cd "$REPO" && CGO_ENABLED=0 go run -trimpath ./cmd/podvirt-image build --name "${CONTAINERDISK_REFS[0]}" \
			--name "${CONTAINERDISK_REFS[1]}" --layer "$out/demo.qcow2=/disk/demo.qcow2" \
			--out "$out/containerdisk.tar") >&2
		(cd "$REPO" && CGO_ENABLED=0 go run -trimpath ./cmd/podvirt-image build --name "${ALPINE_REFS[0]}" \
			--name "${ALPINE_REFS[1]}" --layer "$out/alpine.qcow2=/disk/alpine.qcow2" \
			--out "$out/alpine.tar") >&2
		rm -f "$out"/images-*.done
		touch "$out/images-$toolkey.done"
	fi
	log "image $KERNELBOOT_REF: $out/kernelboot.tar"
	log "image ${CONTAINERDISK_REFS[*]}: $out/containerdisk.tar"
	log "image ${ALPINE_REFS[*]}: $out/alpine.tar"
}

# main runs one command; the script ends in one line that calls it, so editing this file while a build
# runs cannot change what the running build executes next.
main() {
	mkdir -p "$CACHE"
	# One build at a time per cache (the lock fd is not inherited by anything long-lived).
	exec 9>"$CACHE/.lock"
	flock 9

	case "${1:-all}" in
	all)
		build_all
		;;
	kernel)
		ensure_tools
		kernel
		;;
	verify-kernel)
		verify_kernel
		;;
	update-kernel)
		update_kernel
		;;
	dir)
		ensure_tools
		local kid
		kid=$(kernel_id)
		printf '%s\n' "$CACHE/$(version_key "$kid" "$(candidate busybox-static)" "$(syslinux_version)" "$(qga_versions)")"
		;;
	import)
		local out
		out=$(build_all)
		[[ -e $out/kernelboot.tar ]] || die "no image tarballs: cmd/podvirt-image is missing"
		(cd "$REPO" && CGO_ENABLED=0 go run -trimpath ./cmd/podvirt-image import "$out/kernelboot.tar" "$out/containerdisk.tar" "$out/alpine.tar")
		;;
	*)
		die "unknown command ${1} (want: all, kernel, verify-kernel, update-kernel, dir, import)"
		;;
	esac
}

main "$@"; exit
