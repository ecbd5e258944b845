package charts_test

import (
	"reflect"
	"testing"

	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

func TestWithCluster(t *testing.T) {
	c := packages.ClusterValues{Name: "site-a", KubernetesVersion: "v1.36.3", APIServer: "https://10.0.0.10:6443",
		ServiceCIDR: "10.96.0.0/12", PodCIDR: "10.244.0.0/16", DNSServiceIP: "10.96.0.10", DNSDomain: "cluster.local"}
	facts := map[string]any{"name": "site-a", "kubernetesVersion": "v1.36.3", "apiServer": "https://10.0.0.10:6443",
		"serviceCIDR": "10.96.0.0/12", "podCIDR": "10.244.0.0/16", "dnsServiceIP": "10.96.0.10", "dnsDomain": "cluster.local"}
	tests := []struct {
		name   string
		values map[string]any
		want   map[string]any
	}{
		{"no values", nil, map[string]any{"global": map[string]any{"edgefleet": map[string]any{"cluster": facts}}}},
		{"the site's values kept", map[string]any{"replicas": 2, "global": map[string]any{"registry": "r.example", "edgefleet": map[string]any{"site": "a"}}},
			map[string]any{"replicas": 2, "global": map[string]any{"registry": "r.example", "edgefleet": map[string]any{"site": "a", "cluster": facts}}}},
		{"the facts win over the site's", map[string]any{"global": map[string]any{"edgefleet": map[string]any{"cluster": map[string]any{"dnsServiceIP": "10.0.0.53", "extra": true}}}},
			map[string]any{"global": map[string]any{"edgefleet": map[string]any{"cluster": facts}}}},
		{"a global that is no map replaced", map[string]any{"global": "nothing"}, map[string]any{"global": map[string]any{"edgefleet": map[string]any{"cluster": facts}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopy(tt.values)
			if got := charts.WithCluster(tt.values, c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("WithCluster:\n got %v\nwant %v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.values, before) {
				t.Errorf("the values given changed: %v, were %v", tt.values, before)
			}
		})
	}
}

// deepCopy copies nested maps of values.
func deepCopy(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	out := map[string]any{}
	for k, x := range v {
		if m, ok := x.(map[string]any); ok {
			x = deepCopy(m)
		}
		out[k] = x
	}
	return out
}
