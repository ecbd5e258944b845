package clustercred

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		name       string
		user       string
		groups     []string
		wantUser   string
		wantGroups []string
		wantErr    bool
	}{
		{name: "user and groups", user: "alice", groups: []string{"dev", "ops"}, wantUser: "edgefleet:alice",
			wantGroups: []string{"edgefleet:cluster-users", "edgefleet:dev", "edgefleet:ops"}},
		// No global identity becomes a system: identity of the application cluster.
		{name: "system:masters is prefixed", user: "system:admin", groups: []string{"system:masters", "system:authenticated"},
			wantUser:   "edgefleet:system:admin",
			wantGroups: []string{"edgefleet:cluster-users", "edgefleet:system:authenticated", "edgefleet:system:masters"}},
		{name: "duplicates and empty groups dropped", user: "bob", groups: []string{"a", "", "a", "cluster-users"},
			wantUser: "edgefleet:bob", wantGroups: []string{"edgefleet:a", "edgefleet:cluster-users"}},
		{name: "empty user", user: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := IdentityOf(tc.user, tc.groups)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if id.User != tc.wantUser || !slices.Equal(id.Groups, tc.wantGroups) {
				t.Errorf("got %q %q, want %q %q", id.User, id.Groups, tc.wantUser, tc.wantGroups)
			}
			if err := id.Check(); err != nil {
				t.Errorf("Check of an identity IdentityOf made: %v", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   Identity
		ok   bool
	}{
		{name: "prefixed", id: Identity{User: "edgefleet:alice", Groups: []string{UsersGroup}}, ok: true},
		{name: "system user", id: Identity{User: "system:admin"}},
		{name: "system group", id: Identity{User: "edgefleet:alice", Groups: []string{"system:masters"}}},
		{name: "unprefixed user", id: Identity{User: "kubernetes-admin"}},
		{name: "prefix alone", id: Identity{User: "edgefleet:"}},
		{name: "unprefixed group", id: Identity{User: "edgefleet:alice", Groups: []string{"admins"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.id.Check(); (err == nil) != tc.ok {
				t.Errorf("Check: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	for _, tc := range []struct {
		requested, max, want time.Duration
		wantErr              bool
	}{
		{requested: 0, max: 12 * time.Hour, want: 12 * time.Hour},
		{requested: time.Hour, max: 12 * time.Hour, want: time.Hour},
		{requested: 48 * time.Hour, max: 12 * time.Hour, want: 12 * time.Hour},
		{requested: -time.Second, max: 12 * time.Hour, wantErr: true},
		{requested: time.Hour, max: 0, wantErr: true},
	} {
		got, err := Lifetime(tc.requested, tc.max)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Lifetime(%s, %s) = %s, %v; want %s, error %v", tc.requested, tc.max, got, err, tc.want, tc.wantErr)
		}
	}
}

func csrPEM(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestPublicKey(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	small, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	weakRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{User: "edgefleet:alice", Groups: []string{"edgefleet:cluster-users", "edgefleet:dev"}}
	empty, err := NewCSR(key)
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(strings.Replace(string(empty), string(empty[40:44]), "AAAA", 1))
	for _, tc := range []struct {
		name    string
		csr     []byte
		wantErr string
	}{
		{name: "empty subject", csr: empty},
		{name: "the identity's subject", csr: csrPEM(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: id.User, Organization: []string{"edgefleet:dev", "edgefleet:cluster-users"}}})},
		{name: "another user", csr: csrPEM(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "edgefleet:bob", Organization: id.Groups}}), wantErr: "neither empty nor the identity"},
		{name: "system:masters asked for", csr: csrPEM(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: id.User, Organization: append([]string{"system:masters"}, id.Groups...)}}), wantErr: "neither empty nor the identity"},
		{name: "extra subject attribute", csr: csrPEM(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: id.User, Organization: id.Groups, OrganizationalUnit: []string{"x"}}}), wantErr: "neither empty nor the identity"},
		{name: "SAN", csr: csrPEM(t, key, &x509.CertificateRequest{DNSNames: []string{"api.example"}}), wantErr: "subject alternative names"},
		{name: "small curve", csr: csrPEM(t, small, &x509.CertificateRequest{}), wantErr: "at least P-256"},
		{name: "weak RSA", csr: csrPEM(t, weakRSA, &x509.CertificateRequest{}), wantErr: "at least 2048"},
		{name: "bad signature", csr: tampered, wantErr: "csr:"},
		{name: "not PEM", csr: []byte("hello"), wantErr: "not a PEM CERTIFICATE REQUEST"},
		{name: "two blocks", csr: append(slices.Clone(empty), empty...), wantErr: "more than one PEM block"},
		{name: "too big", csr: make([]byte, maxCSR+1), wantErr: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := PublicKey(tc.csr, id)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("PublicKey: %v", err)
				}
				if !key.PublicKey.Equal(pub) {
					t.Errorf("PublicKey returned another key")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
