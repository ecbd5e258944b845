package index

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// Field index names.
const (
	// HostSite indexes Hosts by "namespace/site" of their spec.siteRef.
	HostSite = "spec.siteRef"
	// HostBootMAC indexes Hosts by their boot MAC, lower-cased.
	HostBootMAC = "spec.bootMACAddress"
	// SiteKubeconfigSecret indexes Sites by "namespace/secret" of their kubeconfig Secret.
	SiteKubeconfigSecret = "spec.kubeconfigSecretRef"
	// HostBMCSecret indexes Hosts by "namespace/secret" of their BMC credentials Secret.
	HostBMCSecret = "spec.bmc.credentialsSecretRef"
	// SiteRelease indexes Sites by "namespace/release" of their spec.cluster.release.
	SiteRelease = "spec.cluster.release"
	// CampaignBlockedBy indexes Campaigns by "namespace/campaign" of each campaign in their
	// spec.blockedBy.
	CampaignBlockedBy = "spec.blockedBy"
)

// Key joins a namespace and a name the way the indexes store references.
func Key(namespace, name string) string { return namespace + "/" + name }

// NormalizeMAC returns the form of a MAC address the HostBootMAC index stores.
func NormalizeMAC(mac string) string { return strings.ToLower(mac) }

// Setup registers every index on the manager's cache.
func Setup(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&fleetv1.Host{}, HostSite, func(o client.Object) []string {
			h := o.(*fleetv1.Host)
			return []string{Key(h.Namespace, h.Spec.SiteRef.Name)}
		}},
		{&fleetv1.Host{}, HostBootMAC, func(o client.Object) []string {
			return []string{NormalizeMAC(o.(*fleetv1.Host).Spec.BootMACAddress)}
		}},
		{&fleetv1.Host{}, HostBMCSecret, func(o client.Object) []string {
			h := o.(*fleetv1.Host)
			if h.Spec.BMC.CredentialsSecretRef == nil {
				return nil
			}
			return []string{Key(h.Namespace, h.Spec.BMC.CredentialsSecretRef.Name)}
		}},
		{&fleetv1.Site{}, SiteKubeconfigSecret, func(o client.Object) []string {
			s := o.(*fleetv1.Site)
			if s.Spec.KubeconfigSecretRef == nil {
				return nil
			}
			return []string{Key(s.Namespace, s.Spec.KubeconfigSecretRef.Name)}
		}},
		{&fleetv1.Site{}, SiteRelease, func(o client.Object) []string {
			s := o.(*fleetv1.Site)
			if s.Spec.Cluster == nil || s.Spec.Cluster.Release == "" {
				return nil
			}
			return []string{Key(s.Namespace, s.Spec.Cluster.Release)}
		}},
		{&fleetv1.Campaign{}, CampaignBlockedBy, func(o client.Object) []string {
			c := o.(*fleetv1.Campaign)
			out := make([]string, 0, len(c.Spec.BlockedBy))
			for _, b := range c.Spec.BlockedBy {
				out = append(out, Key(c.Namespace, b))
			}
			return out
		}},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// ReleaseDigests lists the sha256 of every artifact a Release names, once each, in the order
// OS image, packages, charts, images.
func ReleaseDigests(r *fleetv1.Release) []string {
	var out []string
	for _, a := range r.Spec.Artifacts() {
		out = append(out, a.SHA256)
	}
	return out
}
