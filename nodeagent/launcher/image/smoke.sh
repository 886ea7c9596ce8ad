#!/usr/bin/env bash
# Boots the 512-byte test guest (with a TPM: swtpm from the image) with the launcher image's root filesystem, the way a Pod would run it:
# own mount, network and PID namespaces, uid $LAUNCHER_UID (launcherv1.LauncherUID), no capabilities, the private dir bind-mounted at
# /var/run/podvirt. Checks sync → serial output → ACPI shutdown → exit 0. Needs root on the host (to
# set up the namespaces) and curl.
#
#   nodeagent/launcher/image/smoke.sh ROOTFS_DIR
set -euo pipefail
rootfs=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d /tmp/pvl-smoke-XXXX)
trap 'rm -rf "$work"' EXIT
private=$work/private
mkdir -p "$private/disks/containerdisk"
chmod 777 "$private"
head -c 1048576 /dev/zero > "$work/boot.raw"
dd if="$here/../testdata/bootsector.bin" of="$work/boot.raw" conv=notrunc status=none
qemu-img convert -O qcow2 "$work/boot.raw" "$private/disks/containerdisk/boot.qcow2"

vmi='{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"smoke","namespace":"ns","uid":"u"},
"spec":{"terminationGracePeriodSeconds":30,"domain":{"firmware":{"uuid":"0d2a2043-41c0-59c3-9b17-025022203668"},
"resources":{"requests":{"memory":"64M"}},"devices":{"tpm":{},"disks":[{"name":"containerdisk","disk":{"bus":"virtio"}},{"name":"ci","disk":{}}]}},
"volumes":[{"name":"containerdisk","containerDisk":{"image":"x"}},{"name":"ci","cloudInitNoCloud":{"userData":"#!/bin/sh\n"}}]}}'
printf '{"vmi":"%s","emulation":true}' "$(printf '%s' "$vmi" | base64 -w0)" > "$work/sync.json"

unshare --mount --net --pid --fork --kill-child sh -c "
	set -e
	mount --make-rprivate /
	mount -t tmpfs -o size=64m tmpfs '$rootfs/run'
	mount -t tmpfs -o size=64m,mode=1777 tmpfs '$rootfs/var/lib/virt-launcher'
	mount -t tmpfs -o size=64m,mode=1777 tmpfs '$rootfs/tmp'
	mkdir -p '$rootfs/var/run/podvirt' '$rootfs/proc' '$rootfs/dev' '$rootfs/sys'
	mount --bind '$private' '$rootfs/var/run/podvirt'
	mount -t proc proc '$rootfs/proc'
	mount -t sysfs -o ro sysfs '$rootfs/sys'
	mount -t tmpfs -o size=1m tmpfs '$rootfs/dev'
	for d in null zero full random urandom tty; do touch '$rootfs/dev/'\$d; mount --bind /dev/\$d '$rootfs/dev/'\$d; done
	ip link set lo up
	exec chroot --userspec=${LAUNCHER_UID:?}:${LAUNCHER_UID:?} '$rootfs' /usr/bin/virt-launcher run --vmi-name smoke --namespace ns
" > "$work/launcher.log" 2>&1 &
pid=$!
# The launcher is PID 1 of its namespace; unshare ignores SIGTERM and its --kill-child does not survive
# the uid change, so kill the launcher itself: its namespace goes with it.
stop() { kill -KILL "$(cat /proc/$pid/task/$pid/children 2>/dev/null)" "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
fail() { echo "smoke: $*" >&2; cat "$work/launcher.log" >&2; stop; exit 1; }
for _ in $(seq 300); do [ -S "$private/launcher.sock" ] && break; sleep 0.1; done
[ -S "$private/launcher.sock" ] || fail "no command socket"
t0=$(date +%s%N)
out=$(curl -s -w ' HTTP %{http_code}' --unix-socket "$private/launcher.sock" -X POST -d @"$work/sync.json" http://launcher/v1/sync)
case $out in *"HTTP 200") ;; *) fail "sync: $out" ;; esac
t1=$(date +%s%N)
for _ in $(seq 300); do grep -q PODVIRT-BOOT-SECTOR-OK "$private/serial0.log" 2>/dev/null && break; sleep 0.1; done
grep -q PODVIRT-BOOT-SECTOR-OK "$private/serial0.log" || fail "no guest output on the serial log"
t2=$(date +%s%N)
curl -sf --unix-socket "$private/launcher.sock" -X POST -d '{"gracePeriodSeconds":30}' http://launcher/v1/shutdown > /dev/null || fail "shutdown"
code=0; wait "$pid" || code=$?
[ "$code" = 0 ] || fail "launcher exited $code after the guest powered off"
echo "smoke: ok (sync $(( (t1-t0)/1000000 )) ms, serial output $(( (t2-t0)/1000000 )) ms after sync; $(cat "$private/launcher-exit.json"))"
