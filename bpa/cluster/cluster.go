package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// Paths on the hosts.
const (
	// KubernetesDir holds the cluster PKI (pki/) and kubeconfigs, kubeadm's layout.
	KubernetesDir = "/etc/kubernetes"
	// NodeAgentKubeconfig is the node agent's kubeconfig.
	NodeAgentKubeconfig = KubernetesDir + "/node-agent.conf"
	// APIPort is the kube-apiserver's secure port.
	APIPort = 6443
)

// Names of the packages of a cluster.
const (
	Etcd      = "etcd"
	APIServer = "kube-apiserver"
	NodeAgent = "node-agent"
)

// Host is one host of the cluster.
type Host struct {
	// Name is the host's node name.
	Name string
	// IP is the host's address on the cluster network.
	IP netip.Addr
	// SSH is how the BPA reaches the host.
	SSH sshexec.Target
	// ControlPlane hosts run etcd and kube-apiserver.
	ControlPlane bool
	// ProviderID is the Node's spec.providerID (the Machine's).
	ProviderID string
}

// Packages are the packages a cluster is made of.
type Packages struct {
	Etcd, APIServer, NodeAgent install.Package
}

// Spec is the cluster to bring up.
type Spec struct {
	// Name of the cluster: a DNS-1123 subdomain; its secrets are named after it.
	Name string
	// KubernetesVersion the nodes report (v1.36.3).
	KubernetesVersion string
	// ServiceCIDR of the cluster; pki.DefaultServiceCIDR when empty.
	ServiceCIDR string
	// APIEndpoint is the address nodes and kubeconfigs use for the API server; the first
	// control-plane host's IP when empty.
	APIEndpoint string
	Hosts       []Host
	Packages    Packages
}

// PKISecret is the name of the secret holding the PKI of cluster name.
func PKISecret(name string) string { return name + "-pki" }

// AdminKubeconfigSecret is the name of the secret holding the admin kubeconfig of cluster name
// (key "value").
func AdminKubeconfigSecret(name string) string { return name + "-admin-kubeconfig" }

// BringUp brings up clusters.
type BringUp struct {
	installer *install.Installer
	secrets   secrets.Store
}

// New returns a BringUp running its steps through r and keeping secrets in s.
func New(r install.Runner, s secrets.Store) *BringUp {
	return &BringUp{installer: install.New(r), secrets: s}
}

// Result is what a run did, per phase and host.
type Result struct {
	// Reports of the package installs, in phase order.
	Reports []install.Report
	// Files is how many files were written (not found in place already).
	Files int
}

// Ran lists "<host>/<package>: <step>" for every install step that ran (was not found done).
func (r *Result) Ran() []string {
	var ran []string
	for _, rep := range r.Reports {
		for _, s := range rep.Ran() {
			ran = append(ran, rep.Host+"/"+rep.Package+": "+s)
		}
	}
	return ran
}

// Run brings the cluster of spec up; see the package documentation.
func (b *BringUp) Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	spec = spec.withDefaults()
	bundle, err := pki.Ensure(ctx, b.secrets, PKISecret(spec.Name), spec.PKISpec())
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	res := &Result{}
	cp := spec.controlPlane()
	if err := b.phase(ctx, res, cp, spec.Packages.Etcd, func(h Host) (map[string]file, error) {
		return b.etcdFiles(spec, bundle, h)
	}); err != nil {
		return res, fmt.Errorf("cluster %s: etcd: %w", spec.Name, err)
	}
	if err := b.phase(ctx, res, cp, spec.Packages.APIServer, func(h Host) (map[string]file, error) {
		return b.apiServerFiles(spec, bundle, h)
	}); err != nil {
		return res, fmt.Errorf("cluster %s: kube-apiserver: %w", spec.Name, err)
	}
	if err := b.saveAdminKubeconfig(ctx, spec, bundle); err != nil {
		return res, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	if err := b.phase(ctx, res, spec.Hosts, spec.Packages.NodeAgent, func(h Host) (map[string]file, error) {
		return b.nodeAgentFiles(spec, bundle, h)
	}); err != nil {
		return res, fmt.Errorf("cluster %s: node agent: %w", spec.Name, err)
	}
	return res, nil
}

// file is a file for a host.
type file struct {
	data []byte
	mode uint32
}

// phase writes each host's files and installs pkg on it, all hosts at once, and waits for all.
func (b *BringUp) phase(ctx context.Context, res *Result, hosts []Host, pkg install.Package, files func(Host) (map[string]file, error)) error {
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	reps := make([]*install.Report, len(hosts))
	written := make([]int, len(hosts))
	for i, h := range hosts {
		wg.Go(func() {
			fs, err := files(h)
			if err != nil {
				errs[i] = fmt.Errorf("host %s: %w", h.Name, err)
				return
			}
			for _, p := range slices.Sorted(maps.Keys(fs)) {
				r, err := b.installer.WriteFile(ctx, h.SSH, p, fs[p].data, fs[p].mode)
				if err != nil {
					errs[i] = err
					return
				}
				if !r.Skipped {
					written[i]++
				}
			}
			rep, err := b.installer.Install(ctx, h.SSH, pkg)
			reps[i], errs[i] = &rep, err
		})
	}
	wg.Wait()
	for i, rep := range reps {
		if rep != nil {
			res.Reports = append(res.Reports, *rep)
		}
		res.Files += written[i]
	}
	return errors.Join(errs...)
}

// pkiFiles picks files of a host's PKI (paths relative to KubernetesDir) and makes them
// absolute, keys 0600.
func pkiFiles(all map[string][]byte, names ...string) (map[string]file, error) {
	out := map[string]file{}
	for _, n := range names {
		data, ok := all[n]
		if !ok || len(data) == 0 {
			return nil, fmt.Errorf("the PKI has no %s", n)
		}
		mode := uint32(0o644)
		if strings.HasSuffix(n, ".key") {
			mode = 0o600
		}
		out[path.Join(KubernetesDir, n)] = file{data, mode}
	}
	return out, nil
}

func (b *BringUp) etcdFiles(spec Spec, bundle *pki.Bundle, h Host) (map[string]file, error) {
	all, err := bundle.ControlPlaneFiles(h.Name)
	if err != nil {
		return nil, err
	}
	fs, err := pkiFiles(all, "pki/etcd/ca.crt", "pki/etcd/server.crt", "pki/etcd/server.key", "pki/etcd/peer.crt", "pki/etcd/peer.key")
	if err != nil {
		return nil, err
	}
	var initial []string
	for _, m := range spec.controlPlane() {
		initial = append(initial, fmt.Sprintf("%s=https://%s", m.Name, hostPort(m.IP, 2380)))
	}
	pkiDir := KubernetesDir + "/pki/etcd"
	args := []string{
		"--name=" + h.Name,
		"--data-dir=/var/lib/etcd",
		"--listen-client-urls=https://" + hostPort(h.IP, 2379) + ",https://127.0.0.1:2379",
		"--advertise-client-urls=https://" + hostPort(h.IP, 2379),
		"--listen-peer-urls=https://" + hostPort(h.IP, 2380),
		"--initial-advertise-peer-urls=https://" + hostPort(h.IP, 2380),
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + spec.Name,
		"--cert-file=" + pkiDir + "/server.crt", "--key-file=" + pkiDir + "/server.key",
		"--trusted-ca-file=" + pkiDir + "/ca.crt", "--client-cert-auth=true",
		"--peer-cert-file=" + pkiDir + "/peer.crt", "--peer-key-file=" + pkiDir + "/peer.key",
		"--peer-trusted-ca-file=" + pkiDir + "/ca.crt", "--peer-client-cert-auth=true",
	}
	fs[install.ConfigDir(Etcd)+"/env"] = file{envFile(map[string]string{"ETCD_ARGS": strings.Join(args, " ")}), 0o644}
	return fs, nil
}

func (b *BringUp) apiServerFiles(spec Spec, bundle *pki.Bundle, h Host) (map[string]file, error) {
	all, err := bundle.ControlPlaneFiles(h.Name)
	if err != nil {
		return nil, err
	}
	fs, err := pkiFiles(all, "pki/ca.crt", "pki/apiserver.crt", "pki/apiserver.key",
		"pki/apiserver-etcd-client.crt", "pki/apiserver-etcd-client.key",
		"pki/apiserver-kubelet-client.crt", "pki/apiserver-kubelet-client.key",
		"pki/front-proxy-ca.crt", "pki/front-proxy-client.crt", "pki/front-proxy-client.key",
		"pki/sa.key", "pki/sa.pub", "pki/etcd/ca.crt")
	if err != nil {
		return nil, err
	}
	var etcds []string
	for _, m := range spec.controlPlane() {
		etcds = append(etcds, "https://"+hostPort(m.IP, 2379))
	}
	p := KubernetesDir + "/pki"
	args := []string{
		"--advertise-address=" + h.IP.String(),
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", APIPort),
		"--etcd-servers=" + strings.Join(etcds, ","),
		"--etcd-cafile=" + p + "/etcd/ca.crt",
		"--etcd-certfile=" + p + "/apiserver-etcd-client.crt", "--etcd-keyfile=" + p + "/apiserver-etcd-client.key",
		"--client-ca-file=" + p + "/ca.crt",
		"--tls-cert-file=" + p + "/apiserver.crt", "--tls-private-key-file=" + p + "/apiserver.key",
		"--kubelet-client-certificate=" + p + "/apiserver-kubelet-client.crt", "--kubelet-client-key=" + p + "/apiserver-kubelet-client.key",
		"--service-account-key-file=" + p + "/sa.pub", "--service-account-signing-key-file=" + p + "/sa.key",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + spec.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--requestheader-client-ca-file=" + p + "/front-proxy-ca.crt",
		"--proxy-client-cert-file=" + p + "/front-proxy-client.crt", "--proxy-client-key-file=" + p + "/front-proxy-client.key",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--allow-privileged=true",
	}
	fs[install.ConfigDir(APIServer)+"/env"] = file{envFile(map[string]string{"KUBE_APISERVER_ARGS": strings.Join(args, " ")}), 0o644}
	return fs, nil
}

func (b *BringUp) nodeAgentFiles(spec Spec, bundle *pki.Bundle, h Host) (map[string]file, error) {
	all, err := bundle.NodeFiles(h.Name)
	if err != nil {
		return nil, err
	}
	fs, err := pkiFiles(all, "pki/ca.crt", "pki/node-client.crt", "pki/node-client.key")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := bundle.NodeKubeconfig(h.Name)
	if err != nil {
		return nil, err
	}
	fs[NodeAgentKubeconfig] = file{kubeconfig, 0o600}
	args := []string{
		"--kubeconfig=" + NodeAgentKubeconfig,
		"--node-name=" + h.Name,
		"--kubelet-version=" + spec.KubernetesVersion,
		"--node-ip=" + h.IP.String(),
	}
	if h.ProviderID != "" {
		args = append(args, "--provider-id="+h.ProviderID)
	}
	fs[install.ConfigDir(NodeAgent)+"/env"] = file{envFile(map[string]string{
		"NODE_NAME":       h.Name,
		"API_SERVER":      "https://" + hostPortString(spec.APIEndpoint, APIPort),
		"NODE_AGENT_ARGS": strings.Join(args, " "),
	}), 0o644}
	return fs, nil
}

// saveAdminKubeconfig keeps the admin kubeconfig in the secret store, writing only a change.
func (b *BringUp) saveAdminKubeconfig(ctx context.Context, spec Spec, bundle *pki.Bundle) error {
	kc, err := bundle.AdminKubeconfig()
	if err != nil {
		return err
	}
	name := AdminKubeconfigSecret(spec.Name)
	old, err := b.secrets.Get(ctx, name)
	switch {
	case errors.Is(err, secrets.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read the admin kubeconfig: %w", err)
	case bytes.Equal(old["value"], kc):
		return nil
	}
	if err := b.secrets.Put(ctx, name, map[string][]byte{"value": kc}); err != nil {
		return fmt.Errorf("save the admin kubeconfig: %w", err)
	}
	return nil
}

// envFile renders a systemd EnvironmentFile (also readable by sh), values double-quoted.
func envFile(vars map[string]string) []byte {
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(&b, "%s=\"%s\"\n", k, vars[k])
	}
	return b.Bytes()
}

func hostPort(ip netip.Addr, port int) string { return netip.AddrPortFrom(ip, uint16(port)).String() }

func hostPortString(host string, port int) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return hostPort(ip, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

func (s Spec) controlPlane() []Host {
	var cp []Host
	for _, h := range s.Hosts {
		if h.ControlPlane {
			cp = append(cp, h)
		}
	}
	return cp
}

// withDefaults fills in APIEndpoint and ServiceCIDR.
func (s Spec) withDefaults() Spec {
	if s.APIEndpoint == "" {
		if cp := s.controlPlane(); len(cp) > 0 {
			s.APIEndpoint = cp[0].IP.String()
		}
	}
	if s.ServiceCIDR == "" {
		s.ServiceCIDR = pki.DefaultServiceCIDR
	}
	return s
}

// PKISpec is the spec of the cluster's PKI (bpa/pki), defaults applied.
func (s Spec) PKISpec() pki.Spec {
	s = s.withDefaults()
	ps := pki.Spec{ClusterName: s.Name, APIEndpoint: s.APIEndpoint, APIPort: APIPort, ServiceCIDR: s.ServiceCIDR}
	for _, h := range s.Hosts {
		m := pki.Member{Name: h.Name, IP: h.IP}
		if h.ControlPlane {
			ps.ControlPlane = append(ps.ControlPlane, m)
		} else {
			ps.Nodes = append(ps.Nodes, m)
		}
	}
	return ps
}

// validate checks what the PKI does not: every error names the field at fault.
func (s Spec) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q: %s", s.Name, msgs[0]))
	}
	if s.KubernetesVersion == "" {
		errs = append(errs, errors.New("kubernetesVersion: required"))
	}
	if len(s.controlPlane()) == 0 {
		errs = append(errs, errors.New("hosts: no control-plane host"))
	}
	for i, h := range s.Hosts {
		if !h.IP.IsValid() {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): ip: required", i, h.Name))
		}
		if h.SSH.Name == "" || h.SSH.Addr == "" {
			errs = append(errs, fmt.Errorf("hosts[%d] (%s): ssh: name and address required", i, h.Name))
		}
	}
	for _, p := range []struct {
		name string
		pkg  install.Package
	}{{Etcd, s.Packages.Etcd}, {APIServer, s.Packages.APIServer}, {NodeAgent, s.Packages.NodeAgent}} {
		switch {
		case p.pkg.Manifest == nil:
			errs = append(errs, fmt.Errorf("packages.%s: missing: want the %s package", p.name, p.name))
		case p.pkg.Manifest.Name != p.name:
			errs = append(errs, fmt.Errorf("packages.%s: got package %q, want the %s package", p.name, p.pkg.Manifest.Name, p.name))
		}
	}
	return errors.Join(errs...)
}
