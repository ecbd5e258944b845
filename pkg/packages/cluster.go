package packages

import (
	"bytes"
	"fmt"
	"net"
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

// ConfigFile is a file the BPA writes on each host that runs the package, before activating it.
// Exactly one of Template and PKI gives its content.
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
}

// Secret reports whether the file holds a private key: a PKI key, a kubeconfig or the API
// server's encryption configuration.
func (c ConfigFile) Secret() bool {
	return c.PKI != "" && (strings.HasSuffix(c.PKI, ".key") || strings.HasSuffix(c.PKI, ".conf") || c.PKI == "encryption-config.yaml")
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
// file (the BPA fills those in).
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
		case (c.Template == "") == (c.PKI == ""):
			return fmt.Errorf("%s (%s): want exactly one of template and pki", at, c.Path)
		}
		paths[c.Path] = true
		if c.Mode != "" {
			perm, err := File{Mode: c.Mode}.Perm()
			if err != nil {
				return fmt.Errorf("%s.mode: %w", at, err)
			}
			if c.Secret() && perm != 0o600 {
				return fmt.Errorf("%s.mode %q: %s holds a private key and is written 0600", at, c.Mode, c.PKI)
			}
		}
		if c.PKI != "" {
			if err := validPath(c.PKI); err != nil {
				return fmt.Errorf("%s.pki: %w", at, err)
			}
			continue
		}
		if _, err := c.Render(sample); err != nil {
			return fmt.Errorf("%s.template (%s): %w", at, c.Path, err)
		}
	}
	return nil
}
