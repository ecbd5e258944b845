package httpserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/httpserver"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// writePair writes p's certificate and key into dir as name.crt and name.key.
func writePair(t *testing.T, dir, name string, p certs.KeyPair) (crt, key string) {
	t.Helper()
	keyPEM, err := certs.EncodeKey(p.Key)
	if err != nil {
		t.Fatal(err)
	}
	crt, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	// Written aside and renamed, as an issuer replaces a pair in place.
	for path, b := range map[string][]byte{crt: certs.EncodeCert(p.Cert), key: keyPEM} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	return crt, key
}

func issue(t *testing.T, l certs.Leaf, ca certs.KeyPair) certs.KeyPair {
	t.Helper()
	p, err := certs.Issue(l, ca, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newCA(t *testing.T, cn string) certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA(cn, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// start runs s until the test ends and waits until it listens.
func start(t *testing.T, s *httpserver.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() error { return s.Ready(nil) }) // s listening
}

// TestServesRenewedCertificateAndVerifiesClients: the server answers with the certificate its
// files hold, the renewed one once they are replaced, without a restart; a client certificate
// of the client CA reaches the handler verified, one of another CA is refused in the
// handshake, and a request without one reaches the handler unverified.
func TestServesRenewedCertificateAndVerifiesClients(t *testing.T) {
	dir := t.TempDir()
	serving, clientCA, otherCA := newCA(t, "serving CA"), newCA(t, "client CA"), newCA(t, "other CA")
	servingLeaf := certs.Leaf{CommonName: "cache", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	first := issue(t, servingLeaf, serving)
	crt, key := writePair(t, dir, "serving", first)
	caFile := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(caFile, certs.EncodeCert(clientCA.Cert), 0o600); err != nil {
		t.Fatal(err)
	}

	s := &httpserver.Server{Name: "test server", Addr: testutil.FreeAddr(t), CertFile: crt, KeyFile: key, ClientCAFile: caFile, Log: logr.Discard(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.TLS.VerifiedChains) == 0 {
				_, _ = io.WriteString(w, "anonymous")
				return
			}
			_, _ = io.WriteString(w, r.TLS.VerifiedChains[0][0].Subject.CommonName)
		})}
	start(t, s)

	roots := x509.NewCertPool()
	roots.AddCert(serving.Cert)
	// get answers the body and the serial of the server's certificate.
	get := func(t *testing.T, clientCert *certs.KeyPair) (string, string, error) {
		t.Helper()
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if clientCert != nil {
			// Sent whatever CAs the server names (a client given Certificates sends only one
			// of a CA the server accepts).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return &tls.Certificate{Certificate: [][]byte{clientCert.Cert.Raw}, PrivateKey: clientCert.Key}, nil
			}
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
		resp, err := c.Get("https://" + s.Addr + "/")
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), resp.TLS.PeerCertificates[0].SerialNumber.String(), err
	}

	body, serial, err := get(t, nil)
	if err != nil || body != "anonymous" || serial != first.Cert.SerialNumber.String() {
		t.Fatalf("without a client certificate: %q, serial %s, %v; want anonymous, serial %s", body, serial, err, first.Cert.SerialNumber)
	}
	user := issue(t, certs.Leaf{CommonName: "edgefleet:bpa", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, clientCA)
	if body, _, err := get(t, &user); err != nil || body != "edgefleet:bpa" {
		t.Fatalf("with a client certificate of the client CA: %q, %v; want edgefleet:bpa", body, err)
	}
	stranger := issue(t, certs.Leaf{CommonName: "edgefleet:bpa", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, otherCA)
	if body, _, err := get(t, &stranger); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client certificate of another CA: %q, %v; want the handshake refused", body, err)
	}

	// Renewal: the files get a new certificate; the server serves it, same address, no restart.
	second := issue(t, servingLeaf, serving)
	writePair(t, dir, "serving", second)
	testutil.WaitFor(t, 30*time.Second, "the renewed certificate served, serial "+second.Cert.SerialNumber.String(), func() (bool, string) {
		_, serial, err := get(t, nil)
		if err != nil {
			t.Fatal(err)
		}
		return serial == second.Cert.SerialNumber.String(), "serving serial " + serial
	})
}

func TestRefusesBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "serving CA")
	crt, key := writePair(t, dir, "serving", issue(t, certs.Leaf{CommonName: "x", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, ca))
	notPEM := filepath.Join(dir, "not-pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		s    *httpserver.Server
		want string
	}{
		{"client CA without a certificate", &httpserver.Server{ClientCAFile: notPEM}, "client certificates come over TLS only"},
		{"missing key", &httpserver.Server{CertFile: crt, KeyFile: filepath.Join(dir, "missing.key")}, "missing.key"},
		{"client CA not PEM", &httpserver.Server{CertFile: crt, KeyFile: key, ClientCAFile: notPEM}, "holds no PEM certificate"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Name, tc.s.Addr, tc.s.Log = "test server "+strconv.Itoa(i), testutil.FreeAddr(t), logr.Discard()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tc.s.Start(ctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
