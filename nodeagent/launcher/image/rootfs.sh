#!/usr/bin/env bash
# Assembles the root filesystem of the launcher image (docker.io/podvirt/virt-launcher) from this
# machine's Debian packages: only qemu-system-x86_64, qemu-img, libvirt's QEMU driver and swtpm with
# their exact shared-library closure (ldd), the firmware q35 guests use, libvirt's CPU map, and the two Podvirt
# binaries. No shell, no package manager, no apt metadata.
#
#   nodeagent/launcher/image/rootfs.sh OUT_DIR VIRT_LAUNCHER CONTAINER_DISK
set -euo pipefail

out=$1 launcher=$2 containerdisk=$3
multiarch=x86_64-linux-gnu
libvirt_modules=/usr/lib/$multiarch/libvirt

rm -rf "$out"
mkdir -p "$out"/usr/{bin,lib/$multiarch,lib64,share} "$out"/etc "$out"/run "$out"/var/lib "$out"/{proc,sys,dev}
# Debian 12 is merged-/usr: keep the same layout so the paths compiled into the binaries resolve.
ln -s usr/bin "$out/bin"
ln -s usr/bin "$out/sbin"
ln -s usr/lib "$out/lib"
ln -s usr/lib64 "$out/lib64"
install -d -m 1777 "$out/tmp" "$out/var/lib/virt-launcher"

# put copies a file (dereferenced) to the same path in the image.
put() {
	mkdir -p "$out$(dirname "$1")"
	cp -L "$1" "$out$1"
}

# closure prints the shared libraries an ELF file needs, with the dynamic loader.
closure() {
	ldd "$1" | awk '/=> \//{print $3} /^\t\/lib64\//{print $1}'
}

elfs=(/usr/bin/qemu-system-x86_64 /usr/bin/qemu-img
	"$libvirt_modules/connection-driver/libvirt_driver_qemu.so"
	"$libvirt_modules/storage-file/libvirt_storage_file_fs.so"
	# qemu's TCG accelerator is a module in Debian's build; virtio-vga/gpu need nothing else.
	/usr/lib/$multiarch/qemu/accel-tcg-x86_64.so
	/usr/lib/$multiarch/qemu/hw-display-virtio-{gpu,gpu-pci,vga}.so
	# devices.tpm: swtpm emulates the TPM (libvirt wants swtpm_ioctl too); swtpm_setup manufactures its state, swtpm_localca (with
	# swtpm_cert and gnutls' certtool) signs its certificates. The launcher writes their configuration.
	/usr/bin/{swtpm,swtpm_setup,swtpm_ioctl,swtpm_localca,swtpm_cert,certtool}
	# A live migration's target runs libvirt's daemon (the source's libvirt reaches it over a unix socket).
	/usr/sbin/libvirtd)
install -m 0755 "$launcher" "$out/usr/bin/virt-launcher"
install -m 0755 "$containerdisk" "$out/usr/bin/container-disk"
for f in "${elfs[@]}"; do put "$f"; done
for f in "${elfs[@]}" "$launcher"; do closure "$f"; done | sort -u | while read -r lib; do put "$lib"; done

# Firmware and ROMs for q35/pc guests (qemu's firmware path: /usr/share/qemu, /usr/share/seabios,
# /usr/lib/ipxe/qemu), the PVH and linuxboot option ROMs for direct kernel boot, VNC keymaps.
for f in /usr/share/seabios/{bios-256k.bin,bios.bin,vgabios-stdvga.bin,vgabios.bin,vgabios-virtio.bin,vgabios-ramfb.bin} \
	/usr/share/qemu/{kvmvapic.bin,linuxboot.bin,linuxboot_dma.bin,multiboot.bin,multiboot_dma.bin,pvh.bin,sgabios.bin} \
	/usr/lib/ipxe/qemu/efi-{virtio,e1000,e1000e,rtl8139,ne2k_pci,pcnet}.rom; do
	[ -e "$f" ] && put "$f"
done
# OVMF (EFI) and the descriptors libvirt picks an OVMF build by (Secure Boot or not).
for f in /usr/share/OVMF/OVMF_{CODE,VARS}_4M*.fd /usr/share/qemu/firmware/*.json; do put "$f"; done
mkdir -p "$out/usr/share/qemu/keymaps" && cp -L /usr/share/qemu/keymaps/* "$out/usr/share/qemu/keymaps/"
mkdir -p "$out/usr/share/libvirt" && cp -rL /usr/share/libvirt/cpu_map "$out/usr/share/libvirt/"

# Users: root, qemu ($LAUNCHER_UID, launcherv1.LauncherUID: what the compute container runs as) and libvirt-qemu (libvirt looks it up
# when it runs as root even if qemu.conf says root).
uid=${LAUNCHER_UID:?set LAUNCHER_UID (make sets it from api/launcher/v1)}
cat > "$out/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/usr/sbin/nologin
qemu:x:$uid:$uid:qemu:/var/lib/virt-launcher:/usr/sbin/nologin
libvirt-qemu:x:64055:$uid:libvirt qemu:/var/lib/virt-launcher:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat > "$out/etc/group" <<GROUP
root:x:0:
qemu:x:$uid:
kvm:x:108:qemu
nogroup:x:65534:
GROUP
echo "hosts: files" > "$out/etc/nsswitch.conf"
printf '/usr/lib/%s\n' "$multiarch" > "$out/etc/ld.so.conf"
ldconfig -r "$out"
