package certs

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"testing"
	"time"
)

func TestIssuedLeafMatchesUntilItsRenewalWindow(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{CommonName: "kube-apiserver", DNSNames: []string{"localhost", "kubernetes", "localhost"},
		IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:127.0.0.1")}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	kp, err := Issue(l, ca, now)
	if err != nil {
		t.Fatal(err)
	}
	if !SamePublicKey(kp.Key, kp.Cert.PublicKey) || kp.Cert.IsCA || kp.Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatal("the issued pair is not a leaf of the CA with its own key")
	}
	// Names in another order, repeated, IPv4-mapped: still what l asks.
	reordered := Leaf{CommonName: l.CommonName, DNSNames: []string{"kubernetes", "localhost"},
		IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")}, Usages: l.Usages}
	for name, tc := range map[string]struct {
		leaf Leaf
		at   time.Time
		want bool
	}{
		"as issued":                 {l, now, true},
		"names in another order":    {reordered.Normalized(), now, true},
		"a name more":               {Leaf{CommonName: l.CommonName, DNSNames: []string{"kubernetes", "localhost", "api"}, IPs: l.IPs, Usages: l.Usages}, now, false},
		"another common name":       {Leaf{CommonName: "admin", DNSNames: l.DNSNames, IPs: l.IPs, Usages: l.Usages}, now, false},
		"client instead of server":  {Leaf{CommonName: l.CommonName, DNSNames: l.DNSNames, IPs: l.IPs, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, now, false},
		"before its renewal window": {l, now.Add(LeafValidity - RenewBefore - time.Hour), true},
		"in its renewal window":     {l, now.Add(LeafValidity - RenewBefore + time.Hour), false},
	} {
		if got := tc.leaf.Matches(kp.Cert, ca.Cert, tc.at); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", name, got, tc.want)
		}
	}
	other, err := NewCA("other-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	if l.Matches(kp.Cert, other.Cert, now) {
		t.Error("a leaf of another CA matches")
	}
	// A leaf never outlives its CA.
	late, err := Issue(l, ca, now.Add(CAValidity-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if late.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf until %v, CA until %v", late.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestKeysRoundTripInBothPEMForms(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"PKCS#8": pkcs8, "SEC 1": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})} {
		got, err := DecodeKey(data)
		if err != nil || !SamePublicKey(got, key.Public()) {
			t.Errorf("%s: %v, or another key", name, err)
		}
	}
	if _, err := DecodeKey(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})); err == nil {
		t.Error("a certificate decoded as a key")
	}
	if _, err := DecodeCert(pkcs8); err == nil {
		t.Error("a key decoded as a certificate")
	}
}
