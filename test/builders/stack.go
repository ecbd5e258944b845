package builders

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PackageVersion names a test-bed package (hack/packages) at a version.
type PackageVersion struct{ Name, Version string }

// Kubernetes versions the test beds build (hack/tools/kube, hack/tools/kube-1.35): the current
// minor, which every real cluster runs unless a test says otherwise, and the previous one, which
// upgrades start from.
const (
	KubernetesVersion         = "1.36.3"
	PreviousKubernetesVersion = "1.35.8"
)

// KubernetesPackages are the packages of the real node stack that are Kubernetes' own, built
// at the stack's Kubernetes version: an upgrade changes these.
func KubernetesPackages() []string {
	return []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}
}

// StackPackages are the packages of the real node stack at their versions, Kubernetes' own at
// kube (KubernetesVersion, PreviousKubernetesVersion), in the order a Release lists them: etcd,
// kube-apiserver (control plane), api-proxy (every host), kube-controller-manager,
// kube-scheduler (control plane), containerd, pod-network, kubelet, kube-proxy (every host).
func StackPackages(kube string) []PackageVersion {
	return []PackageVersion{
		{"etcd", "3.6.16"}, {"kube-apiserver", kube}, {"api-proxy", "0.1.0"}, {"kube-controller-manager", kube}, {"kube-scheduler", kube},
		{"containerd", "1.6.20~ds1-1+deb12u3"}, {"pod-network", "0.1.0"}, {"kubelet", kube}, {"kube-proxy", kube},
	}
}

// StackArtifact is one artifact of a Release of the real node stack, built to a file.
type StackArtifact struct {
	// Path of the file.
	Path string
	// Kind is the artifact kind: binary-package, container-image-archive or helm-chart.
	Kind string
	// Name and Version are the artifact's.
	Name, Version string
}

// StackImages are the images a cluster of the real node stack runs (hack/images): the pause
// image, CoreDNS and the test application.
func StackImages() []string { return []string{"pause", "coredns", "webapp"} }

// StackCharts are the charts installed into a cluster of the real node stack (hack/charts):
// CoreDNS and the test application.
func StackCharts() []string { return []string{"coredns", "webapp"} }

// BuildStack builds into dir what a Release of the real node stack at Kubernetes version kube
// lists besides its OS image: the StackPackages, the StackImages and the StackCharts. An image's
// version is its tag's.
func BuildStack(ctx context.Context, dir, kube string) ([]StackArtifact, error) {
	var out []StackArtifact
	for _, p := range StackPackages(kube) {
		built, err := BuildPackageIn(dir, p.Name, p.Version, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, StackArtifact{Path: built.Path, Kind: "binary-package", Name: p.Name, Version: p.Version})
	}
	for _, name := range StackImages() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := BuildImageIn(dir, name)
		if err != nil {
			return nil, err
		}
		_, version, _ := strings.Cut(img.Tag[strings.LastIndex(img.Tag, "/")+1:], ":")
		path := filepath.Join(dir, name+"-"+version+".oci.tar")
		if err := os.WriteFile(path, img.Archive, 0o644); err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		out = append(out, StackArtifact{Path: path, Kind: "container-image-archive", Name: name, Version: version})
	}
	for _, name := range StackCharts() {
		chart, err := BuildChartIn(dir, name, "", nil)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, chart.Name+"-"+chart.Version+".tgz")
		if err := os.WriteFile(path, chart.Archive, 0o644); err != nil {
			return nil, fmt.Errorf("chart %s: %w", name, err)
		}
		out = append(out, StackArtifact{Path: path, Kind: "helm-chart", Name: chart.Name, Version: chart.Version})
	}
	return out, nil
}
