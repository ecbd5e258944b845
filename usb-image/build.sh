#!/usr/bin/env bash
# Builds the generic base image of a site's bootstrap machine: one hybrid ISO per edgefleet
# version, bootable as a CD and as a USB stick, with BIOS and UEFI. A site's identity is written
# into its reserved area afterwards (edgefleet site image; pkg/siteimage), without rebuilding.
#
#   usb-image/build.sh CACHE_DIR BIN_DIR    build CACHE_DIR/edgefleet-base-<hash>.iso unless it
#                                           exists; print its path
#
# Two stages, each cached by a hash of its inputs:
#  1. debian-live-bookworm-<hash>/: Debian bookworm by mmdebstrap with the kernel, live-boot and
#     the test hosts' packages (hack/rootfs.sh). <hash>: suite, packages, hooks. Minutes, once.
#  2. edgefleet-base-<hash>.iso: an overlay over stage 1 gets the site stack
#     (usb-image/stack/install.sh ROOTFS BIN_DIR, when it exists) and the live-boot glue
#     (usb-image/boot/), is packed into a zstd squashfs, and grub-mkrescue makes the ISO (kernel
#     command line with console=ttyS0) holding /edgefleet/identity.img, the 64 KiB identity area
#     (empty in the base). <hash>: stage 1's, this script, usb-image/boot/, and — with the stack —
#     usb-image/stack/, go.mod/go.sum and every file in BIN_DIR. So a new edgefleet binary redoes
#     only this stage. The cache keeps the newest three base images (~450 MB each; a VM booted
#     from an older one keeps its open file).
#
# Needs root (mmdebstrap in root mode, the overlay mount). Installs mmdebstrap, squashfs-tools,
# grub-pc-bin, grub-efi-amd64-bin, xorriso and mtools with apt-get when missing. The mirror is
# this machine's apt's (deb.debian.org), overridable with EDGEFLEET_DEBIAN_MIRROR.
set -euo pipefail

cache=${1:?usage: usb-image/build.sh CACHE_DIR BIN_DIR}
bindir=${2:?usage: usb-image/build.sh CACHE_DIR BIN_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
suite=bookworm
mirror=${EDGEFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The identity area: its size and the empty header are pkg/siteimage's format (AreaSize, the v1
# header line); the boot glue reads it back.
area_size=65536

# The test hosts' packages, from their one list in hack/rootfs.sh, plus a kernel and live-boot.
host_packages=$(sed -n 's/^packages=//p' "$repo/hack/rootfs.sh")
[[ -n $host_packages ]] || { echo "usb-image: no packages= line in hack/rootfs.sh" >&2; exit 1; }
packages=$host_packages,linux-image-amd64,initramfs-tools,live-boot,live-boot-initramfs-tools,ca-certificates,zstd
# customize hooks, in the finished chroot ($1): no SSH host keys in the image (each machine makes
# its own at boot), an empty machine-id (made at boot), a hostname and /etc/hosts, /etc/network
# (live-boot's initramfs writes its interfaces file there).
hooks=(
	'rm -f "$1"/etc/ssh/ssh_host_*'
	'mkdir -p "$1"/etc/systemd/system/ssh.service.d'
	'printf "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n" >"$1"/etc/systemd/system/ssh.service.d/edgefleet-hostkeys.conf'
	'rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; : >"$1"/etc/machine-id'
	'echo edgefleet-bootstrap >"$1"/etc/hostname'
	'printf "127.0.0.1\tlocalhost\n127.0.1.1\tedgefleet-bootstrap\n::1\tlocalhost ip6-localhost ip6-loopback\n" >"$1"/etc/hosts'
	'mkdir -p "$1"/etc/network'
)

need() { # need COMMAND PACKAGE: apt-get install PACKAGE when COMMAND is missing
	command -v "$1" >/dev/null && return 0
	echo "usb-image: installing $2" >&2
	apt-get install -y --no-install-recommends "$2" >&2 ||
		{ apt-get update >&2 && apt-get install -y --no-install-recommends "$2" >&2; }
}

if [[ $(id -u) -ne 0 ]]; then
	echo "usb-image: building the base image needs root (mmdebstrap, overlay mount)" >&2
	exit 1
fi
mkdir -p "$cache"

# Stage 1: the Debian live root filesystem.
debian_hash=$(printf '%s\n' "$suite" "$packages" "${hooks[@]}" | sha256sum | cut -c1-12)
debian=$cache/debian-live-$suite-$debian_hash
if [[ ! -d $debian ]]; then
	need mmdebstrap mmdebstrap
	echo "usb-image: building Debian $suite with $packages (first time on this machine; cached afterwards)" >&2
	start=$SECONDS
	rm -rf "$debian.tmp"
	hook_args=()
	for h in "${hooks[@]}"; do hook_args+=(--customize-hook="$h"); done
	mmdebstrap --variant=minbase --include="$packages" "${hook_args[@]}" "$suite" "$debian.tmp" "$mirror" >&2
	mv "$debian.tmp" "$debian"
	echo "usb-image: built $debian in $((SECONDS - start))s" >&2
else
	echo "usb-image: Debian $suite live rootfs cached ($debian)" >&2
fi

# Stage 2: the ISO.
stack=$here/stack/install.sh
inputs() {
	echo "$debian_hash"
	sha256sum "$here/build.sh" "$here"/boot/*
	find "$here/stack" -type f -print0 | sort -z | xargs -0 sha256sum
	sha256sum "$repo/go.mod" "$repo/go.sum"
	# The binaries install.sh copies (bin/ also holds what the image does not carry).
	for b in $("$stack" --binaries); do
		echo "$b $(sha256sum <"$bindir/$b" | cut -c1-64)"
	done
}
iso_hash=$(inputs | sed "s|$repo/||" | sha256sum | cut -c1-12)
iso=$cache/edgefleet-base-$iso_hash.iso
if [[ -f $iso ]]; then
	echo "usb-image: base image cached ($iso)" >&2
	echo "$iso"
	exit 0
fi
need mksquashfs squashfs-tools
need xorriso xorriso
need mformat mtools
[[ -d /usr/lib/grub/i386-pc ]] || need /nonexistent grub-pc-bin
[[ -d /usr/lib/grub/x86_64-efi ]] || need /nonexistent grub-efi-amd64-bin

start=$SECONDS
work=$(mktemp -d "$cache/edgefleet-base-$iso_hash.XXXXXX")
cleanup() {
	mountpoint -q "$work/root" && umount "$work/root"
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"/{upper,ovl,root} "$work/iso"/{live,boot/grub,edgefleet}
mount -t overlay overlay -o "lowerdir=$debian,upperdir=$work/upper,workdir=$work/ovl" "$work/root"

echo "usb-image: installing the site stack ($stack)" >&2
"$stack" "$work/root" "$bindir" >&2
install -D -m 0755 "$here/boot/edgefleet-identity" "$work/root/usr/lib/edgefleet/edgefleet-identity"
install -D -m 0644 "$here/boot/edgefleet-identity.service" "$work/root/usr/lib/systemd/system/edgefleet-identity.service"
mkdir -p "$work/root/etc/systemd/system/sysinit.target.wants"
ln -sf /usr/lib/systemd/system/edgefleet-identity.service "$work/root/etc/systemd/system/sysinit.target.wants/"

kernel=$(find "$work/root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n1)
initrd=$(find "$work/root/boot" -maxdepth 1 -name 'initrd.img-*' | sort -V | tail -n1)
[[ -n $kernel && -n $initrd ]] || { echo "usb-image: no kernel or initrd in $debian/boot" >&2; exit 1; }
cp "$kernel" "$work/iso/live/vmlinuz"
cp "$initrd" "$work/iso/live/initrd.img"
t=$SECONDS
mksquashfs "$work/root" "$work/iso/live/filesystem.squashfs" -comp zstd -Xcompression-level 3 -noappend -quiet -e boot >&2
echo "usb-image: squashfs in $((SECONDS - t))s" >&2
umount "$work/root"

# The identity area: the v1 header line of an empty identity, NUL-padded to the area's size.
{
	printf 'EDGEFLEET-IDENTITY v1 0 %s\n' "$(sha256sum </dev/null | cut -c1-64)"
} >"$work/iso/edgefleet/identity.img"
truncate -s "$area_size" "$work/iso/edgefleet/identity.img"

cat >"$work/iso/boot/grub/grub.cfg" <<'GRUB'
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=3
menuentry "edgefleet site bootstrap" {
	linux /live/vmlinuz boot=live console=tty0 console=ttyS0,115200n8
	initrd /live/initrd.img
}
GRUB
t=$SECONDS
grub-mkrescue -o "$work/out.iso" "$work/iso" -- -volid EDGEFLEET >&2 2>"$work/mkrescue.log" ||
	{ cat "$work/mkrescue.log" >&2; exit 1; }
echo "usb-image: grub-mkrescue in $((SECONDS - t))s" >&2
mv "$work/out.iso" "$iso"
ls -1t "$cache"/edgefleet-base-*.iso | tail -n +4 | xargs -r rm -f --
echo "usb-image: built $iso ($(du -m "$iso" | cut -f1) MiB) in $((SECONDS - start))s" >&2
echo "$iso"
