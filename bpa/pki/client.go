package pki

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"time"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// ErrNoPKI is wrapped by SignClient's error when the secret store holds no PKI of that name:
// the cluster was never brought up.
var ErrNoPKI = errors.New("no PKI in the secret store")

// ClientRequest is a client certificate to sign with a cluster's CA, for a key made elsewhere.
type ClientRequest struct {
	// PublicKey is the certificate's key; its private half never reaches the BPA.
	PublicKey crypto.PublicKey
	// User and Groups are the certificate's common name and organizations: the identity the
	// cluster's API server sees.
	User   string
	Groups []string
	// NotAfter is when the certificate expires; never beyond the CA.
	NotAfter time.Time
	// Now is when it is signed; the certificate is valid from a few minutes before.
	Now time.Time
}

// SignClient signs a client certificate with the cluster CA of the PKI kept in store under
// name, the CA every kube-apiserver of the cluster trusts for client certificates (during a CA
// roll-over, the one that signs in its phase). It returns the certificate and the CA
// certificates to trust for the API server, both PEM. It never creates a PKI: with none stored the
// error wraps ErrNoPKI.
func SignClient(ctx context.Context, store Store, name string, req ClientRequest) (cert, ca []byte, err error) {
	if req.User == "" {
		return nil, nil, fmt.Errorf("pki %s: client certificate without a user", name)
	}
	if !req.NotAfter.After(req.Now) {
		return nil, nil, fmt.Errorf("pki %s: client certificate of %s: expiry %s is not after %s", name, req.User, req.NotAfter.UTC().Format(time.RFC3339), req.Now.UTC().Format(time.RFC3339))
	}
	stored, err := store.Get(ctx, name)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, nil, fmt.Errorf("pki %s: %w", name, ErrNoPKI)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: load from the secret store: %w", name, err)
	}
	st, err := caRotationOf(stored)
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: %w", name, err)
	}
	signer := clusterCA
	if st.Phase.usesNew() {
		signer += nextCASuffix
	}
	kp, err := loadCA(stored, signer, req.Now)
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: cluster CA: %w", name, err)
	}
	caCert, caKey := kp.Cert, kp.Key
	serial, err := certs.SerialNumber()
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: %w", name, err)
	}
	notAfter := req.NotAfter
	if caCert.NotAfter.Before(notAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.User, Organization: req.Groups},
		NotBefore:             req.Now.Add(-certs.Backdate).UTC(),
		NotAfter:              notAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, req.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: sign client certificate of %s: %w", name, req.User, err)
	}
	return certs.EncodeCert(&x509.Certificate{Raw: der}), trustBundle(stored, clusterCA), nil
}
