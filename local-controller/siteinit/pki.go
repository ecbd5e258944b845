package siteinit

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Validity of the site's leaf certificates and when they are renewed; the CA is
// client-go's (ten years).
const (
	leafValidity = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
	backdate     = 5 * time.Minute
)

// keyPair is a certificate and its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// leaf is what a leaf certificate must say.
type leaf struct {
	name   string // file name under pki/
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	usages []x509.ExtKeyUsage
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	return k, nil
}

// loadPair reads pki/<name>.crt and .key; ok is false when either is missing or unreadable
// as a certificate and key (then it is made again).
func loadPair(dir, name string) (keyPair, bool, error) {
	crtPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if errors.Is(err, fs.ErrNotExist) {
		return keyPair{}, false, nil
	} else if err != nil {
		return keyPair{}, false, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if errors.Is(err, fs.ErrNotExist) {
		return keyPair{}, false, nil
	} else if err != nil {
		return keyPair{}, false, err
	}
	p, ok := parsePair(crtPEM, keyPEM)
	return p, ok, nil
}

// parsePair parses a certificate and its key; files that do not parse (a hand edit, a disk
// error) are made again rather than stopping the machine's boot.
func parsePair(crtPEM, keyPEM []byte) (keyPair, bool) {
	certs, err := cert.ParseCertsPEM(crtPEM)
	if err != nil || len(certs) == 0 {
		return keyPair{}, false
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return keyPair{}, false
	}
	signer, ok := key.(crypto.Signer)
	return keyPair{cert: certs[0], key: signer}, ok
}

// writePair writes pki/<name>.key and .crt, 0600 each.
func writePair(dir, name string, p keyPair) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(p.key)
	if err != nil {
		return fmt.Errorf("%s.key: %w", name, err)
	}
	crtPEM, err := cert.EncodeCertificates(p.cert)
	if err != nil {
		return fmt.Errorf("%s.crt: %w", name, err)
	}
	if err := writeFile(filepath.Join(dir, name+".key"), keyPEM); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, name+".crt"), crtPEM)
}

// ensureCA returns the site CA, made when missing; made reports that it is new (every leaf
// must then be issued again).
func ensureCA(dir string) (ca keyPair, made bool, err error) {
	ca, ok, err := loadPair(dir, "ca")
	if err != nil || (ok && ca.cert.IsCA) {
		return ca, false, err
	}
	key, err := newKey()
	if err != nil {
		return keyPair{}, false, err
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "edgefleet-site-ca"}, key)
	if err != nil {
		return keyPair{}, false, fmt.Errorf("site CA: %w", err)
	}
	ca = keyPair{cert: c, key: key}
	return ca, true, writePair(dir, "ca", ca)
}

// ensureLeaf keeps pki/<l.name>.{crt,key} a certificate saying what l asks, signed by ca and
// not about to expire; it issues a new one otherwise. changed reports a new one.
func ensureLeaf(dir string, l leaf, ca keyPair, now time.Time) (changed bool, err error) {
	p, ok, err := loadPair(dir, l.name)
	if err != nil {
		return false, err
	}
	if ok && l.matches(p.cert, ca.cert, now) {
		return false, nil
	}
	key, err := newKey()
	if err != nil {
		return false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return false, fmt.Errorf("serial number: %w", err)
	}
	notAfter := min(now.Add(leafValidity).Unix(), ca.cert.NotAfter.Unix())
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: l.cn, Organization: l.orgs},
		DNSNames:              l.dns,
		IPAddresses:           l.ips,
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              time.Unix(notAfter, 0).UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           l.usages,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return false, fmt.Errorf("sign %s: %w", l.name, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return false, fmt.Errorf("parse %s: %w", l.name, err)
	}
	return true, writePair(dir, l.name, keyPair{cert: c, key: key})
}

// matches reports whether c says what l asks (in any order), is signed by ca and has more than
// renewBefore left.
func (l leaf) matches(c, ca *x509.Certificate, now time.Time) bool {
	if c.CheckSignatureFrom(ca) != nil || now.Add(renewBefore).After(c.NotAfter) {
		return false
	}
	if c.Subject.CommonName != l.cn || !sameStrings(c.Subject.Organization, l.orgs) || !sameStrings(c.DNSNames, l.dns) {
		return false
	}
	var got, want []string
	for _, ip := range c.IPAddresses {
		got = append(got, ip.String())
	}
	for _, ip := range l.ips {
		want = append(want, ip.String())
	}
	return sameStrings(got, want) && slices.Equal(c.ExtKeyUsage, l.usages)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// ensureServiceAccountKey makes pki/sa.key (the API server signs ServiceAccount tokens with it)
// and pki/sa.pub once.
func ensureServiceAccountKey(dir string) (changed bool, err error) {
	if _, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "sa.key")); err == nil {
		if _, err := keyutil.PublicKeysFromFile(filepath.Join(dir, "sa.pub")); err == nil {
			return false, nil
		}
	}
	key, err := newKey()
	if err != nil {
		return false, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return false, err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return false, err
	}
	pubPEM := pemBlock("PUBLIC KEY", der)
	if err := writeFile(filepath.Join(dir, "sa.key"), keyPEM); err != nil {
		return false, err
	}
	return true, writeFile(filepath.Join(dir, "sa.pub"), pubPEM)
}
