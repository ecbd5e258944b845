package testfleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// simulatedMAC is the boot MAC of the i-th simulated site of a group: boot MACs are unique
// fleet-wide, so two bytes come from the group (the namespace and the name's prefix, before
// its index) and three from i; 52 marks a locally administered address.
func simulatedMAC(ns, name string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(ns + "/" + strings.TrimRight(name, "0123456789")))
	g := h.Sum32()
	return fmt.Sprintf("52:%02x:%02x:%02x:%02x:%02x", g>>8&0xff, g&0xff, i>>16&0xff, i>>8&0xff, i&0xff)
}

// RegisterSimulatedSites registers n Sites named <prefix>-<i> in namespace ns on the global
// cluster, all pointing at the site control plane cp (which a ClusterSimulator answers for), each
// with a cluster running release (none when empty: ready for an install) and one control-plane
// Host (its BMC credentials generated). labels are set on every Site. It returns the Sites' names.
func (f *Fleet) RegisterSimulatedSites(ctx context.Context, cp *controlplane.ControlPlane, ns, prefix string, n int, release string, labels map[string]string) ([]string, error) {
	kc, err := cp.SiteKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	c := f.Global.Client
	if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kc}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, kubeconfig)); err != nil {
		return nil, fmt.Errorf("create kubeconfig secret: %w", err)
	}
	names := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%05d", prefix, i)
		names[i] = name
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs <- f.registerSimulatedSite(ctx, ns, name, kubeconfig.Name, i, release, labels)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (f *Fleet) registerSimulatedSite(ctx context.Context, ns, name, kubeconfigSecret string, i int, release string, labels map[string]string) error {
	c := f.Global.Client
	pw := make([]byte, 12)
	if _, err := rand.Read(pw); err != nil {
		return err
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bmc"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte(hex.EncodeToString(pw))}}
	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: kubeconfigSecret},
			Cluster: &fleetv1.SiteCluster{Release: release, Network: sitev1.ClusterNetwork{
				PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "192.0.2.1"},
			}},
		},
	}
	host := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cp-0"},
		Spec: fleetv1.HostSpec{
			SiteRef: fleetv1.SiteReference{Name: name}, Role: fleetv1.RoleControlPlane,
			BootMACAddress: simulatedMAC(ns, name, i),
			BMC: fleetv1.BMCDetails{Address: "redfish://192.0.2.2/redfish/v1/Systems/" + name,
				CredentialsSecretRef: &fleetv1.SecretReference{Name: creds.Name}},
		},
	}
	for _, o := range []client.Object{creds, site, host} {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, o)); err != nil {
			return fmt.Errorf("register simulated site %s: create %T %s: %w", name, o, o.GetName(), err)
		}
	}
	return nil
}

// CreateSimulatedReleases makes a Release in namespace ns for each name → Kubernetes version
// ("v1.36.3") of releases, the way an operator does with bin/edgefleet: it uploads small
// stand-ins of an OS image (edge-os 1.0: random bytes), kubelet of each version and containerd
// 1.7.24 (valid packages of a random payload, builders.StandInPackage) and a coredns chart 1.12.0
// (random bytes), then runs `edgefleet release create … --wait`. Simulated
// sites (ClusterSimulator.Bootstrap) report those packages and charts as installed.
func (f *Fleet) CreateSimulatedReleases(ctx context.Context, ns string, releases map[string]string) error {
	dir, err := os.MkdirTemp("", "edgefleet-artifacts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	artifacts := []struct{ kind, name, version string }{{"os-image", "edge-os", "1.0"}, {"binary-package", "containerd", "1.7.24"}, {"helm-chart", "coredns", "1.12.0"}}
	for _, v := range releases {
		artifacts = append(artifacts, struct{ kind, name, version string }{"binary-package", "kubelet", strings.TrimPrefix(v, "v")})
	}
	uploaded := map[string]bool{}
	for i, a := range artifacts {
		key := a.kind + " " + a.name + " " + a.version
		if uploaded[key] {
			continue
		}
		uploaded[key] = true
		data, _ := testutil.RandomContent(1024, uint64(i+1))
		if a.kind == "binary-package" {
			if data, _, err = builders.StandInPackage(a.name, a.version, "amd64", 1024, uint64(i+1)); err != nil {
				return err
			}
		}
		file := filepath.Join(dir, strings.ReplaceAll(key, " ", "-"))
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return err
		}
		if _, err := f.Upload(ctx, file, a.kind, a.name, a.version); err != nil {
			return err
		}
	}
	for name, v := range releases {
		if _, err := f.Edgefleet(ctx, "release", "create", name, "-n", ns, "--kubernetes-version", v, "--os-image", "edge-os@1.0",
			"--package", "kubelet@"+strings.TrimPrefix(v, "v"), "--package", "containerd@1.7.24", "--chart", "coredns@1.12.0", "--wait"); err != nil {
			return err
		}
	}
	return nil
}
