#!/usr/bin/env bash
# Builds the Ironic Python Agent (IPA) ramdisk real Ironic boots on the test bed's machines
# (test/ipa): a Debian trixie tree made by mmdebstrap holding trixie's ironic-python-agent 10.2
# and a kernel, packed as a kernel and an initramfs that is the whole root filesystem.
#
#   hack/ipa.sh CACHE_DIR    build CACHE_DIR/ipa-<version>-<hash>/{vmlinuz,initramfs} unless a
#                            build of that <hash> exists; print the directory's path
#
# The initramfs is the tree itself (cpio, zstd): /init is systemd, which brings up every NIC
# with DHCP (dhclient, one unit for all of them) and then runs the agent, which reads Ironic's
# address and the rest from the kernel command line Ironic gives it (ipa-api-url=...). No
# password, no SSH: nothing logs in. Stripped of what a ramdisk never reads (documentation,
# manual pages, locales, apt's lists, the initrd the kernel package makes, and the kernel
# modules of hardware a server has no use for: sound, graphics, wireless, Bluetooth, media,
# InfiniBand, staging); depmod runs again after.
#
# <hash> covers this whole script (the suite, the packages and every step that shapes the tree),
# so changing any of it builds a new ramdisk next to the old one; <version> is the
# ironic-python-agent package's version (no epoch). Needs root (mmdebstrap in root mode). ~7
# minutes and ~400 MB the first time. The mirror is the one hack/rootfs.sh uses
# (deb.debian.org), overridable with EDGEFLEET_DEBIAN_MIRROR.
set -euo pipefail

cache=${1:?usage: hack/ipa.sh CACHE_DIR}
suite=trixie
mirror=${EDGEFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the agent runs for inspection and cleaning besides itself: lshw and dmidecode (the
# system's and memory's inventory), gdisk and parted (partition tables; erase_devices_metadata
# runs sgdisk), qemu-utils (qemu-img, which writes images), kmod and pciutils.
packages=ironic-python-agent,linux-image-amd64,systemd-sysv,udev,iproute2,isc-dhcp-client,qemu-utils,lshw,dmidecode,gdisk,parted,kmod,pciutils

hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)

for out in "$cache"/ipa-*-"$hash"; do
	if [[ -f $out/vmlinuz && -f $out/initramfs ]]; then
		echo "$out"
		exit 0
	fi
done
if [[ $(id -u) -ne 0 ]]; then
	echo "ipa: building the IPA ramdisk needs root" >&2
	exit 1
fi
for tool in mmdebstrap:mmdebstrap cpio:cpio zstd:zstd; do
	if ! command -v "${tool%%:*}" >/dev/null; then
		echo "ipa: installing ${tool#*:}" >&2
		apt-get install -y --no-install-recommends "${tool#*:}" >&2 ||
			{ apt-get update >&2 && apt-get install -y --no-install-recommends "${tool#*:}" >&2; }
	fi
done

echo "ipa: building the IPA ramdisk from $suite's $packages (first time on this machine, ~7 min; cached afterwards)" >&2
start=$SECONDS
tmp=$cache/ipa-$hash.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
tree=$tmp/tree
mmdebstrap --variant=apt --include="$packages" "$suite" "$tree" "$mirror" >&2

# DHCP on every NIC: dhclient without interfaces configures all of them; it forks once it has
# a lease, which is when the network is online for the agent.
cat >"$tree/etc/systemd/system/edgefleet-dhcp.service" <<'EOF'
[Unit]
Description=DHCP on every NIC (edgefleet IPA ramdisk)
Wants=network.target systemd-udev-settle.service
After=systemd-udev-settle.service
Before=network.target network-online.target

[Service]
Type=forking
ExecStart=/sbin/dhclient -v
Restart=on-failure
RestartSec=5

[Install]
WantedBy=multi-user.target network-online.target
EOF
# The agent, after the network; the kernel command line tells it where Ironic is. A unit in
# /etc replaces the package's of the same name.
cat >"$tree/etc/systemd/system/ironic-python-agent.service" <<'EOF'
[Unit]
Description=Ironic Python Agent (edgefleet IPA ramdisk)
Wants=network-online.target
After=network-online.target edgefleet-dhcp.service

[Service]
ExecStart=/usr/bin/ironic-python-agent
Restart=always
RestartSec=10
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$tree/etc/systemd/system/multi-user.target.wants" "$tree/etc/systemd/system/network-online.target.wants"
ln -sf /etc/systemd/system/edgefleet-dhcp.service "$tree/etc/systemd/system/multi-user.target.wants/"
ln -sf /etc/systemd/system/edgefleet-dhcp.service "$tree/etc/systemd/system/network-online.target.wants/"
ln -sf /etc/systemd/system/ironic-python-agent.service "$tree/etc/systemd/system/multi-user.target.wants/"
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer; do
	ln -sf /dev/null "$tree/etc/systemd/system/$u"
done
echo ironic-python-agent >"$tree/etc/hostname"
: >"$tree/etc/machine-id"
ln -sfn /lib/systemd/systemd "$tree/init"

kernel=$(ls "$tree"/boot/vmlinuz-* | sort -V | tail -n1)
kver=${kernel##*/vmlinuz-}
cp "$kernel" "$tmp/vmlinuz"
rm -rf "$tree"/boot/* "$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/info/* \
	"$tree"/usr/share/locale/* "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/* "$tree"/var/log/*
mods=$tree/lib/modules/$kver/kernel
rm -rf "$mods"/sound "$mods"/drivers/gpu "$mods"/drivers/media "$mods"/drivers/net/wireless \
	"$mods"/net/wireless "$mods"/net/mac80211 "$mods"/drivers/bluetooth "$mods"/net/bluetooth \
	"$mods"/drivers/infiniband "$mods"/drivers/staging "$mods"/drivers/iio "$mods"/drivers/isdn
chroot "$tree" depmod -a "$kver"

version=$(dpkg-query --admindir="$tree/var/lib/dpkg" -W -f '${Version}' ironic-python-agent)
version=${version#*:}
[[ -x $tree/usr/bin/ironic-python-agent ]] || { echo "ipa: $tree has no /usr/bin/ironic-python-agent" >&2; exit 1; }
(cd "$tree" && find . -mount | LC_ALL=C sort | cpio --quiet -o -H newc | zstd -q -T0 -3 -o "$tmp/initramfs")
rm -rf "$tree"
out=$cache/ipa-$version-$hash
rm -rf "$out"
mv "$tmp" "$out"
echo "ipa: built $out in $((SECONDS - start))s (kernel $kver, initramfs $(du -h "$out/initramfs" | cut -f1))" >&2
echo "$out"
