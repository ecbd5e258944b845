package testfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// RealSiteOptions describe a site of a Fleet whose hosts are test hosts.
type RealSiteOptions struct {
	// Name of the Site: a site control plane of the Fleet of that name stands for it.
	Name string
	// Namespace of the Site and its Hosts on the global cluster.
	Namespace string
	// Labels of the Site.
	Labels map[string]string
	// Hosts are the site's machines: the first ControlPlanes are control plane, the rest
	// workers. Each gets a Host of its name, boot MAC and address.
	Hosts         *testhosts.HostNet
	ControlPlanes int
	// Registered is how many of Hosts (the first ones) get their Host at the start; 0: all.
	// Fleet.RegisterRealHost registers another one later (a scale-out).
	Registered int
	// Vault keeps the site's BPA's secrets, under edgefleet/<Name>.
	Vault *testvault.Vault
	// FleetVault keeps the Site's kubeconfig and its Hosts' BMC credentials in the Fleet's
	// Vault (FleetOptions.Vault), as Apply writes them: the Site references entry
	// sites/<Name> (kubeconfigVaultRef), each Host bmc/<host> (credentialsVaultRef). Without it
	// they are the Secrets <Name>-kubeconfig and <host>-bmc.
	FleetVault bool
	// Network registers the Site with its cluster network (Hosts.ClusterNetwork) but no release:
	// a release set later, by hand or by a campaign, makes it a cluster. Without it the Site has
	// no spec.cluster until one is set.
	Network bool
	// Report receives what goes wrong while the hosts are booted as Metal3 provisions them
	// (HostNet.PlayIronic).
	Report func(error)
}

// StartRealSite starts what runs at a site whose hosts are real (needs root): Metal3 (fixture
// provisioner; stopped with the Fleet), the local controller with the BPA as bootstrap provider,
// the BPA (StartRealSiteBPA) and the harness's Ironic for the hosts (HostNet.PlayIronic); then it
// registers the Site and its Hosts on the global cluster (Apply, with generated BMC
// credentials; the manifest is kept in the Fleet's directory). stop stops the local controller,
// the BPA and the Ironic; on error, what was started is stopped already.
func (f *Fleet) StartRealSite(ctx context.Context, opts RealSiteOptions) (stop func() error, err error) {
	site, ok := f.Sites[opts.Name]
	if !ok {
		return nil, fmt.Errorf("real site %s: no site control plane of that name", opts.Name)
	}
	if opts.ControlPlanes < 1 || opts.ControlPlanes > len(opts.Hosts.Hosts) {
		return nil, fmt.Errorf("real site %s: %d control-plane hosts of %d hosts", opts.Name, opts.ControlPlanes, len(opts.Hosts.Hosts))
	}
	if opts.Registered < 0 || opts.Registered > len(opts.Hosts.Hosts) || (opts.Registered > 0 && opts.Registered < opts.ControlPlanes) {
		return nil, fmt.Errorf("real site %s: %d hosts registered of %d, with %d control-plane hosts", opts.Name, opts.Registered, len(opts.Hosts.Hosts), opts.ControlPlanes)
	}
	if opts.FleetVault && f.Vault == nil {
		return nil, fmt.Errorf("real site %s: its kubeconfig and BMC credentials in the Fleet's Vault, but the Fleet has none (FleetOptions.Vault)", opts.Name)
	}
	siteClient, err := client.New(site.Config, client.Options{Scheme: metal3.Scheme()})
	if err != nil {
		return nil, err
	}
	var stops []func() error
	// stopAll, not stop: a return on error sets stop to nil before the deferred call.
	stopAll := func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stopAll())
		}
	}()
	if err := f.StartSiteMetal3(ctx, opts.Name); err != nil {
		return nil, err
	}
	if _, err := f.StartLocalController(ctx, opts.Name); err != nil {
		return nil, err
	}
	stops = append(stops, func() error { return f.StopLocalController(opts.Name) })
	if _, err := f.StartRealSiteBPA(ctx, opts.Name, opts.Vault); err != nil {
		return nil, err
	}
	stops = append(stops, func() error { return f.StopBPA(opts.Name) })
	stopIronic := opts.Hosts.PlayIronic(context.Background(), siteClient, sitev1.HostsNamespace, f.LocalController(opts.Name).CacheCAFile, opts.Report)
	stops = append(stops, func() error { stopIronic(); return nil })

	manifest, err := opts.manifest(f.APIURL)
	if err != nil {
		return nil, err
	}
	if err := f.applyManifest(ctx, opts.Name+".yaml", manifest); err != nil {
		return nil, err
	}
	return stopAll, nil
}

// RegisterRealHost registers the Host of opts.Hosts.Hosts[i] of a real site with role (a
// host StartRealSite was started without, RealSiteOptions.Registered, or one taken off the
// site since): its site provisions it and its cluster takes it in.
func (f *Fleet) RegisterRealHost(ctx context.Context, opts RealSiteOptions, i int, role fleetv1.HostRole) error {
	if i < 0 || i >= len(opts.Hosts.Hosts) {
		return fmt.Errorf("real site %s: no host %d of %d", opts.Name, i, len(opts.Hosts.Hosts))
	}
	return f.applyManifest(ctx, opts.Hosts.Hosts[i].Name+".yaml", opts.hostManifest(i, role))
}

// applyManifest keeps manifest in the Fleet's directory as name and applies it.
func (f *Fleet) applyManifest(ctx context.Context, name, manifest string) error {
	file := filepath.Join(f.Dir, name)
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		return err
	}
	return f.Apply(ctx, file)
}

// StartRealSiteBPA (re)starts a real site's BPA, its secrets in vault under edgefleet/<site>,
// with args added to its command line.
func (f *Fleet) StartRealSiteBPA(ctx context.Context, site string, vault *testvault.Vault, args ...string) (BPA, error) {
	return f.StartBPA(ctx, site, vault, append([]string{"--vault-prefix", "edgefleet/" + site}, args...)...)
}

// manifest is the Site and its Hosts, as an operator would write them.
func (o RealSiteOptions) manifest(artifactAPIURL string) (string, error) {
	labels, err := json.Marshal(o.Labels)
	if err != nil {
		return "", err
	}
	var cluster string
	if o.Network {
		network, err := json.Marshal(o.Hosts.ClusterNetwork())
		if err != nil {
			return "", err
		}
		cluster = fmt.Sprintf("  cluster: {network: %s}\n", network)
	}
	kubeconfig := fmt.Sprintf("kubeconfigSecretRef: {name: %s-kubeconfig}", o.Name)
	if o.FleetVault {
		kubeconfig = fmt.Sprintf("kubeconfigVaultRef: {path: sites/%s}", o.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: fleet.edgefleet.io/v1alpha1
kind: Site
metadata: {name: %s, namespace: %s, labels: %s}
spec:
  %s
  artifactAPIURL: %s
%s`, o.Name, o.Namespace, labels, kubeconfig, artifactAPIURL, cluster)
	registered := len(o.Hosts.Hosts)
	if o.Registered > 0 {
		registered = o.Registered
	}
	for i := range registered {
		role := fleetv1.RoleControlPlane
		if i >= o.ControlPlanes {
			role = fleetv1.RoleWorker
		}
		b.WriteString(o.hostManifest(i, role))
	}
	return b.String(), nil
}

// hostManifest is the Host of o.Hosts.Hosts[i] with role.
func (o RealSiteOptions) hostManifest(i int, role fleetv1.HostRole) string {
	h := o.Hosts.Hosts[i]
	credentials := fmt.Sprintf("credentialsSecretRef: {name: %s-bmc}", h.Name)
	if o.FleetVault {
		credentials = fmt.Sprintf("credentialsVaultRef: {path: bmc/%s}", h.Name)
	}
	return fmt.Sprintf(`---
apiVersion: fleet.edgefleet.io/v1alpha1
kind: Host
metadata: {name: %s, namespace: %s}
spec:
  siteRef: {name: %s}
  role: %s
  bootMACAddress: "%s"
  address: %s
  bmc:
    address: redfish+http://192.0.2.%d/redfish/v1/Systems/1
    %s
`, h.Name, o.Namespace, o.Name, role, h.MAC, h.IP, 60+i, credentials)
}

// WaitSitesReady waits until the global controller reports the Sites of namespace ns Ready, up
// to two minutes.
func (f *Fleet) WaitSitesReady(ctx context.Context, ns string, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var pending []string
		for _, name := range names {
			site := &fleetv1.Site{}
			if err := f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, site); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(site.Status.Conditions, fleetv1.SiteReadyCondition) {
				pending = append(pending, name)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sites not Ready: %s: %w", strings.Join(pending, ", "), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
