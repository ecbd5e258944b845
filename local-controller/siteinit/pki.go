package siteinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"

	"github.com/edgefleet/edgefleet/pkg/certs"
)

// leaf is one of the site's leaf certificates: stored as pki/<name>.{crt,key}.
type leaf struct {
	name string
	certs.Leaf
}

// loadPair reads pki/<name>.crt and .key; ok is false when either is missing or unreadable
// as a certificate and its key (then it is made again rather than stopping the machine's boot:
// a hand edit, a disk error).
func loadPair(dir, name string) (certs.KeyPair, bool, error) {
	crtPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if errors.Is(err, fs.ErrNotExist) {
		return certs.KeyPair{}, false, nil
	} else if err != nil {
		return certs.KeyPair{}, false, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if errors.Is(err, fs.ErrNotExist) {
		return certs.KeyPair{}, false, nil
	} else if err != nil {
		return certs.KeyPair{}, false, err
	}
	p, ok := parsePair(crtPEM, keyPEM)
	return p, ok, nil
}

// parsePair parses a certificate and its key; ok is false when they do not parse or do not
// belong together.
func parsePair(crtPEM, keyPEM []byte) (certs.KeyPair, bool) {
	c, certErr := certs.DecodeCert(crtPEM)
	key, keyErr := certs.DecodeKey(keyPEM)
	if certErr != nil || keyErr != nil || !certs.SamePublicKey(key, c.PublicKey) {
		return certs.KeyPair{}, false
	}
	return certs.KeyPair{Cert: c, Key: key}, true
}

// writePair writes pki/<name>.key and .crt, 0600 each.
func writePair(dir, name string, p certs.KeyPair) error {
	keyPEM, err := certs.EncodeKey(p.Key)
	if err != nil {
		return fmt.Errorf("%s.key: %w", name, err)
	}
	if err := writeFile(filepath.Join(dir, name+".key"), keyPEM); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, name+".crt"), certs.EncodeCert(p.Cert))
}

// ensureCA returns the site CA, made when missing; made reports that it is new (every leaf
// must then be issued again).
func ensureCA(dir string, now time.Time) (ca certs.KeyPair, made bool, err error) {
	ca, ok, err := loadPair(dir, "ca")
	if err != nil || (ok && ca.Cert.IsCA) {
		return ca, false, err
	}
	if ca, err = certs.NewCA("edgefleet-site-ca", now); err != nil {
		return certs.KeyPair{}, false, fmt.Errorf("site CA: %w", err)
	}
	return ca, true, writePair(dir, "ca", ca)
}

// ensureLeaf keeps pki/<l.name>.{crt,key} a certificate saying what l asks, signed by ca and
// not about to expire; it issues a new one otherwise. changed reports a new one.
func ensureLeaf(dir string, l leaf, ca certs.KeyPair, now time.Time) (changed bool, err error) {
	p, ok, err := loadPair(dir, l.name)
	if err != nil {
		return false, err
	}
	if ok && l.Matches(p.Cert, ca.Cert, now) {
		return false, nil
	}
	p, err = certs.Issue(l.Leaf, ca, now)
	if err != nil {
		return false, fmt.Errorf("%s: %w", l.name, err)
	}
	return true, writePair(dir, l.name, p)
}

// ensureServiceAccountKey makes pki/sa.key (the API server signs ServiceAccount tokens with it)
// and pki/sa.pub once.
func ensureServiceAccountKey(dir string) (changed bool, err error) {
	if _, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "sa.key")); err == nil {
		if _, err := keyutil.PublicKeysFromFile(filepath.Join(dir, "sa.pub")); err == nil {
			return false, nil
		}
	}
	key, err := certs.NewKey()
	if err != nil {
		return false, err
	}
	keyPEM, err := certs.EncodeKey(key)
	if err != nil {
		return false, err
	}
	pubPEM, err := certs.EncodePublicKey(key.Public())
	if err != nil {
		return false, err
	}
	if err := writeFile(filepath.Join(dir, "sa.key"), keyPEM); err != nil {
		return false, err
	}
	return true, writeFile(filepath.Join(dir, "sa.pub"), pubPEM)
}
