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

// MeshPolicyName names the local controller's PeerAuthentication and AuthorizationPolicy, and
// is the app.kubernetes.io/name label of its pods.
const MeshPolicyName = "edgefleet-local-controller"

// +kubebuilder:rbac:groups=security.istio.io,namespace=edgefleet-system,resources=peerauthentications;authorizationpolicies,verbs=get;list;watch;create;patch;delete

// meshComponent is what the local controller's mesh policies allow: the site cache's port to
// IstioCachePrincipals (the site's Ironic and BPA) and IstioCacheSourceRanges (hosts being
// provisioned, outside the mesh); every other port is closed.
func meshComponent(opts Options) (meshpolicy.Component, error) {
	c := meshpolicy.Component{
		Namespace: opts.Namespace,
		Name:      MeshPolicyName,
		Selector:  map[string]string{"app.kubernetes.io/name": MeshPolicyName},
	}
	_, port, err := net.SplitHostPort(opts.CacheAddr)
	if err != nil {
		return c, fmt.Errorf("--cache-bind-address %q: %w", opts.CacheAddr, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return c, fmt.Errorf("--cache-bind-address %q: port: %w", opts.CacheAddr, err)
	}
	if n != 0 { // a port picked at random (tests) cannot be named: it stays closed
		c.Ports = []meshpolicy.Port{{Name: "site cache", Number: uint32(n), Principals: opts.IstioCachePrincipals, SourceRanges: opts.IstioCacheSourceRanges}}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("--istio-cache-principals, --istio-cache-source-ranges: %w", err)
	}
	return c, nil
}
