package setup

import (
	"reflect"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
)

// TestMeshComponentFollowsTheServedPorts checks that the policies open the ports the
// controller serves, to the callers the flags name, and nothing else.
func TestMeshComponentFollowsTheServedPorts(t *testing.T) {
	gateway := meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account")
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   []meshpolicy.Port
	}{
		{"defaults: the artifact API to the ingress gateway", func(*Options) {}, []meshpolicy.Port{
			{Name: "artifact API and web UI", Number: 8090, Principals: []string{gateway}},
		}},
		{"webhooks to the API servers' addresses", func(o *Options) {
			o.APIAddr = ":8443"
			o.WebhookPort, o.WebhookCertDir = 9443, "/tls"
			o.IstioWebhookSourceRanges = []string{"10.0.0.1"}
		}, []meshpolicy.Port{
			{Name: "artifact API and web UI", Number: 8443, Principals: []string{gateway}},
			{Name: "webhooks", Number: 9443, SourceRanges: []string{"10.0.0.1"}},
		}},
		{"no artifact API: every port closed", func(o *Options) { o.APIAddr = "0" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			c, err := meshComponent(o)
			if err != nil {
				t.Fatal(err)
			}
			if c.Namespace != "edgefleet-system" || c.Name != MeshPolicyName || c.Selector["app.kubernetes.io/name"] != MeshPolicyName {
				t.Errorf("component %s/%s selecting %v, want edgefleet-system/%s selecting its pods", c.Namespace, c.Name, c.Selector, MeshPolicyName)
			}
			if !reflect.DeepEqual(c.Ports, tc.want) {
				t.Errorf("ports %+v, want %+v", c.Ports, tc.want)
			}
		})
	}
}
