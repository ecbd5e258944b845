#!/usr/bin/env bash
# Builds the binaries the test bed and the demo run, from source through the Go module proxy, and
# links them into bin/. Each binary is kept in a per-user cache outside the clone as NAME-VERSION and
# only rebuilt when its version changes, so a fresh clone on a warm machine takes seconds.
#
#   hack/tools.sh            build (or link) every tool
#   hack/tools.sh NAME...    only these (kube-apiserver kubectl kubelet kube-proxy
#                            kube-controller-manager kube-scheduler etcd etcdctl controller-gen
#                            golangci-lint bmo vault coredns rootfs node-debs chromium qemu nodejs
#                            ironic ipa osimage)
#
# Kubernetes comes in two versions, each built from its own tools module: the current minor
# (hack/tools/kube) and the previous one (hack/tools/kube-1.35); a Kubernetes tool's name builds
# both. bin/NAME is the current version's; bin/kube/VERSION/NAME is each version's, where the
# package recipes (hack/packages) find a binary by the package's version.
#
# rootfs is not a binary: it is the Debian root filesystem the test hosts boot (hack/rootfs.sh;
# needs root), a directory cached as rootfs-bookworm-<hash> and linked at bin/rootfs. node-debs
# are the .deb files of a node's container runtime (containerd, runc, CNI plugins) that tests
# unpack into a test host (hack/node-debs.sh), cached as node-debs-bookworm-<hash>, linked at
# bin/node-debs.
#
# ironic is not a binary either: it is a Debian trixie tree holding Ironic 29 (hack/ironic.sh; needs
# root), which test/ironic runs with chroot, cached as ironic-<version>-<hash> and linked at
# bin/ironic-root (~5 minutes and ~700 MB the first time on a machine, then cached).
#
# ipa is the Ironic Python Agent's ramdisk Ironic boots on the test bed's machines (hack/ipa.sh;
# needs root): a directory holding a kernel (vmlinuz) and an initramfs built from Debian trixie's
# ironic-python-agent, cached as ipa-<version>-<hash> and linked at bin/ipa (~7 minutes and
# ~400 MB the first time).
#
# osimage is the OS disk image Ironic's agent writes to a machine's disk (hack/osimage.sh; needs
# root): a directory holding a whole-disk, BIOS-bootable Debian bookworm image with cloud-init for
# Ironic's config drive (disk.qcow2) and its sha256 (disk.qcow2.sha256), cached as
# osimage-<version>-<hash> and linked at bin/osimage.
#
# chromium is not built either: it is Debian's package (/usr/bin/chromium), which the web UI's
# browser tests drive headless (e2e/ui). It is installed with apt-get when it is missing; nothing
# is linked into bin/. So is qemu: Debian's qemu-system-x86 and ovmf (UEFI firmware), which boot
# the site image in the usb-image boot test, with xorriso, which makes the small ISO images of
# tests (pkg/siteimage/siteimagetest). nodejs is Debian's Node.js when no node is on PATH: the web
# UI's unit test runs the browser's CSR code in it (global-controller/ui).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${EDGEFLEET_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgefleet/tools}
bin=$root/bin
mkdir -p "$cache" "$bin"

# Versions. The Kubernetes, etcd and Vault pins live in the tools modules under hack/tools/; Metal3's
# baremetal-operator is a tool of the main module (its go.mod 'tool' line), so that the
# operator and the apis the tests import are the same version.
kube_modules=(kube kube-1.35) # the current Kubernetes first
kube_version() { awk '$1 == "k8s.io/kubernetes" {print $2}' "$root/hack/tools/$1/go.mod"; }
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2}' "$root/hack/tools/etcd/go.mod")
vault_version=$(awk '$1 == "github.com/hashicorp/vault" {print $2}' "$root/hack/tools/vault/go.mod")
coredns_version=$(awk '$1 == "github.com/coredns/coredns" {print $2}' "$root/hack/tools/coredns/go.mod")
bmo_version=$(awk '$1 == "github.com/metal3-io/baremetal-operator" {print $2}' "$root/go.mod")
controller_gen_version=v0.22.0
golangci_lint_version=v2.15.0

# link NAME VERSION [LINK]: point LINK (default bin/NAME) at the cached build.
link() {
	local to=${3:-$bin/$1}
	mkdir -p "$(dirname "$to")"
	ln -sfn "$cache/$1-$2" "$to"
}

# cached NAME VERSION: true when the cached build exists.
cached() {
	if [[ -x "$cache/$1-$2" ]]; then
		echo "tools: $1 $2 (cached)"
		return 0
	fi
	return 1
}

# build_tool NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]: go build PACKAGE inside a tools module,
# linked at bin/NAME.
build_tool() {
	build_cached "$@"
	link "$1" "$2"
}

# build_cached NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]: go build PACKAGE inside a tools module into
# the cache, unless it is there.
build_cached() {
	local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-}
	cached "$name" "$version" && return 0
	echo "tools: building $name $version from source (first time on this machine; cached afterwards)"
	local start=$SECONDS
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$cache/$name-$version.tmp" "$pkg")
	mv "$cache/$name-$version.tmp" "$cache/$name-$version"
	echo "tools: built $name $version in $((SECONDS - start))s"
}

# build_kube NAME: k8s.io/kubernetes/cmd/NAME of every Kubernetes tools module, linked at
# bin/kube/VERSION/NAME; bin/NAME is the current version's.
build_kube() {
	local name=$1 m version
	for m in "${kube_modules[@]}"; do
		version=$(kube_version "$m")
		build_cached "$name" "$version" "$root/hack/tools/$m" "k8s.io/kubernetes/cmd/$name" "$(kube_ldflags "$version")"
		link "$name" "$version" "$bin/kube/$version/$name"
	done
	link "$name" "$(kube_version "${kube_modules[0]}")"
}

# install_tool NAME VERSION PACKAGE: go install PACKAGE@VERSION (tools that are their own module).
install_tool() {
	local name=$1 version=$2 pkg=$3
	cached "$name" "$version" && { link "$name" "$version"; return 0; }
	echo "tools: installing $name $version from source"
	local start=$SECONDS tmp
	tmp=$(mktemp -d)
	GOBIN=$tmp go install "$pkg@$version"
	mv "$tmp/$(basename "$pkg")" "$cache/$name-$version"
	rmdir "$tmp"
	link "$name" "$version"
	echo "tools: installed $name $version in $((SECONDS - start))s"
}

# kube_ldflags VERSION: the version Kubernetes' binaries report.
kube_ldflags() {
	local v=$1 major minor
	major=${v#v}; major=${major%%.*}
	minor=${v#v*.}; minor=${minor%%.*}
	local f
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	echo "$f"
}

want=("$@")
[[ ${#want[@]} -eq 0 ]] && want=(etcd etcdctl kube-apiserver kubectl kubelet kube-proxy kube-controller-manager kube-scheduler controller-gen golangci-lint bmo vault coredns rootfs node-debs ironic ipa osimage chromium qemu nodejs)

for t in "${want[@]}"; do
	case $t in
	etcd) build_tool etcd "$etcd_version" "$root/hack/tools/etcd" go.etcd.io/etcd/server/v3 ;;
	# The etcd package's join and leave hooks change the cluster's membership with it.
	etcdctl) build_tool etcdctl "$etcd_version" "$root/hack/tools/etcd" go.etcd.io/etcd/etcdctl/v3 ;;
	# All static (CGO_ENABLED=0): kubelet and kube-proxy run inside the test hosts' Debian rootfs.
	kube-apiserver | kubectl | kubelet | kube-proxy | kube-controller-manager | kube-scheduler) build_kube "$t" ;;
	controller-gen) install_tool controller-gen "$controller_gen_version" sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	bmo)
		[[ -n $bmo_version ]] || { echo "tools: github.com/metal3-io/baremetal-operator is not required in go.mod" >&2; exit 1; }
		build_tool bmo "$bmo_version" "$root" github.com/metal3-io/baremetal-operator "-X github.com/metal3-io/baremetal-operator/pkg/version.Raw=$bmo_version" ;;
	vault) build_tool vault "$vault_version" "$root/hack/tools/vault" github.com/hashicorp/vault ;;
	# Static: it runs in the coredns image (hack/images), which holds nothing else.
	coredns) build_tool coredns "$coredns_version" "$root/hack/tools/coredns" github.com/coredns/coredns ;;
	rootfs)
		path=$("$root/hack/rootfs.sh" "$cache")
		ln -sfn "$path" "$bin/rootfs"
		echo "tools: rootfs $(basename "$path")" ;;
	ironic)
		path=$("$root/hack/ironic.sh" "$cache")
		ln -sfn "$path" "$bin/ironic-root"
		echo "tools: ironic $(basename "$path")" ;;
	ipa)
		path=$("$root/hack/ipa.sh" "$cache")
		ln -sfn "$path" "$bin/ipa"
		echo "tools: ipa $(basename "$path")" ;;
	osimage)
		path=$("$root/hack/osimage.sh" "$cache")
		ln -sfn "$path" "$bin/osimage"
		echo "tools: osimage $(basename "$path")" ;;
	node-debs)
		path=$("$root/hack/node-debs.sh" "$cache" "$("$root/hack/rootfs.sh" "$cache")")
		ln -sfn "$path" "$bin/node-debs"
		echo "tools: node-debs $(basename "$path")" ;;
	chromium)
		if [[ ! -x /usr/bin/chromium ]]; then
			echo "tools: installing Debian's chromium with apt-get (for the web UI's browser tests)"
			apt-get install -y --no-install-recommends chromium ||
				{ apt-get update && apt-get install -y --no-install-recommends chromium; }
		fi
		echo "tools: chromium $(/usr/bin/chromium --version 2>/dev/null || echo '(version unknown)')" ;;
	qemu)
		if [[ ! -x /usr/bin/qemu-system-x86_64 || ! -f /usr/share/OVMF/OVMF_CODE_4M.fd || ! -x /usr/bin/xorriso ]]; then
			echo "tools: installing Debian's qemu-system-x86, ovmf and xorriso with apt-get (for the site image's boot test and the small site images of tests)"
			apt-get install -y --no-install-recommends qemu-system-x86 ovmf xorriso ||
				{ apt-get update && apt-get install -y --no-install-recommends qemu-system-x86 ovmf xorriso; }
		fi
		echo "tools: $(/usr/bin/qemu-system-x86_64 --version 2>/dev/null | head -n1 || echo 'qemu (version unknown)')" ;;
	nodejs)
		if ! command -v node >/dev/null; then
			echo "tools: installing Debian's nodejs with apt-get (the web UI's unit test runs its CSR code in Node)"
			apt-get install -y --no-install-recommends nodejs ||
				{ apt-get update && apt-get install -y --no-install-recommends nodejs; }
		fi
		echo "tools: node $(node --version)" ;;
	golangci-lint) install_tool golangci-lint "$golangci_lint_version" github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
	*) echo "tools: unknown tool $t" >&2; exit 2 ;;
	esac
done
