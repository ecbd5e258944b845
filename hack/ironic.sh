#!/usr/bin/env bash
# Builds the Debian trixie tree real Ironic runs from in tests (test/ironic): a directory made by
# mmdebstrap holding Ironic 29 (ironic-api, ironic-conductor: the single-process 'ironic' and
# 'ironic-dbsync'), the Redfish client (python3-sushy) and ipmitool (the ipmi hardware type).
# test/ironic runs it with chroot in a private mount namespace, so the host's own Python is never
# touched. Trixie, because bookworm's Ironic (21.4, API <= 1.82) is too old for baremetal-operator
# v0.13.2 (API >= 1.89).
#
#   hack/ironic.sh CACHE_DIR    build CACHE_DIR/ironic-<version>-<hash> unless a tree of that <hash>
#                               exists; print its path
#
# <hash> covers the suite and the package list, so changing either builds a new tree next to the old
# one; <version> is the ironic-api package's version installed (its upstream part, e.g. 29.0.5-0+deb13u3),
# read from the finished tree. Needs root (mmdebstrap in root mode). ~5 minutes and ~700 MB the first
# time. The mirror is the one hack/rootfs.sh uses (deb.debian.org), overridable with
# EDGEFLEET_DEBIAN_MIRROR.
set -euo pipefail

cache=${1:?usage: hack/ironic.sh CACHE_DIR}
suite=trixie
mirror=${EDGEFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=ironic-api,ironic-conductor,python3-sushy,ipmitool

# The cache key: what goes into the tree, not how this script gets there.
hash=$(printf '%s\n' "$suite" "$packages" | sha256sum | cut -c1-12)

for out in "$cache"/ironic-*-"$hash"; do
	if [[ -d $out ]]; then
		echo "$out"
		exit 0
	fi
done
if [[ $(id -u) -ne 0 ]]; then
	echo "ironic: building Ironic's trixie tree needs root" >&2
	exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "ironic: installing mmdebstrap" >&2
	apt-get install -y --no-install-recommends mmdebstrap >&2 ||
		{ apt-get update >&2 && apt-get install -y --no-install-recommends mmdebstrap >&2; }
fi

echo "ironic: building $suite with $packages (first time on this machine, ~5 min; cached afterwards)" >&2
start=$SECONDS
tmp=$cache/ironic-$hash.tmp
rm -rf "$tmp"
mmdebstrap --variant=apt --include="$packages" "$suite" "$tmp" "$mirror" >&2
version=$(dpkg-query --admindir="$tmp/var/lib/dpkg" -W -f '${Version}' ironic-api)
version=${version#*:} # no epoch: a colon in a path is a nuisance
[[ -x $tmp/usr/bin/ironic && -x $tmp/usr/bin/ironic-dbsync ]] ||
	{ echo "ironic: $tmp has no /usr/bin/ironic or /usr/bin/ironic-dbsync" >&2; exit 1; }
out=$cache/ironic-$version-$hash
mv "$tmp" "$out"
echo "ironic: built $out in $((SECONDS - start))s ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
