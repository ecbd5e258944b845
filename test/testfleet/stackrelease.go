package testfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// CreateStackRelease makes a Release name in namespace ns of the real node stack at Kubernetes
// version kube the way an operator does with bin/edgefleet: it builds the stack into dir
// (BuildStack), uploads it with an OS image of random bytes (edge-os 1.0, 1 MiB: the test hosts
// boot their own root filesystem), then runs `edgefleet release create … --wait`; it returns
// the Release.
func (f *Fleet) CreateStackRelease(ctx context.Context, ns, name, dir, kube string) (*fleetv1.Release, error) {
	image, _ := testutil.RandomContent(1<<20, 1)
	imagePath := filepath.Join(dir, "edge-os-1.0.img")
	if err := os.WriteFile(imagePath, image, 0o600); err != nil {
		return nil, err
	}
	if _, err := f.Upload(ctx, imagePath, "os-image", "edge-os", "1.0"); err != nil {
		return nil, fmt.Errorf("stack release %s: %w", name, err)
	}
	built, err := builders.BuildStack(ctx, dir, kube)
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
