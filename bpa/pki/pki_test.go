package pki_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/secrets/secretsfake"
)

// spyStore counts the calls that reach a fake store.
type spyStore struct {
	secrets.Store
	gets, puts int
}

func (s *spyStore) Get(ctx context.Context, name string) (map[string][]byte, error) {
	s.gets++
	return s.Store.Get(ctx, name)
}

func (s *spyStore) Put(ctx context.Context, name string, data map[string][]byte) error {
	s.puts++
	return s.Store.Put(ctx, name, data)
}

func newSpy() *spyStore { return &spyStore{Store: &secretsfake.Store{}} }

// stored returns what the spy's store holds under name.
func (s *spyStore) stored(t *testing.T, name string) map[string][]byte {
	t.Helper()
	d, err := s.Store.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("read back %s: %v", name, err)
	}
	return d
}

const secretName = "site-a.app.pki"

// t0 is the fake clock's start: certificates are valid from it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func clock(t time.Time) pki.Option { return pki.WithClock(func() time.Time { return t }) }

func member(name, ip string) pki.Member {
	return pki.Member{Name: name, IP: netip.MustParseAddr(ip)}
}

func testSpec() pki.Spec {
	return pki.Spec{
		ClusterName:  "app",
		APIEndpoint:  "api.site-a.example",
		ControlPlane: []pki.Member{member("cp-0", "10.0.0.10"), member("cp-1", "10.0.0.11"), member("cp-2", "10.0.0.12")},
		Nodes:        []pki.Member{member("worker-0", "10.0.0.20"), member("worker-1", "10.0.0.21")},
	}
}

func ensure(t *testing.T, store pki.Store, spec pki.Spec, now time.Time) *pki.Bundle {
	t.Helper()
	b, err := pki.Ensure(context.Background(), store, secretName, spec, clock(now))
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return b
}

func parseCert(t *testing.T, what string, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: not a PEM certificate: %q", what, b)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

func pool(t *testing.T, what string, b []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(parseCert(t, what, b))
	return p
}

func ipStrings(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestControlPlaneFilesChainsAndNames(t *testing.T) {
	spec := testSpec()
	b := ensure(t, newSpy(), spec, t0)
	files, err := b.ControlPlaneFiles("cp-1")
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := sorted(
		"pki/ca.crt", "pki/apiserver.crt", "pki/apiserver.key",
		"pki/apiserver-etcd-client.crt", "pki/apiserver-etcd-client.key",
		"pki/apiserver-kubelet-client.crt", "pki/apiserver-kubelet-client.key",
		"pki/front-proxy-ca.crt", "pki/front-proxy-client.crt", "pki/front-proxy-client.key",
		"pki/sa.key", "pki/sa.pub", "pki/etcd/ca.crt",
		"pki/etcd/server.crt", "pki/etcd/server.key", "pki/etcd/peer.crt", "pki/etcd/peer.key",
		pki.EncryptionConfigFile,
	)
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, wantPaths) {
		t.Fatalf("ControlPlaneFiles paths:\n got %v\nwant %v", got, wantPaths)
	}
	// The API server encrypts Secrets with the stored secretbox key, and still reads what was
	// stored in clear before.
	var enc apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(files[pki.EncryptionConfigFile], &enc); err != nil {
		t.Fatalf("%s: %v", pki.EncryptionConfigFile, err)
	}
	if len(enc.Resources) != 1 || !slices.Equal(enc.Resources[0].Resources, []string{"secrets"}) || len(enc.Resources[0].Providers) != 2 {
		t.Fatalf("%s: %+v, want secrets under two providers", pki.EncryptionConfigFile, enc.Resources)
	}
	box, clear := enc.Resources[0].Providers[0].Secretbox, enc.Resources[0].Providers[1].Identity
	if box == nil || len(box.Keys) != 1 || box.Keys[0].Name != "bpa-1" || clear == nil {
		t.Fatalf("%s: providers %+v, want secretbox key bpa-1 then identity", pki.EncryptionConfigFile, enc.Resources[0].Providers)
	}
	if key, err := base64.StdEncoding.DecodeString(box.Keys[0].Secret); err != nil || len(key) != 32 {
		t.Errorf("%s: secretbox key of %d bytes (%v), want 32", pki.EncryptionConfigFile, len(key), err)
	}

	for _, ca := range []struct{ file, cn string }{
		{"pki/ca.crt", "kubernetes"}, {"pki/etcd/ca.crt", "etcd-ca"}, {"pki/front-proxy-ca.crt", "front-proxy-ca"},
	} {
		c := parseCert(t, ca.file, files[ca.file])
		if !c.IsCA || c.Subject.CommonName != ca.cn || c.CheckSignatureFrom(c) != nil {
			t.Errorf("%s: IsCA=%v CN=%q, want a self-signed CA %q", ca.file, c.IsCA, c.Subject.CommonName, ca.cn)
		}
		if got, want := c.NotAfter.Sub(t0), 10*365*24*time.Hour; got != want {
			t.Errorf("%s: valid %v from the clock, want %v", ca.file, got, want)
		}
	}

	server := x509.ExtKeyUsageServerAuth
	client := x509.ExtKeyUsageClientAuth
	tests := []struct {
		file   string
		ca     string
		usages []x509.ExtKeyUsage
		cn     string
		orgs   []string
		dns    []string
		ips    []string
	}{
		{
			file: "pki/apiserver.crt", ca: "pki/ca.crt", usages: []x509.ExtKeyUsage{server}, cn: "kube-apiserver",
			dns: sorted("api.site-a.example", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"),
			ips: sorted("10.0.0.10", "10.0.0.11", "10.0.0.12", "10.96.0.1", "127.0.0.1"),
		},
		{file: "pki/apiserver-etcd-client.crt", ca: "pki/etcd/ca.crt", usages: []x509.ExtKeyUsage{client}, cn: "kube-apiserver-etcd-client"},
		{file: "pki/apiserver-kubelet-client.crt", ca: "pki/ca.crt", usages: []x509.ExtKeyUsage{client}, cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{file: "pki/front-proxy-client.crt", ca: "pki/front-proxy-ca.crt", usages: []x509.ExtKeyUsage{client}, cn: "front-proxy-client"},
		{
			file: "pki/etcd/server.crt", ca: "pki/etcd/ca.crt", usages: []x509.ExtKeyUsage{server, client}, cn: "cp-1",
			dns: sorted("cp-1", "localhost"), ips: sorted("10.0.0.11", "127.0.0.1"),
		},
		{
			file: "pki/etcd/peer.crt", ca: "pki/etcd/ca.crt", usages: []x509.ExtKeyUsage{server, client}, cn: "cp-1",
			dns: []string{"cp-1"}, ips: []string{"10.0.0.11"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := parseCert(t, tt.file, files[tt.file])
			for _, u := range tt.usages {
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, tt.ca, files[tt.ca]), KeyUsages: []x509.ExtKeyUsage{u}, CurrentTime: t0}); err != nil {
					t.Errorf("verify against %s for usage %v: %v", tt.ca, u, err)
				}
			}
			for _, other := range []string{"pki/ca.crt", "pki/etcd/ca.crt", "pki/front-proxy-ca.crt"} {
				if other == tt.ca {
					continue
				}
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, other, files[other]), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: t0}); err == nil {
					t.Errorf("verifies against %s too, want only %s", other, tt.ca)
				}
			}
			if !slices.Contains(tt.usages, server) {
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, tt.ca, files[tt.ca]), KeyUsages: []x509.ExtKeyUsage{server}, CurrentTime: t0}); err == nil {
					t.Errorf("a client certificate verifies for server auth")
				}
			}
			if c.IsCA {
				t.Errorf("leaf is a CA")
			}
			if c.Subject.CommonName != tt.cn || !slices.Equal(c.Subject.Organization, tt.orgs) {
				t.Errorf("subject CN=%q O=%q, want CN=%q O=%q", c.Subject.CommonName, c.Subject.Organization, tt.cn, tt.orgs)
			}
			if got := sorted(c.DNSNames...); !slices.Equal(got, tt.dns) {
				t.Errorf("DNS SANs %v, want %v", got, tt.dns)
			}
			if got := ipStrings(c); !slices.Equal(got, tt.ips) {
				t.Errorf("IP SANs %v, want %v", got, tt.ips)
			}
			if got, want := c.NotAfter.Sub(t0), 365*24*time.Hour; got != want {
				t.Errorf("valid %v from the clock, want %v", got, want)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, tt.ca, files[tt.ca]), KeyUsages: tt.usages, CurrentTime: t0.Add(366 * 24 * time.Hour)}); err == nil {
				t.Errorf("still valid after a year and a day")
			}
		})
	}

	// The service-account public key is the signing key's.
	saKey, err := parsePrivateKey(files["pki/sa.key"])
	if err != nil {
		t.Fatalf("pki/sa.key: %v", err)
	}
	block, _ := pem.Decode(files["pki/sa.pub"])
	if block == nil {
		t.Fatal("pki/sa.pub: no PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatalf("pki/sa.pub: %v", err)
	}
	if !saKey.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		t.Error("pki/sa.pub is not the public half of pki/sa.key")
	}
	// Each key file holds the key of its certificate.
	for path := range files {
		if !strings.HasSuffix(path, ".key") || path == "pki/sa.key" {
			continue
		}
		crtPath := strings.TrimSuffix(path, ".key") + ".crt"
		key, err := parsePrivateKey(files[path])
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(parseCert(t, crtPath, files[crtPath]).PublicKey) {
			t.Errorf("%s is not the key of %s", path, crtPath)
		}
	}
}

func parsePrivateKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T", k)
	}
	return s, nil
}

func TestNodeFiles(t *testing.T) {
	b := ensure(t, newSpy(), testSpec(), t0)
	for _, node := range []string{"cp-0", "cp-2", "worker-0", "worker-1"} {
		t.Run(node, func(t *testing.T) {
			files, err := b.NodeFiles(node)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := slices.Sorted(maps.Keys(files)), sorted("pki/ca.crt", "pki/node-client.crt", "pki/node-client.key"); !slices.Equal(got, want) {
				t.Fatalf("paths %v, want %v", got, want)
			}
			c := parseCert(t, "node-client.crt", files["pki/node-client.crt"])
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, "ca.crt", files["pki/ca.crt"]), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: t0}); err != nil {
				t.Errorf("verify as a client against the cluster CA: %v", err)
			}
			if c.Subject.CommonName != "system:node:"+node || !slices.Equal(c.Subject.Organization, []string{"system:nodes"}) {
				t.Errorf("subject CN=%q O=%q, want CN=system:node:%s O=[system:nodes]", c.Subject.CommonName, c.Subject.Organization, node)
			}
		})
	}
	if _, err := b.NodeFiles("worker-9"); err == nil || !strings.Contains(err.Error(), "worker-9") {
		t.Errorf("NodeFiles of an unknown node: %v, want an error naming it", err)
	}
	if _, err := b.ControlPlaneFiles("worker-0"); err == nil || !strings.Contains(err.Error(), "worker-0") {
		t.Errorf("ControlPlaneFiles of a worker: %v, want an error naming it", err)
	}
}

// TestHostFiles: a worker gets its node files and the node's and kube-proxy's kubeconfigs; a
// control-plane member also its control-plane files and the controller-manager's and
// scheduler's kubeconfigs, each for the user Kubernetes' default RBAC binds.
func TestHostFiles(t *testing.T) {
	b := ensure(t, newSpy(), testSpec(), t0)
	users := map[string]string{
		"kubelet.conf": "system:node:", "kube-proxy.conf": "system:kube-proxy",
		"controller-manager.conf": "system:kube-controller-manager", "scheduler.conf": "system:kube-scheduler",
	}
	for _, tc := range []struct {
		host        string
		controlPane bool
	}{{"worker-0", false}, {"cp-1", true}} {
		t.Run(tc.host, func(t *testing.T) {
			files, err := b.HostFiles(tc.host)
			if err != nil {
				t.Fatal(err)
			}
			want, err := b.NodeFiles(tc.host)
			if err != nil {
				t.Fatal(err)
			}
			confs := []string{"kubelet.conf", "kube-proxy.conf"}
			if tc.controlPane {
				cp, err := b.ControlPlaneFiles(tc.host)
				if err != nil {
					t.Fatal(err)
				}
				maps.Copy(want, cp)
				confs = append(confs, "controller-manager.conf", "scheduler.conf")
			}
			if got, wantPaths := slices.Sorted(maps.Keys(files)), sorted(append(slices.Collect(maps.Keys(want)), confs...)...); !slices.Equal(got, wantPaths) {
				t.Fatalf("paths %v, want %v", got, wantPaths)
			}
			for _, name := range confs {
				cfg, err := clientcmd.Load(files[name])
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
				c := parseCert(t, name, auth.ClientCertificateData)
				wantCN := users[name]
				if name == "kubelet.conf" {
					wantCN += tc.host
				}
				if c.Subject.CommonName != wantCN {
					t.Errorf("%s: user %q, want %q", name, c.Subject.CommonName, wantCN)
				}
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, "ca.crt", files["pki/ca.crt"]), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: t0}); err != nil {
					t.Errorf("%s: verify as a client against the cluster CA: %v", name, err)
				}
			}
		})
	}
}

func TestKubeconfigs(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		port     int
		server   string
	}{
		{"host name, default port", "api.site-a.example", 0, "https://api.site-a.example:6443"},
		{"IPv4", "192.0.2.1", 16443, "https://192.0.2.1:16443"},
		{"IPv6", "2001:db8::1", 6443, "https://[2001:db8::1]:6443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.APIEndpoint, spec.APIPort = tt.endpoint, tt.port
			b := ensure(t, newSpy(), spec, t0)
			cpFiles, err := b.ControlPlaneFiles("cp-0")
			if err != nil {
				t.Fatal(err)
			}
			admin, err := b.AdminKubeconfig()
			if err != nil {
				t.Fatal(err)
			}
			node, err := b.NodeKubeconfig("worker-1")
			if err != nil {
				t.Fatal(err)
			}
			for _, kc := range []struct {
				name, cn string
				data     []byte
			}{{"admin", "kubernetes-admin", admin}, {"worker-1", "system:node:worker-1", node}} {
				cfg, err := clientcmd.RESTConfigFromKubeConfig(kc.data)
				if err != nil {
					t.Fatalf("%s kubeconfig: %v", kc.name, err)
				}
				if cfg.Host != tt.server {
					t.Errorf("%s kubeconfig: server %q, want %q", kc.name, cfg.Host, tt.server)
				}
				if !bytes.Equal(cfg.CAData, cpFiles["pki/ca.crt"]) {
					t.Errorf("%s kubeconfig: CA is not the cluster CA", kc.name)
				}
				if c := parseCert(t, kc.name, cfg.CertData); c.Subject.CommonName != kc.cn {
					t.Errorf("%s kubeconfig: client CN %q, want %q", kc.name, c.Subject.CommonName, kc.cn)
				}
				if _, err := parsePrivateKey(cfg.KeyData); err != nil {
					t.Errorf("%s kubeconfig: client key: %v", kc.name, err)
				}
			}
			if _, err := b.NodeKubeconfig("nobody"); err == nil {
				t.Error("NodeKubeconfig of an unknown node succeeded")
			}
		})
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	spy := newSpy()
	spec := testSpec()
	first := ensure(t, spy, spec, t0)
	if spy.puts != 1 {
		t.Fatalf("first Ensure wrote %d times, want 1", spy.puts)
	}
	stored := spy.stored(t, secretName)
	for k, v := range stored {
		if !strings.HasSuffix(k, ".crt") && !strings.HasSuffix(k, ".key") && k != "sa.pub" && k != "secretbox.sha256" {
			t.Errorf("stored key %q outside the documented layout", k)
		}
		if len(v) == 0 {
			t.Errorf("stored key %q is empty", k)
		}
	}
	// 3 CAs + 8 cluster-wide leaves + 2 per control-plane member + 1 per host; 2 keys each;
	// sa.key and sa.pub; secretbox.key and secretbox.sha256.
	if got, want := len(stored), 2*(3+8+2*3+5)+4; got != want {
		t.Errorf("stored %d keys, want %d", got, want)
	}

	// An hour later (a restarted BPA) and half a year later: nothing to do.
	for _, now := range []time.Time{t0.Add(time.Hour), t0.Add(182 * 24 * time.Hour)} {
		again := ensure(t, spy, spec, now)
		if spy.puts != 1 {
			t.Fatalf("Ensure with the same spec at %v wrote again (%d writes)", now, spy.puts)
		}
		assertSameFiles(t, first, again, spec)
	}
	if !maps.EqualFunc(stored, spy.stored(t, secretName), bytes.Equal) {
		t.Error("the stored secret changed")
	}
}

// assertSameFiles checks that two bundles give every host the same bytes.
func assertSameFiles(t *testing.T, a, b *pki.Bundle, spec pki.Spec) {
	t.Helper()
	for _, m := range spec.ControlPlane {
		fa, errA := a.ControlPlaneFiles(m.Name)
		fb, errB := b.ControlPlaneFiles(m.Name)
		if errA != nil || errB != nil || !maps.EqualFunc(fa, fb, bytes.Equal) {
			t.Errorf("control-plane files of %s differ (errors %v, %v)", m.Name, errA, errB)
		}
	}
	for _, m := range slices.Concat(spec.ControlPlane, spec.Nodes) {
		fa, errA := a.NodeFiles(m.Name)
		fb, errB := b.NodeFiles(m.Name)
		if errA != nil || errB != nil || !maps.EqualFunc(fa, fb, bytes.Equal) {
			t.Errorf("node files of %s differ (errors %v, %v)", m.Name, errA, errB)
		}
	}
	ka, errA := a.AdminKubeconfig()
	kb, errB := b.AdminKubeconfig()
	if errA != nil || errB != nil || !bytes.Equal(ka, kb) {
		t.Errorf("admin kubeconfigs differ (errors %v, %v)", errA, errB)
	}
}

// changedKeys lists the keys whose values differ between two stored secrets, or that only one has.
func changedKeys(before, after map[string][]byte) []string {
	var out []string
	for k := range maps.Keys(before) {
		if !bytes.Equal(before[k], after[k]) {
			out = append(out, k)
		}
	}
	for k := range maps.Keys(after) {
		if _, ok := before[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestEnsureIssuesOnlyWhatChanged(t *testing.T) {
	cas := []string{"ca.crt", "ca.key", "etcd-ca.crt", "etcd-ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"}
	tests := []struct {
		name   string
		change func(*pki.Spec)
		later  time.Duration
		want   []string
	}{
		{
			name:   "a node is added",
			change: func(s *pki.Spec) { s.Nodes = append(s.Nodes, member("worker-2", "10.0.0.22")) },
			want:   []string{"node.worker-2.crt", "node.worker-2.key"},
		},
		{
			name:   "a node is removed",
			change: func(s *pki.Spec) { s.Nodes = s.Nodes[:1] },
			want:   []string{"node.worker-1.crt", "node.worker-1.key"},
		},
		{
			name:   "a control-plane member is added",
			change: func(s *pki.Spec) { s.ControlPlane = append(s.ControlPlane, member("cp-3", "10.0.0.13")) },
			want: sorted("apiserver.crt", "apiserver.key",
				"etcd-peer.cp-3.crt", "etcd-peer.cp-3.key", "etcd-server.cp-3.crt", "etcd-server.cp-3.key",
				"node.cp-3.crt", "node.cp-3.key"),
		},
		{
			name:   "a control-plane member changes address",
			change: func(s *pki.Spec) { s.ControlPlane[1].IP = netip.MustParseAddr("10.0.1.11") },
			want: sorted("apiserver.crt", "apiserver.key",
				"etcd-peer.cp-1.crt", "etcd-peer.cp-1.key", "etcd-server.cp-1.crt", "etcd-server.cp-1.key"),
		},
		{
			name:   "the endpoint changes",
			change: func(s *pki.Spec) { s.APIEndpoint = "10.0.0.100" },
			want:   []string{"apiserver.crt", "apiserver.key"},
		},
		{
			name:   "the API port changes (not in any certificate)",
			change: func(s *pki.Spec) { s.APIPort = 16443 },
		},
		{
			name:  "leaves are 30 days from expiry",
			later: 336 * 24 * time.Hour,
			want: func() []string {
				var out []string
				for _, base := range []string{"apiserver", "apiserver-etcd-client", "apiserver-kubelet-client", "front-proxy-client", "admin",
					"controller-manager", "scheduler", "kube-proxy",
					"etcd-server.cp-0", "etcd-server.cp-1", "etcd-server.cp-2", "etcd-peer.cp-0", "etcd-peer.cp-1", "etcd-peer.cp-2",
					"node.cp-0", "node.cp-1", "node.cp-2", "node.worker-0", "node.worker-1"} {
					out = append(out, base+".crt", base+".key")
				}
				return sorted(out...)
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := newSpy()
			spec := testSpec()
			ensure(t, spy, spec, t0)
			before := spy.stored(t, secretName)
			if tt.change != nil {
				tt.change(&spec)
			}
			b := ensure(t, spy, spec, t0.Add(time.Hour+tt.later))
			after := spy.stored(t, secretName)
			if got := changedKeys(before, after); !slices.Equal(got, tt.want) {
				t.Errorf("changed stored keys:\n got %v\nwant %v", got, tt.want)
			}
			wantPuts := 1
			if len(tt.want) > 0 {
				wantPuts = 2
			}
			if spy.puts != wantPuts {
				t.Errorf("%d writes, want %d", spy.puts, wantPuts)
			}
			for _, k := range cas {
				if !bytes.Equal(before[k], after[k]) {
					t.Errorf("%s changed", k)
				}
			}
			// What the hosts get still chains to the unchanged CAs.
			files, err := b.ControlPlaneFiles(spec.ControlPlane[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(files["pki/ca.crt"], before["ca.crt"]) || !bytes.Equal(files["pki/etcd/ca.crt"], before["etcd-ca.crt"]) {
				t.Error("the files carry other CAs than the stored ones")
			}
			now := t0.Add(time.Hour + tt.later)
			if _, err := parseCert(t, "apiserver.crt", files["pki/apiserver.crt"]).Verify(x509.VerifyOptions{
				Roots: pool(t, "ca.crt", before["ca.crt"]), CurrentTime: now.Add(30 * 24 * time.Hour),
			}); err != nil {
				t.Errorf("apiserver.crt 30 days on: %v", err)
			}
		})
	}
}

func TestEnsureNeverReplacesACA(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(map[string][]byte)
		wantErr string
	}{
		{"CA key lost", func(d map[string][]byte) { delete(d, "ca.key") }, "only one of ca.crt and ca.key"},
		{"etcd CA certificate lost", func(d map[string][]byte) { delete(d, "etcd-ca.crt") }, "only one of etcd-ca.crt and etcd-ca.key"},
		{"CA key replaced", func(d map[string][]byte) { d["front-proxy-ca.key"] = d["ca.key"] }, "front-proxy-ca.key does not belong to front-proxy-ca.crt"},
		{"CA certificate garbled", func(d map[string][]byte) { d["ca.crt"] = []byte("garbage") }, "ca.crt: not a PEM CERTIFICATE"},
		{"CA certificate is a leaf", func(d map[string][]byte) { d["ca.crt"], d["ca.key"] = d["admin.crt"], d["admin.key"] }, "ca.crt is not a CA certificate"},
		{"service-account key lost", func(d map[string][]byte) { delete(d, "sa.key") }, "sa.pub is stored without sa.key"},
		{"secret encryption key garbled", func(d map[string][]byte) { d["secretbox.key"] = []byte("c2hvcnQ=") }, "secretbox key secretbox.key: want 32 bytes in base64"},
		{"secret encryption key lost", func(d map[string][]byte) { delete(d, "secretbox.key") }, "secretbox.key is gone from the secret store"},
		{"secret encryption key replaced", func(d map[string][]byte) {
			k, err := encryption.NewSecretboxKey()
			if err != nil {
				t.Fatal(err)
			}
			d["secretbox.key"] = []byte(k)
		}, "secretbox.key is not the key the cluster's Secrets are encrypted with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := newSpy()
			ensure(t, spy, testSpec(), t0)
			d := spy.stored(t, secretName)
			tt.corrupt(d)
			if err := spy.Store.Put(context.Background(), secretName, d); err != nil {
				t.Fatal(err)
			}
			_, err := pki.Ensure(context.Background(), spy, secretName, testSpec(), clock(t0))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), secretName) {
				t.Fatalf("Ensure: %v, want an error naming %s and saying %q", err, secretName, tt.wantErr)
			}
			if spy.puts != 1 {
				t.Errorf("Ensure wrote over the damaged secret")
			}
		})
	}

	t.Run("expired CA", func(t *testing.T) {
		spy := newSpy()
		ensure(t, spy, testSpec(), t0)
		_, err := pki.Ensure(context.Background(), spy, secretName, testSpec(), clock(t0.AddDate(11, 0, 0)))
		if err == nil || !strings.Contains(err.Error(), "CA ca: ca.crt expired on 2036") {
			t.Fatalf("Ensure eleven years on: %v, want an expired-CA error", err)
		}
	})
}

// TestEnsureRecordsAnOlderBundlesKey: a bundle stored before the key's digest was recorded
// keeps its key and gets the digest; from then on the key cannot be lost unnoticed.
func TestEnsureRecordsAnOlderBundlesKey(t *testing.T) {
	spy := newSpy()
	ensure(t, spy, testSpec(), t0)
	d := spy.stored(t, secretName)
	key := d["secretbox.key"]
	delete(d, "secretbox.sha256")
	if err := spy.Store.Put(context.Background(), secretName, d); err != nil {
		t.Fatal(err)
	}
	ensure(t, spy, testSpec(), t0)
	d = spy.stored(t, secretName)
	if !bytes.Equal(d["secretbox.key"], key) || len(d["secretbox.sha256"]) != 64 {
		t.Fatalf("after Ensure: key kept %v, digest %q", bytes.Equal(d["secretbox.key"], key), d["secretbox.sha256"])
	}
	delete(d, "secretbox.key")
	if err := spy.Store.Put(context.Background(), secretName, d); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Ensure(context.Background(), spy, secretName, testSpec(), clock(t0)); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Ensure with the key lost: %v, want it refused", err)
	}
}

func TestEnsureRepairsLeaves(t *testing.T) {
	spy := newSpy()
	spec := testSpec()
	ensure(t, spy, spec, t0)
	d := spy.stored(t, secretName)
	delete(d, "node.worker-0.key")                  // half a leaf
	d["admin.key"] = d["apiserver-etcd-client.key"] // a key of another certificate
	d["front-proxy-client.crt"] = d["admin.crt"]    // signed by another CA, with another subject
	d["stray"] = []byte("x")                        // not in the layout
	if err := spy.Store.Put(context.Background(), secretName, d); err != nil {
		t.Fatal(err)
	}
	ensure(t, spy, spec, t0)
	got := changedKeys(d, spy.stored(t, secretName))
	want := sorted("admin.crt", "admin.key", "front-proxy-client.crt", "front-proxy-client.key", "node.worker-0.crt", "node.worker-0.key", "stray")
	if !slices.Equal(got, want) {
		t.Errorf("changed stored keys:\n got %v\nwant %v", got, want)
	}
}

// errStore fails every call.
type errStore struct{ err error }

func (e errStore) Get(context.Context, string) (map[string][]byte, error) { return nil, e.err }
func (e errStore) Put(context.Context, string, map[string][]byte) error   { return e.err }

func TestEnsureStoreErrors(t *testing.T) {
	boom := errors.New("vault sealed")
	_, err := pki.Ensure(context.Background(), errStore{boom}, secretName, testSpec())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "load") || !strings.Contains(err.Error(), secretName) {
		t.Errorf("Get failing: %v, want it wrapped with the secret's name", err)
	}
	_, err = pki.Ensure(context.Background(), errStore{fmt.Errorf("no such secret: %w", secrets.ErrNotFound)}, secretName, testSpec())
	if !errors.Is(err, secrets.ErrNotFound) || !strings.Contains(err.Error(), "save") {
		t.Errorf("Put failing: %v, want a save error", err)
	}
	if _, err := pki.Ensure(context.Background(), newSpy(), "Not_A_Name", testSpec()); err == nil {
		t.Error("Ensure with an invalid secret name succeeded")
	}
}

func TestSpecValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*pki.Spec)
		want   []string // substrings of the error; none: valid
	}{
		{"valid", func(*pki.Spec) {}, nil},
		{"IP endpoint, IPv6 service range", func(s *pki.Spec) { s.APIEndpoint = "10.0.0.100"; s.ServiceCIDR = "fd00:10::/108" }, nil},
		{"no cluster name", func(s *pki.Spec) { s.ClusterName = "" }, []string{"ClusterName"}},
		{"endpoint with port", func(s *pki.Spec) { s.APIEndpoint = "api.example:6443" }, []string{"APIEndpoint", "no port"}},
		{"endpoint URL", func(s *pki.Spec) { s.APIEndpoint = "https://api.example" }, []string{"APIEndpoint"}},
		{"port out of range", func(s *pki.Spec) { s.APIPort = 70000 }, []string{"APIPort 70000"}},
		{"bad service CIDR", func(s *pki.Spec) { s.ServiceCIDR = "10.96.0.0" }, []string{"ServiceCIDR"}},
		{"service CIDR too small", func(s *pki.Spec) { s.ServiceCIDR = "10.96.0.0/32" }, []string{"ServiceCIDR", "too small"}},
		{"no control plane", func(s *pki.Spec) { s.ControlPlane = nil }, []string{"ControlPlane: at least one"}},
		{"bad member name", func(s *pki.Spec) { s.ControlPlane[1].Name = "CP_1" }, []string{"ControlPlane[1].Name"}},
		{"member without IP", func(s *pki.Spec) { s.Nodes[1].IP = netip.Addr{} }, []string{"Nodes[1].IP", "worker-1"}},
		{"name used twice", func(s *pki.Spec) { s.Nodes[0].Name = "cp-2" }, []string{"Nodes[0].Name", "already used by ControlPlane[2]"}},
		{"control-plane IP used twice", func(s *pki.Spec) { s.ControlPlane[2].IP = s.ControlPlane[0].IP }, []string{"ControlPlane[2].IP", "ControlPlane[0]"}},
		{"several faults", func(s *pki.Spec) { s.ClusterName = ""; s.APIPort = -1 }, []string{"ClusterName", "APIPort -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			tt.change(&spec)
			spy := newSpy()
			_, err := pki.Ensure(context.Background(), spy, secretName, spec, clock(t0))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Ensure: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Ensure succeeded, want an error saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if spy.gets != 0 || spy.puts != 0 {
				t.Errorf("an invalid spec reached the store (%d gets, %d puts)", spy.gets, spy.puts)
			}
		})
	}
}
