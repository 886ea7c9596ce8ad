#!/usr/bin/env bash
# Builds Podvirt's Fedora-like test guest from Debian 12 packages and caches it by a version key:
#   ${PODVIRT_CACHE:-/var/cache/podvirt}/fedora-like/<key>/{fedora-like.qcow2,fedora-like.tar,guest.env}
#
#   hack/guest/fedora-like.sh        build (or reuse) the disk and its OCI image tarball; prints the directory
#   hack/guest/fedora-like.sh dir    print the output directory of the current sources (built or not)
#
# It stands in for KubeVirt's fedora-with-test-tooling-container-disk (docs/guest-images.md): systemd,
# the user fedora (password fedora, sudo without password, Fedora's prompt), sshd, qemu-guest-agent,
# cloud-init (NoCloud and ConfigDrive), python3, ncat, tpm2-tools, on Debian's cloud kernel. The disk:
# an MBR, a FAT partition with syslinux (BIOS and EFI), the kernel and its initramfs, and an ext4 root
# labelled "root". mmdebstrap makes the root file system; nothing else is downloaded.
set -euo pipefail
shopt -s inherit_errexit # a failing step inside $(...) fails the build too

GUEST_RELEASE=1.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${PODVIRT_CACHE:-/var/cache/podvirt}/fedora-like
LOG_PREFIX=fedora-like
# The names KubeVirt's tests pull (under the registry prefix Podvirt gives them) and Podvirt's own.
IMAGE_REFS=(docker.io/podvirt/fedora-with-test-tooling-container-disk:dev docker.io/podvirt/fedora-like:dev)
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
# PACKAGES is what the guest is, on top of Debian's required packages.
PACKAGES=(systemd-sysv udev kmod dbus systemd-resolved linux-image-cloud-amd64 initramfs-tools zstd
	openssh-server sudo python3 ncat tpm2-tools qemu-guest-agent cloud-init iproute2 iputils-ping
	netbase procps less ca-certificates)
# Kernel command line: ttyS0 last makes it the console (KubeVirt's serial console); eth0 names as
# Fedora's cloud images have them.
KERNEL_ARGS="root=LABEL=root ro console=tty1 console=ttyS0,115200 net.ifnames=0"
DISK_GIB=4

# shellcheck source=hack/guest/buildlib.sh
source "$HERE/buildlib.sh"

# ensure_tools installs the host tools this build uses.
ensure_tools() {
	local missing=() pair
	for pair in mmdebstrap:mmdebstrap mkfs.vfat:dosfstools mcopy:mtools syslinux:syslinux sfdisk:fdisk \
		qemu-img:qemu-utils mkfs.ext4:e2fsprogs; do
		command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
	done
	[[ -d /usr/lib/syslinux/mbr ]] || missing+=(syslinux-common)
	[[ -e /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ]] || missing+=(syslinux-efi)
	((${#missing[@]} == 0)) || apt_install "${missing[@]}"
}

# version_key hashes every input: this script, buildlib.sh, the overlay, and the versions apt would install
# today of the guest's packages, the libraries most of them share, and the host's bootloader.
version_key() {
	local pkg abi v
	{
		printf '%s\n' "$GUEST_RELEASE" "$SUITE" "$KERNEL_ARGS" "$DISK_GIB"
		abi=$(kernel_abi)
		[[ -n $abi ]] || die "apt does not know which kernel linux-image-cloud-amd64 depends on"
		for pkg in "${PACKAGES[@]}" libc6 libssl3 python3.11 systemd "linux-image-$abi" syslinux syslinux-common syslinux-efi; do
			v=$(candidate "$pkg")
			printf '%s=%s\n' "$pkg" "$v"
		done
		(cd "$HERE" && find fedora-like.sh buildlib.sh fedora-like -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
	} | sha256sum | cut -c1-16
}

# kernel_abi prints the flavour package linux-image-cloud-amd64 depends on today (linux-image-6.1.0-N-cloud-amd64).
kernel_abi() {
	apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: linux-image-\(.*-cloud-amd64\)$/\1/p' | head -n 1
}

# rootfs makes the guest's root file system in $1 with mmdebstrap, then configures it.
rootfs() {
	local root=$1 pkgs
	pkgs=$(
		IFS=,
		echo "${PACKAGES[*]}"
	)
	log "mmdebstrap $SUITE (${#PACKAGES[@]} packages and what they need; a few minutes)"
	# The overlay's initramfs settings are in place before the kernel's package builds its initramfs.
	nice -n 10 mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
		--aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--setup-hook='mkdir -p "$1/etc/initramfs-tools/conf.d"' \
		--setup-hook="cp $HERE/fedora-like/etc/initramfs-tools/modules \"\$1/etc/initramfs-tools/\"" \
		--setup-hook="cp $HERE/fedora-like/etc/initramfs-tools/conf.d/podvirt.conf \"\$1/etc/initramfs-tools/conf.d/\"" \
		"$SUITE" "$root" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
		"deb http://deb.debian.org/debian-security $SUITE-security main" >&2 ||
		die "mmdebstrap failed"
	cp -a --no-preserve=ownership "$HERE/fedora-like/." "$root/" # root's, whoever owns the checkout
	chroot "$root" useradd -m -s /bin/bash -G sudo -c fedora fedora
	echo 'fedora:fedora' | chroot "$root" chpasswd
	chmod 0440 "$root/etc/sudoers.d/fedora"
	chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
	# sshd by socket activation: port 22 listens from early boot, before the network is up, so a
	# connection made while the guest boots waits for sshd instead of being refused.
	chroot "$root" systemctl disable ssh.service >/dev/null 2>&1
	chroot "$root" systemctl enable ssh.socket ssh-hostkeys.service >/dev/null 2>&1
	chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer >/dev/null 2>&1 || true
	# Every guest is its own machine: a machine id and ssh host keys of its own, made at its first boot.
	: >"$root/etc/machine-id"
	rm -f "$root"/etc/ssh/ssh_host_* "$root/etc/update-motd.d/10-uname"
	printf 'PODVIRT_GUEST=fedora-like\nPODVIRT_GUEST_RELEASE=%s\n' "$2" >"$root/etc/podvirt-release"
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
}

# disk builds the bootable disk from the root file system $1 at $2 (raw, converted to the qcow2 $3):
# partition 1 FAT (syslinux, kernel, initramfs), partition 2 the ext4 root.
disk() {
	local root=$1 raw=$2 qcow=$3 boot_mib=128 start=2048
	local boot_sectors=$((boot_mib << 11)) root_start root_sectors
	root_start=$((start + boot_sectors))
	root_sectors=$(((DISK_GIB << 21) - root_start))
	local kernel initrd
	kernel=$(find "$root/boot" -name 'vmlinuz-*' | head -n 1)
	initrd=$(find "$root/boot" -name 'initrd.img-*' | head -n 1)
	[[ -n $kernel && -n $initrd ]] || die "no kernel or initramfs in $root/boot"
	rm -f "$raw" "$raw.boot" "$raw.root"
	export SOURCE_DATE_EPOCH=946684800 MTOOLS_SKIP_CHECK=1
	truncate -s "$((boot_sectors * 512))" "$raw.boot"
	mkfs.vfat --invariant -F 16 -n BOOT -i 50D71F7F "$raw.boot" >/dev/null
	local cfg
	cfg=$(mktemp "$CACHE/tmp/syslinux.XXXXXX")
	cat >"$cfg" <<-EOF
		SERIAL 0 115200
		DEFAULT fedora-like
		PROMPT 0
		TIMEOUT 0
		LABEL fedora-like
		  KERNEL /vmlinuz
		  INITRD /initrd.img
		  APPEND $KERNEL_ARGS
	EOF
	mmd -i "$raw.boot" ::/syslinux ::/EFI ::/EFI/BOOT
	mcopy -i "$raw.boot" "$kernel" ::/vmlinuz
	mcopy -i "$raw.boot" "$initrd" ::/initrd.img
	mcopy -i "$raw.boot" "$cfg" ::/syslinux/syslinux.cfg
	mcopy -i "$raw.boot" /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ::/EFI/BOOT/BOOTX64.EFI
	mcopy -i "$raw.boot" /usr/lib/syslinux/modules/efi64/ldlinux.e64 ::/EFI/BOOT/ldlinux.e64
	mcopy -i "$raw.boot" "$cfg" ::/EFI/BOOT/syslinux.cfg
	rm -f "$cfg"
	syslinux --install --directory /syslinux "$raw.boot"
	rm -rf "$root/boot"/* # the kernel boots from the FAT partition
	truncate -s "$((root_sectors * 512))" "$raw.root"
	mkfs.ext4 -q -L root -U 50d71f7f-0000-4000-8000-000000000002 -E root_owner=0:0 -d "$root" "$raw.root" ||
		die "mkfs.ext4 -d failed"
	truncate -s "$((DISK_GIB << 30))" "$raw"
	printf 'label: dos\nlabel-id: 0x50d71f7f\nstart=%d, size=%d, type=e, bootable\nstart=%d, size=%d, type=83\n' \
		"$start" "$boot_sectors" "$root_start" "$root_sectors" | sfdisk --quiet "$raw"
	dd if=/usr/lib/syslinux/mbr/mbr.bin of="$raw" bs=440 count=1 conv=notrunc status=none
	dd if="$raw.boot" of="$raw" bs=512 seek="$start" conv=notrunc,sparse status=none
	dd if="$raw.root" of="$raw" bs=512 seek="$root_start" conv=notrunc,sparse status=none
	rm -f "$raw.boot" "$raw.root"
	log "converting to qcow2 (compressed)"
	nice -n 10 qemu-img convert -q -c -O qcow2 "$raw" "$qcow"
	rm -f "$raw"
}

# build builds (or reuses) the guest for the current sources and prints its output directory.
build() {
	local key out
	ensure_tools
	key=$(version_key)
	out="$CACHE/$key"
	if [[ ! -e $out/.done ]]; then
		local release="$GUEST_RELEASE-${key:0:8}" work start=$SECONDS
		log "building the Fedora-like guest $release into $out"
		mkdir -p "$CACHE/tmp"
		work=$(mktemp -d "$CACHE/tmp/build.XXXXXX")
		rm -rf "$out" && mkdir -p "$out"
		rootfs "$work/root" "$release"
		local kernel_release
		kernel_release=$(basename "$(find "$work/root/boot" -name 'vmlinuz-*' | head -n 1)")
		disk "$work/root" "$work/disk.raw" "$out/fedora-like.qcow2"
		rm -rf "$work"
		cat >"$out/guest.env" <<-EOF
			GUEST_RELEASE=$release
			GUEST_KERNEL=${kernel_release#vmlinuz-}
			GUEST_KERNEL_ARGS="$KERNEL_ARGS"
			GUEST_DISK_GIB=$DISK_GIB
		EOF
		touch "$out/.done"
		log "built in $((SECONDS - start)) s: $(du -h "$out/fedora-like.qcow2" | cut -f1) qcow2"
		prune "$key"
	fi
	image "$out"
	printf '%s\n' "$out"
}

# image packs the disk as a containerDisk image tarball (cmd/podvirt-image), once per version of the tool.
image() {
	local out=$1 toolkey names=() ref
	toolkey=$(image_tool_key)
	if [[ ! -e $out/image-$toolkey.done ]]; then
		log "packing the OCI image"
		for ref in "${IMAGE_REFS[@]}"; do names+=(--name "$ref"); done
		(cd "$REPO" && CGO_ENABLED=0 go run -trimpath ./cmd/podvirt-image build "${names[@]}" \
			--layer "$out/fedora-like.qcow2=/disk/fedora-like.qcow2" --out "$out/fedora-like.tar") >&2
		rm -f "$out"/image-*.done
		touch "$out/image-$toolkey.done"
	fi
	log "image ${IMAGE_REFS[*]}: $out/fedora-like.tar"
}

main() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	case "${1:-all}" in
	all) build ;;
	dir)
		ensure_tools
		printf '%s\n' "$CACHE/$(version_key)"
		;;
	*) die "unknown command $1 (want: all, dir)" ;;
	esac
}

main "$@"; exit
