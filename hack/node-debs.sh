#!/usr/bin/env bash
# Downloads the Debian packages of a node's container runtime — containerd, runc and the CNI
# plugins — and the packages they need that the test hosts' rootfs lacks, as .deb files.
# hack/packages' containerd recipe takes its binaries from them (builders.BuildPackage); the
# rootfs itself stays as it is (iptables is part of it: the node's OS, not the runtime).
#
#   hack/node-debs.sh CACHE_DIR ROOTFS    download into CACHE_DIR/node-debs-bookworm-<hash> unless it
#                                         exists; print its path
#
# <hash> covers the package list and the rootfs they complete. The versions are those this
# machine's apt offers (Debian 12: containerd 1.6.20, runc 1.1.5, containernetworking-plugins
# 1.1.1), so the machine must run bookworm; its package lists are updated first (only when the
# cache misses).
set -euo pipefail

cache=${1:?usage: hack/node-debs.sh CACHE_DIR ROOTFS}
rootfs=${2:?usage: hack/node-debs.sh CACHE_DIR ROOTFS}
suite=bookworm
packages=(containerd runc containernetworking-plugins)

hash=$(printf '%s\n' "$suite" "${packages[@]}" "$(basename "$(readlink -f "$rootfs")")" | sha256sum | cut -c1-12)
out=$cache/node-debs-$suite-$hash
if [[ -d $out ]]; then
	echo "$out"
	exit 0
fi
. /etc/os-release
if [[ ${VERSION_CODENAME:-} != "$suite" ]]; then
	echo "node-debs: this machine runs ${VERSION_CODENAME:-?}, not $suite: its apt would fetch other versions" >&2
	exit 1
fi

apt-get update -q >&2

# Every package the list needs, less those installed in the rootfs.
needed=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances "${packages[@]}" | grep -v '^ ' | grep -v '^<' | sort -u)
installed=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f '${Package}\n' | sort -u)
missing=$(comm -23 <(echo "$needed") <(echo "$installed"))

echo "node-debs: downloading" $missing >&2
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
(cd "$tmp" && apt-get -q -o APT::Sandbox::User=root download $missing >&2)
mv "$tmp" "$out"
echo "$out"
