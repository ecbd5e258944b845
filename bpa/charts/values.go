package charts

import (
	"maps"

	"github.com/edgefleet/edgefleet/pkg/packages"
)

// WithCluster returns values with the facts of the cluster c under global.edgefleet.cluster,
// where any chart (and its subcharts: helm passes global down) may read them: name,
// kubernetesVersion, apiServer, serviceCIDR, podCIDR, dnsServiceIP and dnsDomain. The facts
// replace whatever values had there; every other value, global ones included, is kept.
// values is not changed.
func WithCluster(values map[string]any, c packages.ClusterValues) map[string]any {
	out := maps.Clone(values)
	if out == nil {
		out = map[string]any{}
	}
	global, _ := out["global"].(map[string]any)
	global = maps.Clone(global)
	if global == nil {
		global = map[string]any{}
	}
	edgefleet, _ := global["edgefleet"].(map[string]any)
	edgefleet = maps.Clone(edgefleet)
	if edgefleet == nil {
		edgefleet = map[string]any{}
	}
	edgefleet["cluster"] = map[string]any{
		"name":              c.Name,
		"kubernetesVersion": c.KubernetesVersion,
		"apiServer":         c.APIServer,
		"serviceCIDR":       c.ServiceCIDR,
		"podCIDR":           c.PodCIDR,
		"dnsServiceIP":      c.DNSServiceIP,
		"dnsDomain":         c.DNSDomain,
	}
	global["edgefleet"] = edgefleet
	out["global"] = global
	return out
}
