package pki

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Validity periods and the renewal window of leaf certificates.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: Ensure reissues a leaf certificate with less than this left.
	renewBefore = 30 * 24 * time.Hour
	// backdate tolerates clocks of hosts that run slightly behind the BPA's.
	backdate = 5 * time.Minute
)

// keyPair is a parsed certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// leafSpec is what a leaf certificate must say.
type leafSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []netip.Addr
	usages []x509.ExtKeyUsage
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	return k, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

// newCA creates a self-signed CA valid for caValidity from now.
func newCA(cn string, now time.Time) (keyPair, error) {
	key, err := newKey()
	if err != nil {
		return keyPair{}, fmt.Errorf("CA %s: %w", cn, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return keyPair{}, fmt.Errorf("CA %s: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              now.Add(caValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, key, tmpl, key)
}

// issue creates a leaf certificate for s signed by ca, valid for leafValidity from now but not
// beyond the CA.
func issue(s leafSpec, ca keyPair, now time.Time) (keyPair, error) {
	key, err := newKey()
	if err != nil {
		return keyPair{}, fmt.Errorf("certificate %s: %w", s.cn, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return keyPair{}, fmt.Errorf("certificate %s: %w", s.cn, err)
	}
	notAfter := now.Add(leafValidity)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: s.cn, Organization: s.orgs},
		DNSNames:              s.dns,
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              notAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           s.usages,
		BasicConstraintsValid: true,
	}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	return sign(tmpl, key, ca.cert, ca.key)
}

func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey crypto.Signer) (keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse certificate %s just signed: %w", tmpl.Subject.CommonName, err)
	}
	return keyPair{cert: cert, key: key}, nil
}

// matches reports whether cert says what s asks, is signed by ca and is far enough from expiry
// at now. The order of names does not matter.
func (s leafSpec) matches(cert *x509.Certificate, ca *x509.Certificate, now time.Time) bool {
	if cert.CheckSignatureFrom(ca) != nil || now.Add(renewBefore).After(cert.NotAfter) {
		return false
	}
	ips := make([]netip.Addr, 0, len(cert.IPAddresses))
	for _, ip := range cert.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return false
		}
		ips = append(ips, a.Unmap())
	}
	want := make([]netip.Addr, 0, len(s.ips))
	for _, ip := range s.ips {
		want = append(want, ip.Unmap())
	}
	return cert.Subject.CommonName == s.cn &&
		sameSet(cert.Subject.Organization, s.orgs, cmp.Compare[string]) &&
		sameSet(cert.DNSNames, s.dns, cmp.Compare[string]) &&
		sameSet(ips, want, netip.Addr.Compare) &&
		sameSet(cert.ExtKeyUsage, s.usages, cmp.Compare[x509.ExtKeyUsage])
}

// sameSet reports whether a and b hold the same elements, ignoring order and repeats.
func sameSet[T any](a, b []T, compare func(T, T) int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compare)
	slices.SortFunc(b, compare)
	eq := func(x, y T) bool { return compare(x, y) == 0 }
	return slices.EqualFunc(slices.CompactFunc(a, eq), slices.CompactFunc(b, eq), eq)
}

// encodeCert and encodeKey return PEM: "CERTIFICATE" and PKCS#8 "PRIVATE KEY".
func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func encodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodePublicKey(k crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func decodeCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM CERTIFICATE")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return c, nil
}

func decodeKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	return s, nil
}

// samePublicKey reports whether key is the private half of pub.
func samePublicKey(key crypto.Signer, pub crypto.PublicKey) bool {
	p, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && p.Equal(pub)
}
