#!/bin/bash
# install.sh ROOTFS_DIR BIN_DIR: installs the edgefleet site stack into a root filesystem —
# binaries into /usr/local/bin, helpers into /usr/lib/edgefleet, units into
# /usr/lib/systemd/system, the CRDs and RBAC the site cluster needs into /usr/share/edgefleet —
# and enables edgefleet-site.target (wanted by multi-user.target). Run from a checkout of the
# repository with Go on PATH: Cluster-API's and Metal3's CRDs come from the module cache at the
# versions go.mod pins, as the test beds install them. The ISO build and the stack's test call
# it; nothing secret is installed (site-init makes the keys on the machine at first boot).
# install.sh --binaries: prints the names of the binaries it installs (the image build's cache
# key covers them).
set -euo pipefail

bins=(etcd kube-apiserver kube-controller-manager kubectl local-controller bpa bmo)
if [[ ${1:-} == --binaries ]]; then
	echo "${bins[@]}"
	exit 0
fi
if [[ $# -ne 2 ]]; then
	echo "usage: $0 ROOTFS_DIR BIN_DIR | $0 --binaries" >&2
	exit 2
fi
rootfs=$1 bindir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# A directory: a whole root filesystem (the ISO build) or the upper layer of an overlay over one
# (the stack's test host), never the build machine's own root.
[[ -d $rootfs ]] || { echo "install.sh: ROOTFS_DIR $rootfs is not a directory" >&2; exit 1; }
[[ $(cd "$rootfs" && pwd -P) != / ]] || { echo "install.sh: refusing to install into / (give the image's root filesystem)" >&2; exit 1; }
for b in "${bins[@]}"; do
	[[ -x $bindir/$b ]] || { echo "install.sh: $bindir/$b missing or not executable (make build tools)" >&2; exit 1; }
done
command -v go >/dev/null || { echo "install.sh: go not on PATH (needed to find Cluster-API's and Metal3's CRDs in the module cache)" >&2; exit 1; }

# moddir MODULE: the module's directory in the module cache, at go.mod's version.
moddir() {
	local d
	d=$(cd "$repo" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $d && -d $d ]] || { echo "install.sh: module $1 not found (go mod download $1)" >&2; exit 1; }
	echo "$d"
}
capi=$(moddir sigs.k8s.io/cluster-api)
metal3=$(moddir github.com/metal3-io/baremetal-operator)

install -d -m 0755 "$rootfs/usr/local/bin" "$rootfs/usr/lib/edgefleet" "$rootfs/usr/lib/systemd/system" \
	"$rootfs/etc/systemd/system/multi-user.target.wants"
for b in "${bins[@]}"; do
	# -L: bin/ links into the tool cache.
	cp -L "$bindir/$b" "$rootfs/usr/local/bin/$b.tmp"
	chmod 0755 "$rootfs/usr/local/bin/$b.tmp"
	mv "$rootfs/usr/local/bin/$b.tmp" "$rootfs/usr/local/bin/$b"
done
install -m 0755 "$here"/lib/* "$rootfs/usr/lib/edgefleet/"
install -m 0644 "$here"/units/* "$rootfs/usr/lib/systemd/system/"

share=$rootfs/usr/share/edgefleet
rm -rf "$share"
install -d -m 0755 "$share/crds/site" "$share/crds/cluster-api" "$share/crds/metal3" "$share/rbac"
install -m 0644 "$repo"/deploy/crds/site/site.edgefleet.io_*.yaml "$share/crds/site/"
install -m 0644 "$capi"/core/config/crd/bases/*.yaml "$share/crds/cluster-api/"
install -m 0644 "$metal3"/config/base/crds/bases/*.yaml "$share/crds/metal3/"
install -m 0644 "$here/manifests/namespace.yaml" "$share/namespace.yaml"
install -m 0644 "$repo/deploy/rbac/local-controller/role.yaml" "$share/rbac/local-controller.yaml"
install -m 0644 "$repo/deploy/rbac/bpa/role.yaml" "$share/rbac/bpa.yaml"
sed 's/^  name: manager-role$/  name: edgefleet-baremetal-operator/' "$metal3/config/base/rbac/role.yaml" >"$share/rbac/baremetal-operator.yaml"
grep -q 'name: edgefleet-baremetal-operator' "$share/rbac/baremetal-operator.yaml" ||
	{ echo "install.sh: Metal3's role.yaml no longer names manager-role; update install.sh" >&2; exit 1; }
install -m 0644 "$here/manifests/bindings.yaml" "$share/rbac/bindings.yaml"
# What `local-controller enroll` applies: the global controller's access to the site.
install -m 0644 "$repo/deploy/rbac/site/global-access.yaml" "$share/site-access.yaml"

ln -sfn /usr/lib/systemd/system/edgefleet-site.target "$rootfs/etc/systemd/system/multi-user.target.wants/edgefleet-site.target"
echo "install.sh: site stack installed into $rootfs"
