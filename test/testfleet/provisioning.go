package testfleet

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
)

// StartSiteProvisioning prepares a site of the Fleet to provision its application cluster:
// Metal3's operator in test mode watching the site's namespaces (StartSiteMetal3), and a control
// plane standing for the application cluster, whose admin kubeconfig goes into the Secret
// <site>-kubeconfig in Cluster-API's format — what the BPA stores once it brought the cluster
// up, and where the local controller's node simulator registers the nodes. Fleet.Stop stops
// both.
func (f *Fleet) StartSiteProvisioning(ctx context.Context, site string) error {
	cp, ok := f.Sites[site]
	if !ok {
		return fmt.Errorf("no site control plane %q", site)
	}
	if err := f.StartSiteMetal3(ctx, site); err != nil {
		return err
	}
	app, err := startEncrypted(controlplane.Options{Name: site + "-application"})
	if err != nil {
		return err
	}
	f.stops = append(f.stops, app.Stop)
	f.Applications[site] = app
	kc, err := app.AdminKubeconfig()
	if err != nil {
		return err
	}
	// The ApplicationCluster, and so the Cluster-API Cluster, is named after the Site.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: site + "-kubeconfig",
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": site}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kc},
	}
	if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, secret)); err != nil {
		return fmt.Errorf("store the application cluster's kubeconfig on %s: %w", site, err)
	}
	return nil
}

// StartSiteMetal3 starts Metal3's operator in test mode watching the site's edgefleet-hosts
// (BareMetalHosts and their BMC Secrets) and edgefleet-system (the hosts' first-boot data)
// namespaces; Fleet.Stop stops it. With the site's BPA (StartBPA) and real test hosts
// (HostNet.PlayIronic) the application cluster is built for real.
func (f *Fleet) StartSiteMetal3(ctx context.Context, site string) error {
	cp, ok := f.Sites[site]
	if !ok {
		return fmt.Errorf("no site control plane %q", site)
	}
	m3, err := metal3.Start(ctx, cp, metal3.Options{Namespaces: []string{sitev1.HostsNamespace, sitev1.InfoNamespace}, Dir: filepath.Join(f.Dir, site+"-metal3")})
	if err != nil {
		return err
	}
	f.stops = append(f.stops, m3.Stop)
	return nil
}
