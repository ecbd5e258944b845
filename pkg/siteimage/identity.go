package siteimage

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Identity is what a site's bootstrap machine needs to enroll: the global controller's URL, the
// CA certificate(s) to trust for it (PEM), the Site it enrolls as ("namespace/name": the enroll
// request names it) and a single-use enrollment token.
type Identity struct {
	URL   string
	CA    []byte
	Site  string
	Token string
}

// Validate says what is wrong with id, if anything: the URL must be https with a host, the CA
// one or more PEM certificates, the token non-empty without whitespace, and the whole small
// enough for the identity area.
func (id Identity) Validate() error {
	u, err := url.Parse(id.URL)
	switch {
	case id.URL == "":
		return errors.New("the global controller's URL is empty")
	case err != nil:
		return fmt.Errorf("the global controller's URL %q: %w", id.URL, err)
	case u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("the global controller's URL %q must be https://HOST[:PORT]: the machine enrolls over TLS only", id.URL)
	case strings.ContainsAny(id.URL, "\r\n"):
		return fmt.Errorf("the global controller's URL %q contains a line break", id.URL)
	}
	if err := checkCA(id.CA); err != nil {
		return err
	}
	if err := checkSite(id.Site); err != nil {
		return err
	}
	switch {
	case id.Token == "":
		return errors.New("the enrollment token is empty")
	case strings.ContainsAny(id.Token, " \t\r\n"):
		return errors.New("the enrollment token contains whitespace: give the token alone")
	}
	if n := len(id.payload()); n > MaxPayload {
		return fmt.Errorf("the identity is %d bytes, more than the %d bytes of the image's identity area: pin one CA certificate, not a bundle", n, MaxPayload)
	}
	return nil
}

// checkSite checks that site is "namespace/name", as Kubernetes names a namespace (a DNS-1123
// label) and a Site (a DNS-1123 subdomain).
func checkSite(site string) error {
	ns, name, ok := strings.Cut(site, "/")
	if !ok {
		return fmt.Errorf("the site %q must be namespace/name", site)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("the site %q: its namespace %q: %s", site, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("the site %q: its name %q: %s", site, name, strings.Join(errs, "; "))
	}
	return nil
}

// checkCA checks that ca is one or more PEM certificates and nothing else.
func checkCA(ca []byte) error {
	rest := bytes.TrimSpace(ca)
	if len(rest) == 0 {
		return errors.New("the CA to pin is empty: give the global controller's CA certificate in PEM")
	}
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return errors.New("the CA to pin is not PEM: give the global controller's CA certificate in PEM")
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("the CA to pin holds a PEM block of type %q: give certificates only, never a key", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("the CA to pin is not a certificate: %w", err)
		}
		rest = bytes.TrimSpace(rest)
	}
	return nil
}

// payload is id in the area's v1 payload format.
func (id Identity) payload() []byte {
	ca := bytes.TrimSpace(id.CA)
	b := make([]byte, 0, len(id.URL)+len(id.Site)+len(id.Token)+len(ca)+4)
	b = append(b, id.URL...)
	b = append(b, '\n')
	b = append(b, id.Site...)
	b = append(b, '\n')
	b = append(b, id.Token...)
	b = append(b, '\n')
	b = append(b, ca...)
	return append(b, '\n')
}

// parsePayload is the inverse of payload.
func parsePayload(p []byte) (Identity, error) {
	parts := bytes.SplitN(p, []byte("\n"), 4)
	if len(parts) != 4 {
		return Identity{}, errors.New("identity payload has fewer than four parts (URL, site, token, CA)")
	}
	return Identity{URL: string(parts[0]), Site: string(parts[1]), Token: string(parts[2]), CA: parts[3]}, nil
}
