package packages

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"text/template"
)

// HostSelector names the hosts of a cluster a package runs on.
type HostSelector string

// Host selectors.
const (
	// HostsAll is every host of the cluster (the default).
	HostsAll HostSelector = "all"
	// HostsControlPlane is the control-plane hosts.
	HostsControlPlane HostSelector = "control-plane"
	// HostsWorker is the hosts that are not control plane.
	HostsWorker HostSelector = "worker"
)

// Selects reports whether a host (control plane or not) runs a package of selector s.
func (s HostSelector) Selects(controlPlane bool) bool {
	switch s {
	case HostsControlPlane:
		return controlPlane
	case HostsWorker:
		return !controlPlane
	}
	return true
}

// Requirement is what a cluster must have for a package to run there.
type Requirement string

// RequiresKMS: the cluster's API servers encrypt Secrets through a KMS plugin backed by Vault
// (ClusterValues.KMS is set).
const RequiresKMS Requirement = "kms"

// Met reports whether a cluster meets r; kms: whether its API servers encrypt Secrets
// through a KMS plugin.
func (r Requirement) Met(kms bool) bool {
	switch r {
	case RequiresKMS:
		return kms
	}
	return true
}

// The files of a cluster's KMS plugin, for ConfigFile.KMS.
const (
	// KMSVaultCA is the PEM bundle of the CAs the plugin trusts for Vault's certificate.
	KMSVaultCA = "vault-ca.crt"
	// KMSToken is the ServiceAccount token the plugin logs in to Vault with. The BPA replaces
	// it before it expires; the plugin reads it again when it changes, so a new token is
	// written without the package being restarted (it does not count in the package's
	// configuration digest).
	KMSToken = "token"
)

// ConfigFile is a file the BPA writes on each host that runs the package, before activating it.
// Exactly one of Template, PKI and KMS gives its content.
type ConfigFile struct {
	// Path on the host: absolute and clean, outside the package directory (which the package's
	// own files fill), e.g. /etc/edgefleet/<package>/env.
	Path string `json:"path"`
	// Mode is the octal permission bits, "0644" when empty. Files from the PKI that hold a
	// private key (".key", ".conf", "encryption-config.yaml") are always written "0600"; another
	// mode is refused.
	Mode string `json:"mode,omitempty"`
	// Template is the file's content as a Go text/template over Values, e.g.
	// "--node-ip={{.Node.IP}}". Unknown fields are errors when the manifest is checked.
	Template string `json:"template,omitempty"`
	// PKI names a file of the cluster's PKI by its path under /etc/kubernetes in kubeadm's
	// layout, e.g. "pki/ca.crt", "pki/etcd/server.key", "kubelet.conf" (docs/packages.md lists
	// them).
	PKI string `json:"pki,omitempty"`
	// KMS names a file of the cluster's KMS plugin: KMSVaultCA or KMSToken (a package that
	// Requires RequiresKMS only).
	KMS string `json:"kms,omitempty"`
	// Server is, for a kubeconfig of the PKI (a ".conf"), the API server URL it names instead of
	// the cluster's endpoint: "https://127.0.0.1:6444", the host's own endpoint of the API
	// servers (the api-proxy package), for the host's own clients of the cluster.
	Server string `json:"server,omitempty"`
}

// Secret reports whether the file holds a private key or a credential: a PKI key, a
// kubeconfig, the API server's encryption configuration or the KMS plugin's token.
func (c ConfigFile) Secret() bool {
	return c.PKI != "" && (strings.HasSuffix(c.PKI, ".key") || strings.HasSuffix(c.PKI, ".conf") || c.PKI == "encryption-config.yaml") ||
		c.KMS == KMSToken
}

// Perm is the file's permission bits, defaulted.
func (c ConfigFile) Perm() uint32 {
	switch {
	case c.Mode != "":
		perm, _ := File{Mode: c.Mode}.Perm() // validated
		return perm
	case c.Secret():
		return 0o600
	}
	return 0o644
}

// Patch says how a new version of a package replaces the running one.
type Patch struct {
	// Drain cordons and drains each node (evictions that respect PodDisruptionBudgets, waiting
	// for the pods to go) before the package is replaced on it, and uncordons the node once it
	// is Ready again: for what pods run on (kubelet, the container runtime, the network). A
	// node no other Ready, schedulable node could take the pods from is not drained.
	// Without it the package is replaced in place; its health check guards the node.
	Drain bool `json:"drain,omitempty"`
}

// Values are what a configuration template sees: the cluster, the host the file is for and
// every host.
type Values struct {
	Cluster ClusterValues
	// Node is the host the file is written on.
	Node NodeValues
	// Nodes are all hosts of the cluster, control plane first, then by name.
	Nodes []NodeValues
	// ControlPlane are the control-plane hosts, by name.
	ControlPlane []NodeValues
}

// ClusterValues describe the cluster.
type ClusterValues struct {
	// Name of the cluster.
	Name string
	// KubernetesVersion, e.g. "v1.36.3".
	KubernetesVersion string
	// APIServer is the URL of the cluster's API server, e.g. "https://10.0.0.2:6443".
	APIServer string
	// ServiceCIDR and PodCIDR of the cluster, e.g. "10.96.0.0/12" and "10.244.0.0/16".
	ServiceCIDR, PodCIDR string
	// DNSServiceIP is the cluster DNS service's address (the tenth of ServiceCIDR).
	DNSServiceIP string
	// DNSDomain is the cluster's DNS domain, "cluster.local".
	DNSDomain string
	// Workers is how many worker hosts the cluster has, provisioned yet or not (Nodes holds
	// only the provisioned ones): a cluster of control-plane hosts only runs its workloads
	// there.
	Workers int
	// KMS is the Vault the cluster's KMS plugin wraps its API servers' data encryption keys
	// with; nil when the cluster's Secrets are encrypted with a key of the BPA's (secretbox).
	KMS *KMSValues
}

// KMSValues say how a cluster's KMS plugin reaches Vault: the plugin on each control-plane host
// logs in with Vault's Kubernetes auth method (Mount, Role) with a ServiceAccount token of the
// site's cluster the BPA writes (ConfigFile.KMS KMSToken), and wraps keys with the transit key
// TransitKey of the engine at TransitMount.
type KMSValues struct {
	// VaultAddr is Vault's URL as the control-plane hosts reach it (https).
	VaultAddr string
	// AuthMount is the mount of the Kubernetes auth method that reviews the site cluster's
	// tokens; Role the role there.
	AuthMount, Role string
	// TransitMount is the transit engine's mount; TransitKey the cluster's key there.
	TransitMount, TransitKey string
}

// NodeValues describe one host.
type NodeValues struct {
	// Name is the host's node name.
	Name string
	// IP is its address on the cluster network.
	IP string
	// ProviderID is its Node's spec.providerID ("" when it has none).
	ProviderID string
	// PodCIDR is the part of the cluster's pod CIDR its pods get addresses from.
	PodCIDR string
	// ControlPlane is true on control-plane hosts.
	ControlPlane bool
}

// templateFuncs are the functions templates may call besides text/template's own.
var templateFuncs = template.FuncMap{
	// hostPort joins an address and a port, bracketing IPv6 addresses: hostPort .Node.IP 2379.
	"hostPort": func(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) },
	// join joins strings with a separator: join "," $list.
	"join": func(sep string, elems []string) string { return strings.Join(elems, sep) },
}

// Render is the content of c for a host with values v: its template executed, or nil for a PKI
// or KMS file (the BPA fills those in).
func (c ConfigFile) Render(v Values) ([]byte, error) {
	if c.Template == "" {
		return nil, nil
	}
	t, err := template.New(c.Path).Option("missingkey=error").Funcs(templateFuncs).Parse(c.Template)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sampleValues are the values a manifest's templates are tried with when it is checked.
func sampleValues() Values {
	cp := []NodeValues{
		{Name: "cp-0", IP: "10.0.0.10", ProviderID: "metal3://ns/cp-0", PodCIDR: "10.244.10.0/24", ControlPlane: true},
		{Name: "cp-1", IP: "10.0.0.11", ProviderID: "metal3://ns/cp-1", PodCIDR: "10.244.11.0/24", ControlPlane: true},
	}
	worker := NodeValues{Name: "worker-0", IP: "10.0.0.20", ProviderID: "metal3://ns/worker-0", PodCIDR: "10.244.20.0/24"}
	return Values{
		Cluster: ClusterValues{
			Name: "sample", KubernetesVersion: "v1.36.3", APIServer: "https://10.0.0.10:6443",
			ServiceCIDR: "10.96.0.0/12", PodCIDR: "10.244.0.0/16", DNSServiceIP: "10.96.0.10", DNSDomain: "cluster.local", Workers: 1,
			KMS: &KMSValues{VaultAddr: "https://vault.example:8200", AuthMount: "kubernetes-site", Role: "edgefleet-kms",
				TransitMount: "transit", TransitKey: "edgefleet-kms-sample"},
		},
		Node:         worker,
		Nodes:        append(cp, worker),
		ControlPlane: cp,
	}
}

// validateCluster checks the fields the BPA reads: every error names the field at fault.
func (m *Manifest) validateCluster() error {
	switch m.Hosts {
	case "", HostsAll, HostsControlPlane, HostsWorker:
	default:
		return fmt.Errorf("manifest: hosts %q: want %q, %q or %q", m.Hosts, HostsAll, HostsControlPlane, HostsWorker)
	}
	switch m.Requires {
	case "", RequiresKMS:
	default:
		return fmt.Errorf("manifest: requires %q: want %q or nothing", m.Requires, RequiresKMS)
	}
	after := map[string]bool{}
	for i, a := range m.After {
		switch {
		case !nameRE.MatchString(a):
			return fmt.Errorf("manifest: after[%d] %q: not a package name", i, a)
		case a == m.Name:
			return fmt.Errorf("manifest: after[%d] %q: a package cannot come after itself", i, a)
		case after[a]:
			return fmt.Errorf("manifest: after[%d] %q: listed twice", i, a)
		}
		after[a] = true
	}
	paths := map[string]bool{}
	sample := sampleValues()
	for i, c := range m.Config {
		at := fmt.Sprintf("manifest: config[%d]", i)
		switch {
		case !path.IsAbs(c.Path) || path.Clean(c.Path) != c.Path || strings.ContainsAny(c.Path, "\\\x00\n'\"`$"):
			return fmt.Errorf("%s.path %q: want a clean absolute path without quotes, '$' or '\\'", at, c.Path)
		case c.Path == "/opt/edgefleet" || strings.HasPrefix(c.Path, "/opt/edgefleet/"):
			return fmt.Errorf("%s.path %q: inside the packages' directory; write configuration elsewhere (e.g. /etc/edgefleet/%s/)", at, c.Path, m.Name)
		case paths[c.Path]:
			return fmt.Errorf("%s.path %q: listed twice", at, c.Path)
		case sources(c) != 1:
			return fmt.Errorf("%s (%s): want exactly one of template, pki and kms", at, c.Path)
		case c.KMS != "" && c.KMS != KMSVaultCA && c.KMS != KMSToken:
			return fmt.Errorf("%s.kms %q: want %q or %q", at, c.KMS, KMSVaultCA, KMSToken)
		case c.KMS != "" && m.Requires != RequiresKMS:
			return fmt.Errorf("%s.kms (%s): only a package that requires %q has the KMS plugin's files", at, c.Path, RequiresKMS)
		}
		paths[c.Path] = true
		if c.Mode != "" {
			perm, err := File{Mode: c.Mode}.Perm()
			if err != nil {
				return fmt.Errorf("%s.mode: %w", at, err)
			}
			if c.Secret() && perm != 0o600 {
				return fmt.Errorf("%s.mode %q: %s holds a private key or a credential and is written 0600", at, c.Mode, c.PKI+c.KMS)
			}
		}
		if c.Server != "" {
			if err := validServer(c); err != nil {
				return fmt.Errorf("%s.server %q: %w", at, c.Server, err)
			}
		}
		if c.PKI != "" {
			if err := validPath(c.PKI); err != nil {
				return fmt.Errorf("%s.pki: %w", at, err)
			}
			continue
		}
		if c.KMS != "" {
			continue
		}
		if _, err := c.Render(sample); err != nil {
			return fmt.Errorf("%s.template (%s): %w", at, c.Path, err)
		}
	}
	return nil
}

// sources counts the fields of c that give its content: Template, PKI and KMS.
func sources(c ConfigFile) int {
	n := 0
	for _, s := range []string{c.Template, c.PKI, c.KMS} {
		if s != "" {
			n++
		}
	}
	return n
}

// validServer checks a configuration file's server: an https URL of a kubeconfig of the PKI.
func validServer(c ConfigFile) error {
	if !strings.HasSuffix(c.PKI, ".conf") {
		return errors.New("only a kubeconfig of the PKI (pki: <name>.conf) names a server")
	}
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want https://host:port and nothing more")
	}
	return nil
}
