// Package certs issues and checks the X.509 certificates edgefleet makes itself: ECDSA P-256
// keys, self-signed CAs and leaf certificates, and whether a stored leaf still says what it
// must and is far enough from expiry. The BPA's application-cluster PKI (bpa/pki) and the
// bootstrap machine's site PKI (local-controller/siteinit) both build on it.
package certs

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

// Validity periods and the renewal window.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// RenewBefore: a leaf certificate with less than this left is issued again.
	RenewBefore = 30 * 24 * time.Hour
	// Backdate tolerates clocks of hosts that run slightly behind the issuer's.
	Backdate = 5 * time.Minute
)

// KeyPair is a parsed certificate with its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Lifetime is how long leaf certificates live and when they are issued again.
type Lifetime struct {
	// Validity is how long a leaf certificate lives; zero: LeafValidity.
	Validity time.Duration
	// RenewBefore: a leaf certificate with less than this left is issued again; zero:
	// RenewBefore.
	RenewBefore time.Duration
}

func (l Lifetime) validity() time.Duration { return cmp.Or(l.Validity, LeafValidity) }

func (l Lifetime) renewBefore() time.Duration { return cmp.Or(l.RenewBefore, RenewBefore) }

// Leaf is what a leaf certificate must say, and how long it lives.
type Leaf struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []netip.Addr
	Usages        []x509.ExtKeyUsage
	Lifetime
}

// Normalized returns l with its names sorted and without repeats.
func (l Leaf) Normalized() Leaf {
	l.DNSNames = slices.Compact(slices.Sorted(slices.Values(l.DNSNames)))
	l.IPs = slices.Clone(l.IPs)
	for i, ip := range l.IPs {
		l.IPs[i] = ip.Unmap()
	}
	slices.SortFunc(l.IPs, netip.Addr.Compare)
	l.IPs = slices.Compact(l.IPs)
	return l
}

// NewKey makes an ECDSA P-256 key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	return k, nil
}

// SerialNumber is a random 127-bit certificate serial number.
func SerialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

// NewCA makes a self-signed CA named cn, valid for CAValidity from now.
func NewCA(cn string, now time.Time) (KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return KeyPair{}, fmt.Errorf("CA %s: %w", cn, err)
	}
	serial, err := SerialNumber()
	if err != nil {
		return KeyPair{}, fmt.Errorf("CA %s: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-Backdate).UTC(),
		NotAfter:              now.Add(CAValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, key, tmpl, key)
}

// Issue makes a new key and a leaf certificate for l signed by ca, valid for l's validity from
// now but not beyond the CA.
func Issue(l Leaf, ca KeyPair, now time.Time) (KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return KeyPair{}, fmt.Errorf("certificate %s: %w", l.CommonName, err)
	}
	serial, err := SerialNumber()
	if err != nil {
		return KeyPair{}, fmt.Errorf("certificate %s: %w", l.CommonName, err)
	}
	notAfter := now.Add(l.validity())
	if ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: l.CommonName, Organization: l.Organizations},
		DNSNames:              l.DNSNames,
		NotBefore:             now.Add(-Backdate).UTC(),
		NotAfter:              notAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           l.Usages,
		BasicConstraintsValid: true,
	}
	for _, ip := range l.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	return sign(tmpl, key, ca.Cert, ca.Key)
}

func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey crypto.Signer) (KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, fmt.Errorf("parse certificate %s just signed: %w", tmpl.Subject.CommonName, err)
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

// Matches reports whether cert says what l asks, is signed by ca and has more than l's
// renewal window left at now. The order of names does not matter.
func (l Leaf) Matches(cert, ca *x509.Certificate, now time.Time) bool {
	if cert.CheckSignatureFrom(ca) != nil || now.Add(l.renewBefore()).After(cert.NotAfter) {
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
	want := make([]netip.Addr, 0, len(l.IPs))
	for _, ip := range l.IPs {
		want = append(want, ip.Unmap())
	}
	return cert.Subject.CommonName == l.CommonName &&
		sameSet(cert.Subject.Organization, l.Organizations, cmp.Compare[string]) &&
		sameSet(cert.DNSNames, l.DNSNames, cmp.Compare[string]) &&
		sameSet(ips, want, netip.Addr.Compare) &&
		sameSet(cert.ExtKeyUsage, l.Usages, cmp.Compare[x509.ExtKeyUsage])
}

// sameSet reports whether a and b hold the same elements, ignoring order and repeats.
func sameSet[T any](a, b []T, compare func(T, T) int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compare)
	slices.SortFunc(b, compare)
	eq := func(x, y T) bool { return compare(x, y) == 0 }
	return slices.EqualFunc(slices.CompactFunc(a, eq), slices.CompactFunc(b, eq), eq)
}

// EncodeCert returns c as PEM "CERTIFICATE".
func EncodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// EncodeKey returns k as PEM PKCS#8 "PRIVATE KEY".
func EncodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublicKey returns k as PEM "PUBLIC KEY".
func EncodePublicKey(k crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// DecodeCert parses the first PEM block of b, which must be a "CERTIFICATE".
func DecodeCert(b []byte) (*x509.Certificate, error) {
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

// DecodeKey parses the first PEM block of b: a PKCS#8 "PRIVATE KEY", or an "EC PRIVATE KEY"
// (SEC 1) as earlier site-init runs wrote.
func DecodeKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("not PEM")
	}
	var k any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("not a PEM PRIVATE KEY but %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	return s, nil
}

// SamePublicKey reports whether key is the private half of pub.
func SamePublicKey(key crypto.Signer, pub crypto.PublicKey) bool {
	p, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && p.Equal(pub)
}
