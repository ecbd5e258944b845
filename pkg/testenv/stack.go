package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
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

// CreateStackRelease makes a Release name in namespace ns of the real node stack at Kubernetes
// version kube the way an operator does with bin/edgefleet: it builds the stack into dir
// (BuildStack), uploads it with an OS image of random bytes (edge-os 1.0, 1 MiB: the test hosts
// boot their own root filesystem), then runs `edgefleet release create … --wait`; it returns
// the Release.
func (f *Fleet) CreateStackRelease(ctx context.Context, ns, name, dir, kube string) (*fleetv1.Release, error) {
	image, _ := RandomContent(1<<20, 1)
	imagePath := filepath.Join(dir, "edge-os-1.0.img")
	if err := os.WriteFile(imagePath, image, 0o600); err != nil {
		return nil, err
	}
	if _, err := f.Upload(ctx, imagePath, "os-image", "edge-os", "1.0"); err != nil {
		return nil, fmt.Errorf("stack release %s: %w", name, err)
	}
	built, err := BuildStack(ctx, dir, kube)
	if err != nil {
		return nil, fmt.Errorf("stack release %s: %w", name, err)
	}
	args := []string{"release", "create", name, "-n", ns, "--kubernetes-version", "v" + kube, "--os-image", "edge-os@1.0", "--wait"}
	flag := map[string]string{"binary-package": "--package", "container-image-archive": "--image", "helm-chart": "--chart"}
	for _, a := range built {
		if _, err := f.Upload(ctx, a.Path, a.Kind, a.Name, a.Version); err != nil {
			return nil, fmt.Errorf("stack release %s: %w", name, err)
		}
		args = append(args, flag[a.Kind], a.Name+"@"+a.Version)
	}
	if out, err := f.Edgefleet(ctx, args...); err != nil {
		return nil, fmt.Errorf("stack release %s: %w: %s", name, err, out)
	}
	release := &fleetv1.Release{}
	if err := f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, release); err != nil {
		return nil, err
	}
	return release, nil
}
