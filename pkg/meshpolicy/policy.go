package meshpolicy

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedByLabel names, on both policies, the component that keeps them current.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Component is a workload whose policies are kept: the policies' namespace and name, the
// labels of its pods, and the ports it serves with who may call each.
type Component struct {
	// Namespace of the workload and of its policies.
	Namespace string
	// Name of both policies, and the value of their ManagedByLabel.
	Name string
	// Selector are labels of the workload's pods (their Deployment's pod template labels).
	Selector map[string]string
	// Ports the workload serves to others. A port listed with no caller is closed to everyone;
	// a port not listed is closed too (Istio denies what no ALLOW rule matches), and so is
	// every port when there is none.
	Ports []Port
}

// Port is one port of a component and its callers.
type Port struct {
	// Name says what is served there ("artifact API"), in errors and logs.
	Name string
	// Number is the container port.
	Number uint32
	// Principals are the mesh identities allowed, each a pod's ServiceAccount as Istio names
	// it: "cluster.local/ns/<namespace>/sa/<name>" (see ServiceAccount).
	Principals []string
	// SourceRanges are addresses (CIDRs or single IPs) of callers outside the mesh, which
	// have no mesh identity (the Kubernetes API server calling webhooks, a provisioning host).
	// With any, the port also accepts plain-text connections (PERMISSIVE): Istio cannot ask a
	// caller outside the mesh for a certificate.
	SourceRanges []string
}

// ServiceAccount is the Istio principal of pods running as ServiceAccount name in namespace,
// in the default trust domain.
func ServiceAccount(namespace, name string) string {
	return "cluster.local/ns/" + namespace + "/sa/" + name
}

// Validate names the first field that cannot make a valid policy.
func (c Component) Validate() error {
	switch {
	case c.Namespace == "":
		return errors.New("mesh policy: namespace must not be empty")
	case c.Name == "":
		return errors.New("mesh policy: name must not be empty")
	case len(c.Selector) == 0:
		return fmt.Errorf("mesh policy %s/%s: the workload selector must not be empty (it would apply to every pod of the namespace)", c.Namespace, c.Name)
	}
	seen := map[uint32]bool{}
	for _, p := range c.Ports {
		if p.Number == 0 || p.Number > 65535 {
			return fmt.Errorf("mesh policy %s/%s: %s port %d is not a port", c.Namespace, c.Name, p.Name, p.Number)
		}
		if seen[p.Number] {
			return fmt.Errorf("mesh policy %s/%s: port %d is listed twice", c.Namespace, c.Name, p.Number)
		}
		seen[p.Number] = true
		for _, pr := range p.Principals {
			if !strings.Contains(pr, "/ns/") || !strings.Contains(pr, "/sa/") {
				return fmt.Errorf("mesh policy %s/%s: %s caller %q is not a principal <trust domain>/ns/<namespace>/sa/<service account>", c.Namespace, c.Name, p.Name, pr)
			}
		}
		for _, r := range p.SourceRanges {
			if _, err := netip.ParsePrefix(r); err != nil {
				if _, err := netip.ParseAddr(r); err != nil {
					return fmt.Errorf("mesh policy %s/%s: %s source range %q is neither a CIDR nor an IP address", c.Namespace, c.Name, p.Name, r)
				}
			}
		}
	}
	return nil
}

// meta is the policies' object metadata.
func (c Component) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, Labels: map[string]string{ManagedByLabel: c.Name}}
}

func (c Component) selector() *typeapi.WorkloadSelector {
	return &typeapi.WorkloadSelector{MatchLabels: maps.Clone(c.Selector)}
}

// PeerAuthentication is the desired PeerAuthentication of c: mutual TLS only (STRICT) on the
// workload, except on ports that callers outside the mesh reach (PERMISSIVE there).
func PeerAuthentication(c Component) *securityv1.PeerAuthentication {
	pa := &securityv1.PeerAuthentication{
		ObjectMeta: c.meta(),
		Spec: securityapi.PeerAuthentication{
			Selector: c.selector(),
			Mtls:     &securityapi.PeerAuthentication_MutualTLS{Mode: securityapi.PeerAuthentication_MutualTLS_STRICT},
		},
	}
	for _, p := range c.Ports {
		if len(p.SourceRanges) == 0 {
			continue
		}
		if pa.Spec.PortLevelMtls == nil {
			pa.Spec.PortLevelMtls = map[uint32]*securityapi.PeerAuthentication_MutualTLS{}
		}
		pa.Spec.PortLevelMtls[p.Number] = &securityapi.PeerAuthentication_MutualTLS{Mode: securityapi.PeerAuthentication_MutualTLS_PERMISSIVE}
	}
	return pa
}

// AuthorizationPolicy is the desired AuthorizationPolicy of c: ALLOW, one rule per port with
// callers, each admitting its principals or its source ranges on that port only. Whatever no
// rule admits Istio denies, so a port without callers, or not listed, is closed.
func AuthorizationPolicy(c Component) *securityv1.AuthorizationPolicy {
	ap := &securityv1.AuthorizationPolicy{
		ObjectMeta: c.meta(),
		Spec: securityapi.AuthorizationPolicy{
			Selector: c.selector(),
			Action:   securityapi.AuthorizationPolicy_ALLOW,
		},
	}
	for _, p := range c.Ports {
		var from []*securityapi.Rule_From
		if len(p.Principals) > 0 {
			from = append(from, &securityapi.Rule_From{Source: &securityapi.Source{Principals: sorted(p.Principals)}})
		}
		if len(p.SourceRanges) > 0 {
			from = append(from, &securityapi.Rule_From{Source: &securityapi.Source{IpBlocks: sorted(p.SourceRanges)}})
		}
		if len(from) == 0 {
			continue
		}
		ap.Spec.Rules = append(ap.Spec.Rules, &securityapi.Rule{
			From: from,
			To:   []*securityapi.Rule_To{{Operation: &securityapi.Operation{Ports: []string{fmt.Sprint(p.Number)}}}},
		})
	}
	return ap
}

// sorted returns a sorted copy without duplicates, so the desired objects do not depend on
// the order flags were given in.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
