package siteinit

import (
	"bytes"
	"context"
	"crypto/x509"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"

	"github.com/edgefleet/edgefleet/pkg/certs"
)

// fakeInterfaces is a fake of the machine's interface addresses.
func fakeInterfaces(cidrs ...string) func() ([]net.Addr, error) {
	return func() ([]net.Addr, error) {
		var out []net.Addr
		for _, c := range append([]string{"127.0.0.1/8", "::1/128"}, cidrs...) {
			ip, n, err := net.ParseCIDR(c)
			if err != nil {
				return nil, err
			}
			n.IP = ip
			out = append(out, n)
		}
		return out, nil
	}
}

// snapshot is every file under dir with its content, mode and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if info.Mode().Perm() != 0o700 {
				t.Errorf("directory %s has mode %v, want 0700", rel, info.Mode().Perm())
			}
			return nil
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", rel, info.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = info.ModTime().String() + "\n" + string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pki", name+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := cert.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func TestRunIsIdempotentAndLeastPrivileged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	opts := Options{Dir: dir, Interfaces: fakeInterfaces("10.233.7.10/24"), Addresses: []string{"site.example"}}
	first, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Address.String() != "10.233.7.10" {
		t.Errorf("address %s, want the machine's 10.233.7.10", first.Address)
	}
	for _, want := range []string{"pki/ca.crt", "pki/apiserver.crt", "pki/admin.crt", "pki/local-controller.crt", "pki/sa.key",
		"kubeconfig/bpa.kubeconfig", "encryption-config.yaml", "stack.env"} {
		if !slices.Contains(first.Changed, want) {
			t.Errorf("first run did not write %s: %v", want, first.Changed)
		}
	}
	before := snapshot(t, dir)

	second, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Changed) != 0 {
		t.Errorf("second run changed %v; want nothing", second.Changed)
	}
	after := snapshot(t, dir)
	for f, v := range before {
		if after[f] != v {
			t.Errorf("second run changed %s", f)
		}
	}

	ca := readCert(t, dir, "ca")
	api := readCert(t, dir, "apiserver")
	if err := api.CheckSignatureFrom(ca); err != nil {
		t.Errorf("API server certificate not signed by the site CA: %v", err)
	}
	for _, host := range []string{"10.233.7.10", "127.0.0.1", ServiceIP, "site.example", "kubernetes.default.svc"} {
		if err := api.VerifyHostname(host); err != nil {
			t.Errorf("API server certificate: %v", err)
		}
	}
	cache := readCert(t, dir, "site-cache")
	if err := cache.CheckSignatureFrom(ca); err != nil {
		t.Errorf("site cache certificate not signed by the site CA: %v", err)
	}
	for _, host := range []string{"10.233.7.10", "127.0.0.1", "site.example"} {
		if err := cache.VerifyHostname(host); err != nil {
			t.Errorf("site cache certificate: %v", err)
		}
	}
	for _, id := range identities() {
		c := readCert(t, dir, id.Name)
		admin := slices.Contains(c.Subject.Organization, "system:masters")
		if admin != (id.Name == "admin") {
			t.Errorf("%s's certificate (CN %s, O %v): system:masters only for the admin", id.Name, c.Subject.CommonName, c.Subject.Organization)
		}
		cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig", id.Name+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.AuthInfos[id.Name].ClientCertificate; got != filepath.Join(dir, "pki", id.Name+".crt") {
			t.Errorf("%s's kubeconfig uses certificate %s", id.Name, got)
		}
		if !bytes.Equal(cfg.Clusters["site"].CertificateAuthorityData, readFile(t, filepath.Join(dir, "pki", "ca.crt"))) {
			t.Errorf("%s's kubeconfig does not hold the site CA inline", id.Name)
		}
	}
	enc, err := os.ReadFile(filepath.Join(dir, "encryption-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte("secretbox:")) {
		t.Errorf("encryption configuration holds no secretbox provider:\n%s", enc)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "stack.env"))
	if !strings.Contains(string(env), "SITE_SERVER=https://10.233.7.10:6443\n") {
		t.Errorf("stack.env:\n%s", env)
	}
}

func TestRunReissuesServingCertificateForNewAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	if _, err := Run(context.Background(), Options{Dir: dir, Interfaces: fakeInterfaces()}); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, dir, "ca")
	res, err := Run(context.Background(), Options{Dir: dir, Interfaces: fakeInterfaces("192.0.2.5/24")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{"pki/apiserver.crt", "pki/site-cache.crt", "stack.env"}) {
		t.Errorf("a new address changed %v; want the serving certificates and stack.env only", res.Changed)
	}
	if !readCert(t, dir, "ca").Equal(ca) {
		t.Error("the CA changed")
	}
	if err := readCert(t, dir, "site-cache").VerifyHostname("192.0.2.5"); err != nil {
		t.Error(err)
	}
	if err := readCert(t, dir, "apiserver").VerifyHostname("192.0.2.5"); err != nil {
		t.Error(err)
	}
}

func TestRunRenewsExpiringCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	opts := Options{Dir: dir, Interfaces: fakeInterfaces()}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	opts.Now = func() time.Time { return time.Now().Add(certs.LeafValidity - certs.RenewBefore/2) }
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Changed, "pki/bpa.crt") || slices.Contains(res.Changed, "pki/ca.crt") {
		t.Errorf("near the leaves' expiry a run changed %v; want every leaf renewed, the CA kept", res.Changed)
	}
	// The renewal timer restarts every component with a client certificate, and only them.
	want := []string{"kube-controller-manager.service", "edgefleet-local-controller.service", "edgefleet-bpa.service", "baremetal-operator.service"}
	if got := RestartUnits(res.Changed); !slices.Equal(got, want) {
		t.Errorf("after renewing %v, restart %v; want %v", res.Changed, got, want)
	}
}

func TestRunRefusesRelativeDir(t *testing.T) {
	_, err := Run(context.Background(), Options{Dir: "site", Interfaces: fakeInterfaces()})
	if err == nil || !strings.Contains(err.Error(), "--dir must be an absolute path") {
		t.Fatalf("error %v; want one naming --dir", err)
	}
	if _, err := os.Stat("site"); err == nil {
		t.Error("a refused run created site/")
	}
}

func TestRunRemakesUnreadableCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	opts := Options{Dir: dir, Interfaces: fakeInterfaces()}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "bpa.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{"pki/bpa.crt"}) {
		t.Errorf("after bpa.crt was garbled a run changed %v; want pki/bpa.crt only", res.Changed)
	}
	if err := readCert(t, dir, "bpa").CheckSignatureFrom(readCert(t, dir, "ca")); err != nil {
		t.Error(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestartUnits(t *testing.T) {
	all := []string{"kube-apiserver.service", "kube-controller-manager.service", "edgefleet-local-controller.service", "edgefleet-bpa.service", "baremetal-operator.service"}
	for _, tc := range []struct {
		name    string
		changed []string
		want    []string
	}{
		{"nothing", nil, []string{}},
		{"first boot: a new CA", []string{"pki/ca.crt", "pki/apiserver.crt", "kubeconfig/bpa.kubeconfig"}, all},
		{"a new address", []string{"pki/apiserver.crt", "pki/site-cache.crt", "stack.env"}, all},
		{"serving certificates, read as they change", []string{"pki/apiserver.crt", "pki/site-cache.crt"}, []string{}},
		{"the BPA's renewed client certificate", []string{"pki/bpa.crt"}, []string{"edgefleet-bpa.service"}},
		{"two components' kubeconfigs", []string{"kubeconfig/baremetal-operator.kubeconfig", "pki/local-controller.crt"}, []string{"edgefleet-local-controller.service", "baremetal-operator.service"}},
		{"the controller manager", []string{"pki/controller-manager.crt", "kubeconfig/controller-manager.kubeconfig"}, []string{"kube-controller-manager.service"}},
		{"a new service-account key", []string{"pki/sa.key"}, []string{"kube-apiserver.service", "kube-controller-manager.service"}},
		{"a new encryption configuration", []string{"encryption-config.yaml"}, []string{"kube-apiserver.service"}},
		{"the admin's, read by commands only", []string{"pki/admin.crt", "kubeconfig/admin.kubeconfig"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RestartUnits(tc.changed); !slices.Equal(got, tc.want) {
				t.Errorf("RestartUnits(%v) = %v, want %v", tc.changed, got, tc.want)
			}
		})
	}
}
