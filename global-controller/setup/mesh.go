package setup

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
)

// meshPolicyTimeout bounds each request about the mesh policies.
const meshPolicyTimeout = 10 * time.Second

// MeshPolicyName names the global controller's PeerAuthentication and AuthorizationPolicy, and
// is the app.kubernetes.io/name label of its pods (deploy/global-controller).
const MeshPolicyName = "edgefleet-global-controller"

// +kubebuilder:rbac:groups=security.istio.io,namespace=edgefleet-system,resources=peerauthentications;authorizationpolicies,verbs=get;list;watch;create;patch;delete

// meshComponent is what the global controller's mesh policies allow: the artifact API's port
// (and the web UI's, the same) to IstioAPIPrincipals, the webhooks' port to
// IstioWebhookSourceRanges (the API server is outside the mesh); every other port is closed.
func meshComponent(opts Options) (meshpolicy.Component, error) {
	c := meshpolicy.Component{
		Namespace: opts.IstioNamespace,
		Name:      MeshPolicyName,
		Selector:  map[string]string{"app.kubernetes.io/name": MeshPolicyName},
	}
	if opts.APIAddr != "0" {
		_, port, err := net.SplitHostPort(opts.APIAddr)
		if err != nil {
			return c, fmt.Errorf("--api-bind-address %q: %w", opts.APIAddr, err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return c, fmt.Errorf("--api-bind-address %q: port: %w", opts.APIAddr, err)
		}
		if n != 0 { // a port picked at random (tests) cannot be named: it stays closed
			c.Ports = append(c.Ports, meshpolicy.Port{Name: "artifact API and web UI", Number: uint32(n), Principals: opts.IstioAPIPrincipals})
		}
	}
	if opts.WebhookPort != 0 {
		c.Ports = append(c.Ports, meshpolicy.Port{Name: "webhooks", Number: uint32(opts.WebhookPort), SourceRanges: opts.IstioWebhookSourceRanges})
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("--istio-api-principals, --istio-webhook-source-ranges: %w", err)
	}
	return c, nil
}
