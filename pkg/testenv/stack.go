package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// PackageVersion names a test-bed package (hack/packages) at a version.
type PackageVersion struct{ Name, Version string }

// StackPackages are the packages of the real node stack at their versions, in the order a
// Release lists them: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (control
// plane), containerd, pod-network, kubelet, kube-proxy (every host).
func StackPackages() []PackageVersion {
	return []PackageVersion{
		{"etcd", "3.6.16"}, {"kube-apiserver", "1.36.3"}, {"kube-controller-manager", "1.36.3"}, {"kube-scheduler", "1.36.3"},
		{"containerd", "1.6.20~ds1-1+deb12u3"}, {"pod-network", "0.1.0"}, {"kubelet", "1.36.3"}, {"kube-proxy", "1.36.3"},
	}
}

// PauseImage is the sandbox image the containerd recipe's configuration names; the tiny image
// (NodeImage) is tagged with it too, and stands in for it.
const PauseImage = "registry.k8s.io/pause:3.10"

// StackArtifact is one artifact of a Release of the real node stack, built to a file.
type StackArtifact struct {
	// Path of the file.
	Path string
	// Kind is the artifact kind: binary-package, container-image-archive or helm-chart.
	Kind string
	// Name and Version are the artifact's.
	Name, Version string
}

// BuildStack builds into dir what a Release of the real node stack lists besides its OS image:
// the StackPackages, the image archive the nodes' pods run, and the charts installed into the
// cluster (hello 0.1.0).
func BuildStack(ctx context.Context, dir string) ([]StackArtifact, error) {
	var out []StackArtifact
	for _, p := range StackPackages() {
		built, err := BuildPackageIn(dir, p.Name, p.Version, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, StackArtifact{Path: built.Path, Kind: "binary-package", Name: p.Name, Version: p.Version})
	}
	image, err := BuildNodeImage(ctx, dir, NodeImage, PauseImage)
	if err != nil {
		return nil, err
	}
	imagePath := filepath.Join(dir, "tiny-1.tar")
	if err := os.WriteFile(imagePath, image, 0o644); err != nil {
		return nil, fmt.Errorf("image tiny: %w", err)
	}
	out = append(out, StackArtifact{Path: imagePath, Kind: "container-image-archive", Name: "tiny", Version: "1"})
	chart, err := BuildChartIn(dir, "hello", "0.1.0", nil)
	if err != nil {
		return nil, err
	}
	chartPath := filepath.Join(dir, "hello-0.1.0.tgz")
	if err := os.WriteFile(chartPath, chart.Archive, 0o644); err != nil {
		return nil, fmt.Errorf("chart hello: %w", err)
	}
	out = append(out, StackArtifact{Path: chartPath, Kind: "helm-chart", Name: chart.Name, Version: chart.Version})
	return out, nil
}
