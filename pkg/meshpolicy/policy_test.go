package meshpolicy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
)

func component(ports ...meshpolicy.Port) meshpolicy.Component {
	return meshpolicy.Component{
		Namespace: "edgefleet-system",
		Name:      "edgefleet-global-controller",
		Selector:  map[string]string{"app.kubernetes.io/name": "edgefleet-global-controller"},
		Ports:     ports,
	}
}

// TestPolicies checks the specs the builders make, in their JSON form as stored.
func TestPolicies(t *testing.T) {
	gateway := meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account")
	bpa := meshpolicy.ServiceAccount("edgefleet-system", "edgefleet-bpa")
	for _, tc := range []struct {
		name        string
		c           meshpolicy.Component
		peer, authz string
	}{{
		name: "principals only: STRICT everywhere, one rule per port",
		c: component(
			meshpolicy.Port{Name: "artifact API", Number: 8443, Principals: []string{gateway, bpa, gateway}},
			meshpolicy.Port{Name: "site cache", Number: 8180, Principals: []string{bpa}},
		),
		peer: `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}},"mtls":{"mode":"STRICT"}}`,
		authz: `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}},"rules":[` +
			`{"from":[{"source":{"principals":["cluster.local/ns/edgefleet-system/sa/edgefleet-bpa","cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"]}}],"to":[{"operation":{"ports":["8443"]}}]},` +
			`{"from":[{"source":{"principals":["cluster.local/ns/edgefleet-system/sa/edgefleet-bpa"]}}],"to":[{"operation":{"ports":["8180"]}}]}]}`,
	}, {
		name: "a port callers outside the mesh reach is PERMISSIVE and admits their ranges",
		c: component(
			meshpolicy.Port{Name: "artifact API", Number: 8443, Principals: []string{gateway}},
			meshpolicy.Port{Name: "webhooks", Number: 9443, SourceRanges: []string{"10.96.0.1", "10.0.0.0/24"}},
		),
		peer: `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}},"mtls":{"mode":"STRICT"},"portLevelMtls":{"9443":{"mode":"PERMISSIVE"}}}`,
		authz: `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}},"rules":[` +
			`{"from":[{"source":{"principals":["cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"]}}],"to":[{"operation":{"ports":["8443"]}}]},` +
			`{"from":[{"source":{"ipBlocks":["10.0.0.0/24","10.96.0.1"]}}],"to":[{"operation":{"ports":["9443"]}}]}]}`,
	}, {
		name:  "a port without callers gets no rule: closed",
		c:     component(meshpolicy.Port{Name: "webhooks", Number: 9443}),
		peer:  `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}},"mtls":{"mode":"STRICT"}}`,
		authz: `{"selector":{"matchLabels":{"app.kubernetes.io/name":"edgefleet-global-controller"}}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err != nil {
				t.Fatal(err)
			}
			pa, ap := meshpolicy.PeerAuthentication(tc.c), meshpolicy.AuthorizationPolicy(tc.c)
			for _, o := range []struct {
				got  proto.Message
				want string
			}{{&pa.Spec, tc.peer}, {&ap.Spec, tc.authz}} {
				got, err := protojson.Marshal(o.got)
				if err != nil {
					t.Fatal(err)
				}
				if normalized := compact(t, string(got)); normalized != compact(t, o.want) {
					t.Errorf("spec\n got %s\nwant %s", normalized, compact(t, o.want))
				}
			}
			for _, meta := range []map[string]string{pa.Labels, ap.Labels} {
				if meta[meshpolicy.ManagedByLabel] != tc.c.Name {
					t.Errorf("labels %v, want %s=%s", meta, meshpolicy.ManagedByLabel, tc.c.Name)
				}
			}
			if pa.Name != tc.c.Name || pa.Namespace != tc.c.Namespace || ap.Name != tc.c.Name || ap.Namespace != tc.c.Namespace {
				t.Errorf("names %s/%s and %s/%s, want %s/%s", pa.Namespace, pa.Name, ap.Namespace, ap.Name, tc.c.Namespace, tc.c.Name)
			}
		})
	}
}

// compact re-encodes JSON so that whitespace (protojson adds some at random) and key order do
// not count.
func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestValidateNamesTheBadField checks that components that cannot make a safe policy are
// refused with the field named.
func TestValidateNamesTheBadField(t *testing.T) {
	ok := meshpolicy.Port{Name: "api", Number: 8443, Principals: []string{meshpolicy.ServiceAccount("a", "b")}}
	for _, tc := range []struct {
		name string
		c    meshpolicy.Component
		want string
	}{
		{"no namespace", meshpolicy.Component{Name: "x", Selector: map[string]string{"a": "b"}, Ports: []meshpolicy.Port{ok}}, "namespace"},
		{"no name", meshpolicy.Component{Namespace: "x", Selector: map[string]string{"a": "b"}, Ports: []meshpolicy.Port{ok}}, "name"},
		{"no selector", meshpolicy.Component{Namespace: "x", Name: "x", Ports: []meshpolicy.Port{ok}}, "selector"},
		{"port 0", component(meshpolicy.Port{Name: "api"}), "api port 0"},
		{"port twice", component(ok, ok), "twice"},
		{"bad principal", component(meshpolicy.Port{Name: "api", Number: 1, Principals: []string{"edgefleet-bpa"}}), `"edgefleet-bpa" is not a principal`},
		{"bad range", component(meshpolicy.Port{Name: "api", Number: 1, SourceRanges: []string{"10.0.0.0/33"}}), `"10.0.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
