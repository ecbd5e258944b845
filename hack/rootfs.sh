#!/usr/bin/env bash
# Builds the Debian bookworm root filesystem the test hosts boot (test/testhosts StartHosts): a
# directory made by mmdebstrap, used read-only as the lower layer of each host's overlayfs.
#
#   hack/rootfs.sh CACHE_DIR    build CACHE_DIR/rootfs-bookworm-<hash> unless it exists; print its path
#
# <hash> covers the suite, the package list and the customize hooks, so changing any of them builds a new
# rootfs next to the old one. Needs root (mmdebstrap in root mode, and the chroot's files owned by
# root). Installs mmdebstrap with apt-get when it is missing. The mirror is the one this machine's
# apt uses (deb.debian.org), overridable with EDGEFLEET_DEBIAN_MIRROR.
set -euo pipefail

cache=${1:?usage: hack/rootfs.sh CACHE_DIR}
suite=bookworm
mirror=${EDGEFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# iptables: a node's packet filter (kube-proxy's iptables mode, the pod network's masquerade rule);
# installed, its postinst points iptables, iptables-save and iptables-restore at the -nft variants.
packages=systemd-sysv,openssh-server,iproute2,dbus,curl,iptables
# customize hooks, in the finished chroot ($1):
#  - no SSH host keys in the image: each host makes its own on first boot (ssh-keygen -A in an
#    ExecStartPre of ssh.service), so no two hosts share a key and the image holds no private key;
#  - key-only root login, no DNS lookups of clients;
#  - mask the units that have nothing to do in a container without consoles or udev;
#  - an /etc/hosts (mmdebstrap makes none; containerd copies it into every pod sandbox).
hooks=(
	'rm -f "$1"/etc/ssh/ssh_host_*'
	'mkdir -p "$1"/etc/systemd/system/ssh.service.d'
	'printf "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n" >"$1"/etc/systemd/system/ssh.service.d/edgefleet-hostkeys.conf'
	'printf "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUseDNS no\n" >"$1"/etc/ssh/sshd_config.d/edgefleet.conf'
	'for u in getty@tty1.service console-getty.service serial-getty@console.service systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service systemd-networkd-wait-online.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer getty.target; do ln -sf /dev/null "$1/etc/systemd/system/$u"; done'
	'rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; : >"$1"/etc/machine-id'
	'printf "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" >"$1"/etc/hosts'
)

# The cache key: what goes into the image, not how this script gets there.
hash=$(printf '%s\n' "$suite" "$packages" "${hooks[@]}" | sha256sum | cut -c1-12)

out=$cache/rootfs-$suite-$hash
if [[ -d $out ]]; then
	echo "$out"
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "rootfs: building the test hosts' rootfs needs root" >&2
	exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "rootfs: installing mmdebstrap" >&2
	apt-get install -y --no-install-recommends mmdebstrap >&2 ||
		{ apt-get update >&2 && apt-get install -y --no-install-recommends mmdebstrap >&2; }
fi

echo "rootfs: building $suite with $packages (first time on this machine; cached afterwards)" >&2
start=$SECONDS
tmp=$out.tmp
rm -rf "$tmp"
hook_args=()
for h in "${hooks[@]}"; do hook_args+=(--customize-hook="$h"); done
mmdebstrap --variant=minbase --include="$packages" "${hook_args[@]}" \
	"$suite" "$tmp" "$mirror" >&2
mv "$tmp" "$out"
echo "rootfs: built $out in $((SECONDS - start))s" >&2
echo "$out"
