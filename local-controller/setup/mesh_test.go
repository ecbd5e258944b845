package setup

import (
	"reflect"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
)

// TestMeshComponentOpensTheSiteCacheOnly checks that the local controller's policies open the
// site cache's port to the site's BPA and Ironic (or the flags' callers) and nothing else.
func TestMeshComponentOpensTheSiteCacheOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   []meshpolicy.Port
	}{
		{"defaults: the BPA and Ironic", func(*Options) {}, []meshpolicy.Port{{Name: "site cache", Number: 8180, Principals: []string{
			"cluster.local/ns/edgefleet-system/sa/edgefleet-bpa", "cluster.local/ns/edgefleet-system/sa/ironic",
		}}}},
		{"the provisioning network too", func(o *Options) {
			o.Namespace, o.CacheAddr = "site", "10.0.0.2:9000"
			o.IstioCachePrincipals = []string{meshpolicy.ServiceAccount("site", "bpa")}
			o.IstioCacheSourceRanges = []string{"192.168.10.0/24"}
		}, []meshpolicy.Port{{Name: "site cache", Number: 9000, Principals: []string{"cluster.local/ns/site/sa/bpa"}, SourceRanges: []string{"192.168.10.0/24"}}}},
		{"a port picked at random stays closed", func(o *Options) { o.CacheAddr = "127.0.0.1:0" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			c, err := meshComponent(o)
			if err != nil {
				t.Fatal(err)
			}
			if c.Namespace != o.Namespace || c.Name != MeshPolicyName || c.Selector["app.kubernetes.io/name"] != MeshPolicyName {
				t.Errorf("component %s/%s selecting %v, want %s/%s selecting its pods", c.Namespace, c.Name, c.Selector, o.Namespace, MeshPolicyName)
			}
			if !reflect.DeepEqual(c.Ports, tc.want) {
				t.Errorf("ports %+v, want %+v", c.Ports, tc.want)
			}
		})
	}
}
