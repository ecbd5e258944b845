package kubeauth_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// TestMiddlewareClientCertificate: a client certificate the TLS server verified authenticates
// as the API server's x509 authenticator would (CommonName, Organizations, and
// system:authenticated), without a TokenReview; one of another CA never reaches the handler; no
// certificate falls back to the bearer token.
func TestMiddlewareClientCertificate(t *testing.T) {
	var c calls
	reviewer := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, &c), Group: group, Resource: resource})
	srv := httptest.NewUnstartedServer(reviewer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := kubeauth.UserFrom(r.Context())
		_, _ = io.WriteString(w, u.Name+" "+strings.Join(u.Groups, ","))
	})))
	clientCA, err := certs.NewCA("client CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := certs.NewCA("other CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	leaf := certs.Leaf{CommonName: "edgefleet:bpa", Organizations: []string{"edgefleet:site"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	client := func(ca *certs.KeyPair) *http.Client {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if ca != nil {
			p, err := certs.Issue(leaf, *ca, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return &tls.Certificate{Certificate: [][]byte{p.Cert.Raw}, PrivateKey: p.Key}, nil
			}
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}

	resp, err := client(&clientCA).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "edgefleet:bpa edgefleet:site,system:authenticated" {
		t.Fatalf("with a verified client certificate: %d %q, want 200 and the certificate's user and groups", resp.StatusCode, body)
	}
	if n := c.tokenReviews.Load(); n != 0 {
		t.Errorf("%d TokenReviews for a client certificate, want none", n)
	}

	if resp, err := client(&otherCA).Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatalf("a client certificate of another CA was answered %d; want the handshake refused", resp.StatusCode)
	}

	resp, err = client(nil).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a certificate or a token: %d, want 401", resp.StatusCode)
	}
}

// TestRequire: only a caller allowed the verb on the virtual resource reaches the handler;
// another gets 403 naming who and what, and an API server that cannot be asked gives 503.
func TestRequire(t *testing.T) {
	ns := global.Namespace(t)
	readerSA, readerToken := serviceAccount(t, ns, "reader")
	_, strangerToken := serviceAccount(t, ns, "stranger")
	reviewer := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource})
	reader, err := reviewer.Authenticate(t.Context(), readerToken)
	if err != nil {
		t.Fatal(err)
	}
	grantArtifactReading(t, readerSA, reader)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "content") })
	srv := httptest.NewServer(reviewer.Require("get")(ok))
	t.Cleanup(srv.Close)
	// The reviewer of an unreachable API server authenticates from its cache: it never can.
	down := httptest.NewServer(kubeauth.NewReviewer(kubeauth.Config{Client: unreachableClient(t), Group: group, Resource: resource}).Require("get")(ok))
	t.Cleanup(down.Close)

	cases := []struct {
		name, url, token string
		wantStatus       int
		wantBody         string
	}{
		{"granted", srv.URL, readerToken, http.StatusOK, "content"},
		{"not granted", srv.URL, strangerToken, http.StatusForbidden, `user \"system:serviceaccount:` + ns + `:stranger\" may not get artifacts.fleet.edgefleet.io`},
		{"no token", srv.URL, "", http.StatusUnauthorized, "missing Authorization header"},
		{"API server down", down.URL, readerToken, http.StatusServiceUnavailable, "try again later"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantBody) {
				t.Fatalf("%d %s, want %d and a body containing %s", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}
