package pki

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgefleet/edgefleet/pkg/certs"
)

// Defaults applied by Ensure to a Spec's zero fields.
const (
	DefaultAPIPort     = 6443
	DefaultServiceCIDR = "10.96.0.0/12"
)

// Spec describes the application cluster the PKI is for.
type Spec struct {
	// ClusterName names the cluster in kubeconfigs. A DNS-1123 subdomain.
	ClusterName string
	// APIEndpoint is the host name or IP address (no scheme, no port) kubeconfigs point at; the
	// kube-apiserver's serving certificate carries it.
	APIEndpoint string
	// APIPort is the kube-apiserver's secure port; DefaultAPIPort when zero.
	APIPort int
	// ServiceCIDR is the cluster's service IP range; DefaultServiceCIDR when empty. The
	// kube-apiserver's serving certificate carries its first address (the "kubernetes" service).
	ServiceCIDR string
	// ControlPlane lists the hosts running etcd and kube-apiserver: one etcd cluster. At least
	// one. They are nodes too and get node client certificates.
	ControlPlane []Member
	// Nodes lists the other hosts (workers).
	Nodes []Member
	// Lifetime of the leaf certificates; zero fields: a year, renewed 30 days before expiry.
	Lifetime certs.Lifetime
	// SecretEncryptionKeyRotations is how many rotations of the Secret encryption key are asked
	// for: when more than the key has had, Ensure starts one (see AdvanceSecretEncryption).
	SecretEncryptionKeyRotations int64
	// CARotations is how many roll-overs of the cluster's CAs are asked for: when more than the
	// CAs have had, Ensure starts one (see AdvanceCARotation).
	CARotations int64
	// SecretEncryptionKMS has the API servers encrypt Secrets through the KMS plugin on each
	// control-plane host (KMSSocket) instead of with a secretbox key of the PKI. It is recorded
	// when the PKI is made and never changes silently: a PKI made with the other is an error.
	SecretEncryptionKMS bool
}

// Member is one host of the cluster.
type Member struct {
	// Name is the host's node name: a DNS-1123 subdomain, unique across ControlPlane and Nodes.
	Name string
	// IP is the host's address; etcd's certificates carry it for control-plane members.
	IP netip.Addr
}

// withDefaults returns s with its zero fields set to their defaults.
func (s Spec) withDefaults() Spec {
	if s.APIPort == 0 {
		s.APIPort = DefaultAPIPort
	}
	if s.ServiceCIDR == "" {
		s.ServiceCIDR = DefaultServiceCIDR
	}
	return s
}

// validate checks a Spec with its defaults applied; every error names the field at fault.
func (s Spec) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(s.ClusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("ClusterName %q: %s", s.ClusterName, msgs[0]))
	}
	if _, err := netip.ParseAddr(s.APIEndpoint); err != nil {
		if msgs := validation.IsDNS1123Subdomain(s.APIEndpoint); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("APIEndpoint %q: neither an IP address nor a host name (no scheme, no port): %s", s.APIEndpoint, msgs[0]))
		}
	}
	if s.APIPort < 1 || s.APIPort > 65535 {
		errs = append(errs, fmt.Errorf("APIPort %d: not in 1-65535", s.APIPort))
	}
	if _, err := s.kubernetesServiceIP(); err != nil {
		errs = append(errs, err)
	}
	if len(s.ControlPlane) == 0 {
		errs = append(errs, errors.New("ControlPlane: at least one member is required"))
	}
	if s.SecretEncryptionKeyRotations < 0 {
		errs = append(errs, fmt.Errorf("SecretEncryptionKeyRotations %d: not a count", s.SecretEncryptionKeyRotations))
	}
	if s.CARotations < 0 {
		errs = append(errs, fmt.Errorf("CARotations %d: not a count", s.CARotations))
	}
	names := map[string]string{}
	cpIPs := map[netip.Addr]string{}
	check := func(field string, i int, m Member) {
		at := fmt.Sprintf("%s[%d]", field, i)
		if msgs := validation.IsDNS1123Subdomain(m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.Name %q: %s", at, m.Name, msgs[0]))
		} else if prev, dup := names[m.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.Name %q: already used by %s", at, m.Name, prev))
		} else {
			names[m.Name] = at
		}
		if !m.IP.IsValid() {
			errs = append(errs, fmt.Errorf("%s.IP: missing (member %q)", at, m.Name))
		}
	}
	for i, m := range s.ControlPlane {
		check("ControlPlane", i, m)
		if prev, dup := cpIPs[m.IP]; dup && m.IP.IsValid() {
			errs = append(errs, fmt.Errorf("ControlPlane[%d].IP %s: already used by %s (etcd members need distinct addresses)", i, m.IP, prev))
		}
		cpIPs[m.IP] = fmt.Sprintf("ControlPlane[%d]", i)
	}
	for i, m := range s.Nodes {
		check("Nodes", i, m)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid PKI spec: %w", err)
	}
	return nil
}

// kubernetesServiceIP returns the first address of ServiceCIDR, the "kubernetes" service's.
func (s Spec) kubernetesServiceIP() (netip.Addr, error) {
	p, err := netip.ParsePrefix(s.ServiceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ServiceCIDR %q: %w", s.ServiceCIDR, err)
	}
	first := p.Masked().Addr().Next()
	if !first.IsValid() || !p.Contains(first) {
		return netip.Addr{}, fmt.Errorf("ServiceCIDR %q: too small to hold a service address", s.ServiceCIDR)
	}
	return first, nil
}

// has reports whether name is a control-plane member or, unless cpOnly, any host of s.
func (s Spec) has(name string, cpOnly bool) bool {
	isName := func(m Member) bool { return m.Name == name }
	return slices.ContainsFunc(s.ControlPlane, isName) || !cpOnly && slices.ContainsFunc(s.Nodes, isName)
}
