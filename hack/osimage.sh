#!/usr/bin/env bash
# Builds the OS disk image real Ironic's agent writes to a machine's disk (test/ipa):
# a whole-disk, BIOS-bootable Debian bookworm image.
#
#   hack/osimage.sh CACHE_DIR    build CACHE_DIR/osimage-<version>-<hash>/{disk.qcow2,disk.qcow2.sha256}
#                                unless a build of that <hash> exists; print the directory's path
#
# The image: an msdos partition table with one ext4 root partition from 1 MiB (label root), GRUB
# for BIOS (grub-pc; SeaBIOS is the test VMs' firmware) in the gap before it, Debian's kernel
# (linux-image-amd64) and systemd, OpenSSH, and cloud-init as the first-boot agent, restricted to
# the ConfigDrive datasource (datasource_list: [ConfigDrive, None]): on first boot it applies the
# config drive Ironic builds and the agent writes to the disk (the SSH public keys, for root; the
# hostname; the network: DHCP on the first NIC when the drive carries no network data), grows the
# root partition to the disk, generates the SSH host keys and prints them on the console (the
# image carries none: /etc/ssh/ssh_host_* are deleted). The kernel and GRUB talk on the serial
# console (console=ttyS0, GRUB_TERMINAL=serial), where tests read the boot. No password logins:
# root's password is locked, sshd takes keys only.
#
# Packed as qcow2, compressed (zlib): the smallest file to store, serve and download; the agent
# downloads it into its ramdisk and writes it with qemu-img convert, which writes only the
# allocated clusters. disk.qcow2.sha256 holds its sha256 (sha256sum's format).
#
# <hash> covers this whole script (the suite, the packages and every step that shapes the disk),
# so changing any of it builds a new image next to the old one; <version> is the kernel package's
# version. Needs root (mmdebstrap in root mode, a loop device, mount, chroot); installs
# mmdebstrap, fdisk (sfdisk) and qemu-utils (qemu-img) with apt-get when they are missing. The
# mirror is the one hack/rootfs.sh uses (deb.debian.org), overridable with EDGEFLEET_DEBIAN_MIRROR.
set -euo pipefail

cache=${1:?usage: hack/osimage.sh CACHE_DIR}
suite=bookworm
mirror=${EDGEFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# ifupdown + isc-dhcp-client: what cloud-init's network config renders to on Debian
# (/etc/network/interfaces.d); cloud-guest-utils: growpart, which grows the root partition;
# e2fsprogs: the root file system's fsck and resize2fs.
packages=linux-image-amd64,grub-pc,systemd-sysv,udev,openssh-server,cloud-init,cloud-guest-utils,ifupdown,isc-dhcp-client,iproute2,e2fsprogs,kmod,ca-certificates
# The raw disk's size; cloud-init grows the root partition and its file system to the real disk.
size=1536M

hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)

for out in "$cache"/osimage-*-"$hash"; do
	if [[ -f $out/disk.qcow2 && -f $out/disk.qcow2.sha256 ]]; then
		echo "$out"
		exit 0
	fi
done
if [[ $(id -u) -ne 0 ]]; then
	echo "osimage: building the OS disk image needs root" >&2
	exit 1
fi
for tool in mmdebstrap:mmdebstrap sfdisk:fdisk qemu-img:qemu-utils; do
	if ! command -v "${tool%%:*}" >/dev/null; then
		echo "osimage: installing ${tool#*:}" >&2
		apt-get install -y --no-install-recommends "${tool#*:}" >&2 ||
			{ apt-get update >&2 && apt-get install -y --no-install-recommends "${tool#*:}" >&2; }
	fi
done

echo "osimage: building the OS disk image from $suite's $packages (first time on this machine, a few minutes; cached afterwards)" >&2
start=$SECONDS
tmp=$cache/osimage-$hash.tmp
tree=$tmp/tree
mnt=$tmp/mnt
raw=$tmp/disk.raw
loop=
# Unmount and detach on every exit path, then drop the work directory unless the build finished
# (then it is gone already: moved to its final name).
cleanup() {
	local m
	for m in sys proc dev ""; do
		if mountpoint -q "$mnt/$m" 2>/dev/null; then
			umount -l "$mnt/$m" || true
		fi
	done
	if [[ -n $loop ]]; then
		losetup -d "$loop" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
rm -rf "$tmp"
mkdir -p "$tmp" "$mnt"

# What a server never reads goes after the install: documentation, manual pages, locales, and
# the kernel modules of hardware a server has no use for (sound, graphics, wireless, Bluetooth,
# media, InfiniBand, staging), then depmod and the initramfs again. (dpkg's path-exclude options
# break the install here: dpkg fails to create the excluded directories' subdirectories.)
moddirs='sound drivers/gpu drivers/media drivers/net/wireless net/wireless net/mac80211 drivers/bluetooth net/bluetooth drivers/infiniband drivers/staging drivers/iio drivers/isdn'

mmdebstrap --variant=minbase --include="$packages" \
	--essential-hook='echo "grub-pc grub-pc/install_devices_empty boolean true" | chroot "$1" debconf-set-selections' \
	"$suite" "$tree" "$mirror" >&2

# First boot: cloud-init reads only the config drive; root takes the drive's SSH keys (no default
# user: nothing else to log in as); no password logins.
cat >"$tree/etc/cloud/cloud.cfg.d/99_edgefleet.cfg" <<'EOF'
# edgefleet OS image (hack/osimage.sh): Ironic's config drive is the only source of first-boot
# data (None: no data, defaults only).
datasource_list: [ConfigDrive, None]
users: []
disable_root: false
ssh_pwauth: false
ssh_deletekeys: true
ssh_genkeytypes: [ed25519, ecdsa, rsa]
# The image has no locales to generate (C.UTF-8 is built into the C library).
locale: false
growpart:
  mode: auto
  devices: [/]
EOF
rm -f "$tree/etc/cloud/cloud.cfg.d/90_dpkg.cfg"
kver=$(basename "$(ls -d "$tree"/lib/modules/* | sort -V | tail -n1)")
for d in $moddirs; do
	rm -rf "${tree:?}/lib/modules/$kver/kernel/$d"
done
rm -rf "$tree"/usr/share/locale/* "$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/info/* "$tree"/usr/share/lintian/*
printf 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUseDNS no\n' >"$tree/etc/ssh/sshd_config.d/edgefleet.conf"
# Host keys: none in the image. cloud-init makes them at first boot, before sshd starts (also
# without a config drive: its None datasource still runs the ssh module); sshd makes the missing
# ones itself should cloud-init not run at all.
rm -f "$tree"/etc/ssh/ssh_host_*
mkdir -p "$tree/etc/systemd/system/ssh.service.d"
printf '[Service]\nExecStartPre=/usr/bin/ssh-keygen -A\n' >"$tree/etc/systemd/system/ssh.service.d/edgefleet-hostkeys.conf"
# The serial console for GRUB and the kernel.
cat >"$tree/etc/default/grub.d/edgefleet.cfg" <<'EOF'
# edgefleet OS image (hack/osimage.sh): GRUB and the kernel on the serial console.
GRUB_TIMEOUT=1
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200n8"
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --speed=115200 --unit=0 --word=8 --parity=no --stop=1"
EOF
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer; do
	ln -sf /dev/null "$tree/etc/systemd/system/$u"
done
echo debian >"$tree/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tree/etc/hosts"
# Every machine gets its own machine-id at first boot.
: >"$tree/etc/machine-id"
rm -f "$tree/var/lib/dbus/machine-id"
rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/* "$tree"/var/log/*.log "$tree"/var/log/apt/*

version=$(dpkg-query --admindir="$tree/var/lib/dpkg" -W -f '${Version}' linux-image-amd64)
version=${version#*:}

# The disk: msdos, one bootable Linux partition from 1 MiB to the end.
truncate -s "$size" "$raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$raw" >&2
loop=$(losetup --show -f -P "$raw")
part=${loop}p1
# The kernel's partition scan of a loop device may find nothing here; partx adds the partition,
# and devtmpfs makes its node.
for _ in $(seq 50); do
	[[ -b $part ]] && break
	partx -a "$loop" 2>/dev/null || true
	sleep 0.1
done
[[ -b $part ]] || { echo "osimage: $part did not appear" >&2; exit 1; }
uuid=$(cat /proc/sys/kernel/random/uuid)
mkfs.ext4 -q -L root -U "$uuid" "$part"
mount "$part" "$mnt"
cp -a "$tree/." "$mnt/"
rm -rf "$tree"
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$uuid" >"$mnt/etc/fstab"
for m in dev proc sys; do
	mount --bind "/$m" "$mnt/$m"
done
chroot "$mnt" depmod -a "$kver"
chroot "$mnt" update-initramfs -u -k "$kver" >&2
chroot "$mnt" grub-install --target=i386-pc "$loop" >&2
# This machine runs no udev, so grub-mkconfig would find no /dev/disk/by-uuid link and name the
# loop device as root=; the root's UUID is what the machine boots by. Only for this run.
echo "GRUB_DEVICE_UUID=$uuid; GRUB_DISABLE_LINUX_UUID=false; GRUB_DEVICE=UUID=$uuid" >"$mnt/etc/default/grub.d/zz-build.cfg"
chroot "$mnt" update-grub >&2
rm -f "$mnt/etc/default/grub.d/zz-build.cfg"
if ! grep -q "root=UUID=$uuid" "$mnt/boot/grub/grub.cfg" || grep -q 'root=/dev/loop' "$mnt/boot/grub/grub.cfg"; then
	echo "osimage: grub.cfg does not boot root=UUID=$uuid:" >&2
	grep -n 'linux\s' "$mnt/boot/grub/grub.cfg" >&2
	exit 1
fi
used=$(df -h --output=used "$mnt" | tail -n1 | tr -d ' ')
for m in sys proc dev; do
	umount "$mnt/$m"
done
umount "$mnt"
e2fsck -fy "$part" >/dev/null 2>&1 || true
losetup -d "$loop"
loop=

qemu-img convert -c -O qcow2 "$raw" "$tmp/disk.qcow2"
rm -f "$raw"
(cd "$tmp" && sha256sum disk.qcow2 >disk.qcow2.sha256)
rmdir "$mnt"
out=$cache/osimage-$version-$hash
rm -rf "$out"
mv "$tmp" "$out"
echo "osimage: built $out in $((SECONDS - start))s (kernel package $version, root file system $used used, disk.qcow2 $(du -h "$out/disk.qcow2" | cut -f1))" >&2
echo "$out"
