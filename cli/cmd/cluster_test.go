package cmd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
)

// TestClusterKubeconfig runs the verb against a stand-in of the global controller's endpoint
// that signs the CSR with a CA of its own: the kubeconfig holds the key made by the CLI, which
// matches the certificate, and only a CSR was sent.
func TestClusterKubeconfig(t *testing.T) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	var got restv1.KubeconfigRequest
	var path string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.Path
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, `{"message":"no token"}`, http.StatusUnauthorized)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		id := clustercred.Identity{User: "edgefleet:alice", Groups: []string{clustercred.UsersGroup}}
		pub, err := clustercred.PublicKey([]byte(got.CSR), id)
		if err != nil {
			t.Errorf("CSR: %v", err)
			return
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: id.User, Organization: id.Groups}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, pub, caKey)
		if err != nil {
			t.Error(err)
			return
		}
		_ = json.NewEncoder(w).Encode(restv1.ClusterCredential{
			Cluster: "site-a", Server: "https://10.0.0.10:6443", User: id.User, Groups: id.Groups, ExpirationTime: tmpl.NotAfter,
			Certificate:          string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			CertificateAuthority: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		})
	}))
	defer api.Close()
	// The user's kubeconfig of the global cluster, with a token.
	own := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(own, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: g, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t0ken}}]\ncontexts: [{name: c, context: {cluster: g, user: u, namespace: fleet-a}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "site-a.kubeconfig")
	out, err := runAs(t, own, "--api-server", api.URL, "cluster", "kubeconfig", "site-a", "--ttl", "8h", "-f", file)
	if err != nil {
		t.Fatalf("edgefleet cluster kubeconfig: %v: %s", err, out)
	}
	if path != "POST /api/v1/namespaces/fleet-a/sites/site-a/kubeconfig" || got.TTLSeconds != 8*3600 {
		t.Errorf("asked %s with ttl %ds", path, got.TTLSeconds)
	}
	if !strings.Contains(out, "as edgefleet:alice") {
		t.Errorf("output %q", out)
	}
	info, err := os.Stat(file)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v, mode %v; want 0600", err, info.Mode())
	}
	cfg, err := clientcmd.LoadFromFile(file)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if _, err := tls.X509KeyPair(auth.ClientCertificateData, auth.ClientKeyData); err != nil {
		t.Errorf("the kubeconfig's key does not match its certificate: %v", err)
	}
	if strings.Contains(got.CSR, "PRIVATE KEY") {
		t.Error("the request carried a private key")
	}
	if cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server != "https://10.0.0.10:6443" {
		t.Errorf("server %+v", cfg.Clusters)
	}
}
