#!/bin/sh
# Reads a NoCloud seed: the disk whose filesystem label is cidata (ISO9660 volume id or vfat label).
# meta-data local-hostname sets the hostname; user-data starting with #! runs, its output on the console.
. /etc/podvirt/lib.sh

dev=
tries=0
# Block devices probe asynchronously (SATA): look for the label for up to ~5 s.
while [ -z "$dev" ] && [ $tries -lt 25 ]; do
	dev=$(findfs LABEL=cidata 2>/dev/null) || dev=$(findfs LABEL=CIDATA 2>/dev/null) || dev=
	[ -n "$dev" ] || { tries=$((tries + 1)); usleep 200000; }
done
[ -n "$dev" ] || exit 0

seed=/mnt/cidata
mount -o ro "$dev" "$seed" 2>/dev/null || mount -t iso9660 -o ro "$dev" "$seed" || {
	say "Podvirt demo guest: cannot mount cidata seed $dev"
	exit 0
}
say "Podvirt demo guest: cidata seed on $dev"

if [ -f "$seed/meta-data" ]; then
	name=$(sed -n 's/^ *local-hostname: *["'\'']\{0,1\}\([^"'\'' ]*\).*/\1/p' "$seed/meta-data" | head -n 1)
	[ -n "$name" ] && hostname "$name"
fi

if [ -f "$seed/user-data" ]; then
	if [ "$(head -c 2 "$seed/user-data")" = "#!" ]; then
		cp "$seed/user-data" /run/user-data
		chmod 700 /run/user-data
		(cd /root && HOME=/root /run/user-data) >/dev/console 2>&1
		say "Podvirt demo guest: user-data exited with status $?"
	else
		say "Podvirt demo guest: user-data is not a script (#!), ignored"
	fi
fi
