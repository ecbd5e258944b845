#!/usr/bin/env bash
# Builds the Debian trixie tree real Ironic runs from in tests (test/ironic): a directory made by
# mmdebstrap holding Ironic 29 (ironic-api, ironic-conductor: the single-process 'ironic' and
# 'ironic-dbsync'), the Redfish client (python3-sushy), ipmitool (the ipmi hardware type) and what
# Ironic builds a BIOS-bootable ISO of the agent's kernel and ramdisk with for virtual media
# (redfish-virtual-media boot): isolinux and syslinux-common (isolinux.bin, ldlinux.c32) and
# xorriso, which Ironic runs as mkisofs (the tree gets the link /usr/local/bin/mkisofs ->
# xorrisofs: trixie's xorriso names its mkisofs emulation xorrisofs only).
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
packages=ironic-api,ironic-conductor,python3-sushy,ipmitool,isolinux,syslinux-common,xorriso
mkisofs_link=/usr/local/bin/mkisofs:/usr/bin/xorrisofs

# The cache key: what goes into the tree, not how this script gets there.
hash=$(printf '%s\n' "$suite" "$packages" "$mkisofs_link" | sha256sum | cut -c1-12)

# fix_parent_node corrects a defect of Ironic 29.0.5 in the tree at $1, once (a tree built or
# fixed before is left as it is). Its node PATCH stores the node's own UUID as the node's
# parent_node whenever the patch does not name /parent_node: authorize_node_link_patch returns
# the node itself then, and the caller stores whatever it returns. baremetal-operator patches
# its nodes, so each of them became its own parent, and a power-on, which first powers on a
# node's parent, then failed on the lock it held itself (ParentNodeLocked). Fixed: the parent is
# stored only when the patch names one. Drop this once the tree's Ironic no longer has the
# line it replaces.
fix_parent_node() {
	local api=$1/usr/lib/python3/dist-packages/ironic/api/controllers/v1
	python3 - "$api/node.py" <<'EOF' >&2
import sys
path = sys.argv[1]
src = open(path).read()
broken = """        if parent_node := api_utils.authorize_node_link_patch(
                rpc_node, patch, 'parent_node'):
            corrected_values['parent_node'] = parent_node.uuid
"""
fixed = """        if (parent_node := api_utils.authorize_node_link_patch(
                rpc_node, patch, 'parent_node')) is not rpc_node:
            corrected_values['parent_node'] = parent_node.uuid
"""
if fixed in src:
    sys.exit(0)
if broken not in src:
    sys.exit(f"ironic: {path} holds neither the parent_node defect of Ironic 29.0.5 nor its fix: check whether hack/ironic.sh's fix_parent_node still applies")
open(path, "w").write(src.replace(broken, fixed))
print(f"ironic: fixed the parent_node defect in {path}")
EOF
	rm -f "$api"/__pycache__/node.*.pyc
}

for out in "$cache"/ironic-*-"$hash"; do
	if [[ -d $out ]]; then
		fix_parent_node "$out"
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
fix_parent_node "$tmp"
mkdir -p "$tmp/${mkisofs_link%%/mkisofs:*}"
ln -sfn "${mkisofs_link#*:}" "$tmp/${mkisofs_link%%:*}"
[[ -x $tmp/usr/lib/ISOLINUX/isolinux.bin || -f $tmp/usr/lib/ISOLINUX/isolinux.bin ]] ||
	{ echo "ironic: $tmp has no /usr/lib/ISOLINUX/isolinux.bin" >&2; exit 1; }
out=$cache/ironic-$version-$hash
mv "$tmp" "$out"
echo "ironic: built $out in $((SECONDS - start))s ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
