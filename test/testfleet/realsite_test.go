package testfleet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/testhosts"
)

// TestRealSiteManifest: the Site and Hosts a real site registers, with and without its cluster
// network.
func TestRealSiteManifest(t *testing.T) {
	hn := &testhosts.HostNet{}
	for i, name := range []string{"cp-0", "w-0", "w-1"} {
		hn.Hosts = append(hn.Hosts, &testhosts.Host{Name: name, IP: netip.AddrFrom4([4]byte{10, 233, 7, byte(10 + i)}), MAC: net.HardwareAddr{2, 0xef, 0, 0, 0, byte(i)}})
	}
	for _, network := range []bool{false, true} {
		opts := RealSiteOptions{Name: "s", Namespace: "ns", Labels: map[string]string{"ring": "a"}, Hosts: hn, ControlPlanes: 1, Network: network}
		manifest, err := opts.manifest("http://127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
		var site fleetv1.Site
		if err := dec.Decode(&site); err != nil {
			t.Fatalf("network %v: %v\n%s", network, err, manifest)
		}
		if site.Name != "s" || site.Labels["ring"] != "a" || site.Spec.ArtifactAPIURL != "http://127.0.0.1:1" || site.Spec.KubeconfigSecretRef.Name != "s-kubeconfig" {
			t.Errorf("network %v: site %+v", network, site)
		}
		switch {
		case !network && site.Spec.Cluster != nil:
			t.Errorf("a site registered without its network has spec.cluster %+v", site.Spec.Cluster)
		case network && (site.Spec.Cluster == nil || site.Spec.Cluster.Release != "" || site.Spec.Cluster.Network.ControlPlaneEndpoint.Host != "10.233.7.10" ||
			site.Spec.Cluster.Network.PodCIDRs[0] != "10.244.0.0/16"):
			t.Errorf("a site registered with its network has spec.cluster %+v", site.Spec.Cluster)
		}
		var roles []fleetv1.HostRole
		for {
			var h fleetv1.Host
			if err := dec.Decode(&h); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if h.Spec.SiteRef.Name != "s" || h.Spec.BootMACAddress != hn.Hosts[len(roles)].MAC.String() || h.Spec.Address != hn.Hosts[len(roles)].IP.String() {
				t.Errorf("host %s: %+v", h.Name, h.Spec)
			}
			roles = append(roles, h.Spec.Role)
		}
		if want := []fleetv1.HostRole{fleetv1.RoleControlPlane, fleetv1.RoleWorker, fleetv1.RoleWorker}; len(roles) != 3 || roles[0] != want[0] || roles[2] != want[2] {
			t.Errorf("roles %v, want %v", roles, want)
		}
	}
}

// TestRealSiteManifestRegistersSomeHosts: with Registered, the Site's manifest has the first
// hosts only; hostManifest gives a later one, with its role.
func TestRealSiteManifestRegistersSomeHosts(t *testing.T) {
	hn := &testhosts.HostNet{}
	for i, name := range []string{"cp-0", "w-0", "w-1"} {
		hn.Hosts = append(hn.Hosts, &testhosts.Host{Name: name, IP: netip.AddrFrom4([4]byte{10, 233, 7, byte(10 + i)}), MAC: net.HardwareAddr{2, 0xef, 0, 0, 0, byte(i)}})
	}
	opts := RealSiteOptions{Name: "s", Namespace: "ns", Hosts: hn, ControlPlanes: 1, Registered: 2}
	manifest, err := opts.manifest("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count([]byte(manifest), []byte("kind: Host\n")); n != 2 {
		t.Errorf("%d Hosts in the site's manifest, want 2:\n%s", n, manifest)
	}
	var h fleetv1.Host
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(opts.hostManifest(2, fleetv1.RoleWorker))), 4096).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.Name != "w-1" || h.Spec.Role != fleetv1.RoleWorker || h.Spec.Address != "10.233.7.12" || h.Spec.SiteRef.Name != "s" {
		t.Errorf("the later host: %+v", h)
	}
}

// TestRealSiteManifestInFleetVault: with FleetVault, the Site's kubeconfig and every Host's BMC
// credentials (a later one's too) are referenced in the Fleet's Vault, no Secret.
func TestRealSiteManifestInFleetVault(t *testing.T) {
	hn := &testhosts.HostNet{}
	for i, name := range []string{"cp-0", "w-0"} {
		hn.Hosts = append(hn.Hosts, &testhosts.Host{Name: name, IP: netip.AddrFrom4([4]byte{10, 233, 7, byte(10 + i)}), MAC: net.HardwareAddr{2, 0xef, 0, 0, 0, byte(i)}})
	}
	opts := RealSiteOptions{Name: "s", Namespace: "ns", Hosts: hn, ControlPlanes: 1, Registered: 1, FleetVault: true}
	manifest, err := opts.manifest("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest+opts.hostManifest(1, fleetv1.RoleWorker))), 4096)
	var site fleetv1.Site
	if err := dec.Decode(&site); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	if site.Spec.KubeconfigSecretRef != nil || site.Spec.KubeconfigVaultRef == nil || site.Spec.KubeconfigVaultRef.Path != "sites/s" {
		t.Errorf("site's kubeconfig: secret %+v, Vault %+v; want Vault entry sites/s only", site.Spec.KubeconfigSecretRef, site.Spec.KubeconfigVaultRef)
	}
	for _, name := range []string{"cp-0", "w-0"} {
		var h fleetv1.Host
		if err := dec.Decode(&h); err != nil {
			t.Fatal(err)
		}
		if b := h.Spec.BMC; h.Name != name || b.CredentialsSecretRef != nil || b.CredentialsVaultRef == nil || b.CredentialsVaultRef.Path != "bmc/"+name {
			t.Errorf("host %s (want %s): BMC credentials in secret %+v, Vault %+v; want Vault entry bmc/%[2]s only", h.Name, name, b.CredentialsSecretRef, b.CredentialsVaultRef)
		}
	}
}
