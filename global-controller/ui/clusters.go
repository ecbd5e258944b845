package ui

import (
	"cmp"
	"context"
	"slices"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/kubeconfigapi"
)

// maxClusterChecks bounds the SubjectAccessReviews of one "my clusters" page: sites beyond are
// counted, not checked.
const maxClusterChecks = 200

var clusterListPage = page{
	template: "clusters",
	title:    func(*request) string { return "My clusters" },
	load:     (*Server).loadClusters,
	watch:    func(req *request) func(Change) bool { return inNamespace(req.Namespace, KindSite) },
}

// clusterRow is a site whose application cluster the user may get a kubeconfig of.
type clusterRow struct {
	Namespace, Name, Release, Phase string
	// KubeconfigURL is where the page's script asks for the kubeconfig.
	KubeconfigURL string
}

// clustersData is the "my clusters" page: the clusters, and how many sites were not checked.
type clustersData struct {
	Clusters  []clusterRow
	Unchecked int
	// Offered is false when this server issues no kubeconfigs.
	Offered bool
}

// loadClusters lists the sites with an application cluster, in the namespace (all when empty),
// that the user may see (listVisibleSites) and get a kubeconfig of: a SubjectAccessReview of create sites/kubeconfig per
// site (cached like every review of the UI; the issue itself asks afresh), for the first
// maxClusterChecks sites by namespace and name.
func (s *Server) loadClusters(ctx context.Context, req *request) (any, error) {
	sites, err := s.listVisibleSites(ctx, req, req.Namespace)
	if err != nil {
		return nil, err
	}
	d := &clustersData{Offered: s.cfg.Kubeconfigs != nil}
	if !d.Offered {
		return d, nil
	}
	withCluster := slices.DeleteFunc(sites, func(site fleetv1.Site) bool { return site.Spec.Cluster == nil })
	slices.SortFunc(withCluster, func(a, b fleetv1.Site) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for i, site := range withCluster {
		if i == maxClusterChecks {
			d.Unchecked = len(withCluster) - i
			break
		}
		if !s.allowed(ctx, req.User, kubeconfigapi.Grant(site.Namespace, site.Name)) {
			continue
		}
		row := clusterRow{Namespace: site.Namespace, Name: site.Name, Release: site.Spec.Cluster.Release,
			KubeconfigURL: objectURL("sites", site.Namespace, site.Name) + "/kubeconfig"}
		if site.Status.Cluster != nil {
			row.Phase = string(site.Status.Cluster.Phase)
		}
		d.Clusters = append(d.Clusters, row)
	}
	return d, nil
}
