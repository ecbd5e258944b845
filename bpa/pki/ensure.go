package pki

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// Store is the part of secrets.Store that Ensure uses; every secrets.Store is one.
type Store interface {
	Get(ctx context.Context, name string) (map[string][]byte, error)
	Put(ctx context.Context, name string, data map[string][]byte) error
}

// Option configures Ensure.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes Ensure read the time from now instead of time.Now: certificates are valid
// from it and leaves are renewed relative to it.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Bundle is a cluster's PKI as kept in the secret store, with the Spec it was ensured for.
// It is read-only; its methods return copies.
type Bundle struct {
	spec Spec
	data map[string][]byte
}

// Names of the stored CAs (the base of their ".crt"/".key" keys) and their common names.
const (
	clusterCA    = "ca"
	etcdCA       = "etcd-ca"
	frontProxyCA = "front-proxy-ca"
)

// Keys of the service-account signing key pair.
const (
	saKey = "sa.key"
	saPub = "sa.pub"
)

// Names of the cluster-wide client certificates of Kubernetes' components.
const (
	controllerManager = "controller-manager"
	scheduler         = "scheduler"
	kubeProxy         = "kube-proxy"
)

// Prefixes of the per-host leaves' stored keys: <prefix><host name>.crt and .key.
const (
	etcdServerPrefix = "etcd-server."
	etcdPeerPrefix   = "etcd-peer."
	nodePrefix       = "node."
)

// Ensure returns the PKI of spec kept in store under name, creating or completing it: CAs and the
// service-account key pair are created only when the secret has none, and never replaced; leaf
// certificates are issued when missing, when they no longer match spec (a control-plane member
// or the endpoint changed), when they are not signed by the stored CA, or when less than 30 days
// of validity remain. Leaves of hosts no longer in spec are dropped. The secret is written only
// when its content changes, and before Ensure returns, so that nothing it returns can be lost by
// a crash: callers distribute to hosts only what Ensure returned.
//
// A secret holding half a CA (certificate without key or the reverse), an expired CA or
// unreadable CA material is an error: Ensure never replaces a CA that hosts may trust. A CA
// roll-over (Spec.CARotations, AdvanceCARotation) adds a successor beside each CA.
func Ensure(ctx context.Context, store Store, name string, spec Spec, opts ...Option) (*Bundle, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if err := secrets.ValidateName(name); err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	stored, err := store.Get(ctx, name)
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return nil, fmt.Errorf("pki %s: load from the secret store: %w", name, err)
	}
	e := &ensurer{old: stored, data: map[string][]byte{}, cas: map[string]certs.KeyPair{}, signers: map[string]certs.KeyPair{}, now: o.now()}
	for _, ca := range clusterCAs {
		if err := e.keepCA(ca.base, ca.cn, true, "hosts may trust it"); err != nil {
			return nil, fmt.Errorf("pki %s: %w", name, err)
		}
	}
	if err := e.caRotation(spec.CARotations); err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	if err := e.serviceAccount(); err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	if err := e.secretEncryption(spec.SecretEncryptionKeyRotations, spec.SecretEncryptionKMS); err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	leaves, err := leavesOf(spec)
	if err != nil {
		return nil, fmt.Errorf("pki %s: %w", name, err)
	}
	for _, l := range leaves {
		l.spec.Lifetime = spec.Lifetime
		if err := e.leaf(l.base, l.ca, l.spec); err != nil {
			return nil, fmt.Errorf("pki %s: %w", name, err)
		}
	}
	if !maps.EqualFunc(stored, e.data, bytes.Equal) {
		if err := store.Put(ctx, name, maps.Clone(e.data)); err != nil {
			return nil, fmt.Errorf("pki %s: save to the secret store: %w", name, err)
		}
	}
	return &Bundle{spec: spec, data: e.data}, nil
}

// leaf is one leaf certificate of a spec: stored under base, signed by the CA named ca.
type leaf struct {
	base string
	ca   string
	spec certs.Leaf
}

// leavesOf lists every leaf certificate spec needs.
func leavesOf(spec Spec) ([]leaf, error) {
	serviceIP, err := spec.kubernetesServiceIP()
	if err != nil {
		return nil, err
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	const masters = "system:masters"

	apiserver := certs.Leaf{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		IPs:        []netip.Addr{serviceIP, loopback},
		Usages:     server,
	}
	if ip, err := netip.ParseAddr(spec.APIEndpoint); err == nil {
		apiserver.IPs = append(apiserver.IPs, ip)
	} else {
		apiserver.DNSNames = append(apiserver.DNSNames, spec.APIEndpoint)
	}
	for _, m := range spec.ControlPlane {
		apiserver.IPs = append(apiserver.IPs, m.IP)
	}
	out := []leaf{
		{"apiserver", clusterCA, apiserver.Normalized()},
		{"apiserver-etcd-client", etcdCA, certs.Leaf{CommonName: "kube-apiserver-etcd-client", Usages: client}},
		{"apiserver-kubelet-client", clusterCA, certs.Leaf{CommonName: "kube-apiserver-kubelet-client", Organizations: []string{masters}, Usages: client}},
		{"front-proxy-client", frontProxyCA, certs.Leaf{CommonName: "front-proxy-client", Usages: client}},
		{"admin", clusterCA, certs.Leaf{CommonName: "kubernetes-admin", Organizations: []string{masters}, Usages: client}},
		// The users Kubernetes' default RBAC policy binds for its own components.
		{controllerManager, clusterCA, certs.Leaf{CommonName: "system:kube-controller-manager", Usages: client}},
		{scheduler, clusterCA, certs.Leaf{CommonName: "system:kube-scheduler", Usages: client}},
		{kubeProxy, clusterCA, certs.Leaf{CommonName: "system:kube-proxy", Usages: client}},
	}
	for _, m := range spec.ControlPlane {
		out = append(out,
			leaf{etcdServerPrefix + m.Name, etcdCA, certs.Leaf{CommonName: m.Name, DNSNames: []string{m.Name, "localhost"}, IPs: []netip.Addr{m.IP, loopback}, Usages: both}.Normalized()},
			leaf{etcdPeerPrefix + m.Name, etcdCA, certs.Leaf{CommonName: m.Name, DNSNames: []string{m.Name}, IPs: []netip.Addr{m.IP}, Usages: both}},
		)
	}
	for _, m := range slices.Concat(spec.ControlPlane, spec.Nodes) {
		out = append(out, leaf{nodePrefix + m.Name, clusterCA, certs.Leaf{CommonName: "system:node:" + m.Name, Organizations: []string{"system:nodes"}, Usages: client}})
	}
	return out, nil
}

// ensurer builds a bundle's new content (data) from its stored content (old).
type ensurer struct {
	old  map[string][]byte
	data map[string][]byte
	// cas are the stored CAs by base (successors under "<base>.next"), signers the CA that
	// signs the leaves of each base in the roll-over's phase.
	cas     map[string]certs.KeyPair
	signers map[string]certs.KeyPair
	now     time.Time
}

// keepCA keeps the stored CA base, or creates it with common name cn when mayMake and the store
// has neither its certificate nor its key. Anything else stored (half a CA, an unreadable or
// expired one) is an error: why says why it must not be replaced.
func (e *ensurer) keepCA(base, cn string, mayMake bool, why string) error {
	crtName, keyName := base+".crt", base+".key"
	_, haveCrt := e.old[crtName]
	_, haveKey := e.old[keyName]
	refuse := func(what string, args ...any) error {
		return fmt.Errorf("CA %s: %s: refusing to replace a CA: %s; restore %s and %s", base, fmt.Sprintf(what, args...), why, crtName, keyName)
	}
	switch {
	case !haveCrt && !haveKey && mayMake:
		ca, err := certs.NewCA(cn, e.now)
		if err != nil {
			return err
		}
		return e.put(base, ca)
	case !haveCrt && !haveKey:
		return refuse("gone from the secret store")
	case !haveCrt || !haveKey:
		return refuse("only one of %s and %s is stored", crtName, keyName)
	}
	kp, err := loadCA(e.old, base, e.now)
	if err != nil {
		return refuse("%v", err)
	}
	e.cas[base] = kp
	e.data[crtName], e.data[keyName] = e.old[crtName], e.old[keyName]
	return nil
}

// serviceAccount keeps the stored service-account signing key, or creates one when the store
// has none. Tokens signed with it stay valid only as long as it is kept, so it is never
// replaced; sa.pub is derived from it.
func (e *ensurer) serviceAccount() error {
	keyPEM, haveKey := e.old[saKey]
	if !haveKey {
		if _, havePub := e.old[saPub]; havePub {
			return fmt.Errorf("service-account key: %s is stored without %s: refusing to replace the key that signed existing tokens; restore %s", saPub, saKey, saKey)
		}
		k, err := certs.NewKey()
		if err != nil {
			return fmt.Errorf("service-account key: %w", err)
		}
		if keyPEM, err = certs.EncodeKey(k); err != nil {
			return fmt.Errorf("service-account key: %w", err)
		}
	}
	key, err := certs.DecodeKey(keyPEM)
	if err != nil {
		return fmt.Errorf("service-account key %s: %w", saKey, err)
	}
	pubPEM, err := certs.EncodePublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	e.data[saKey], e.data[saPub] = keyPEM, pubPEM
	return nil
}

// leaf keeps the stored leaf base if it still matches s and is signed by the CA that signs for
// the CA named ca, and issues a new one otherwise.
func (e *ensurer) leaf(base, ca string, s certs.Leaf) error {
	issuer := e.signers[ca]
	if cert, key, ok := e.storedLeaf(base); ok && certs.SamePublicKey(key, cert.PublicKey) && s.Matches(cert, issuer.Cert, e.now) {
		e.data[base+".crt"], e.data[base+".key"] = e.old[base+".crt"], e.old[base+".key"]
		return nil
	}
	kp, err := certs.Issue(s, issuer, e.now)
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	return e.put(base, kp)
}

// storedLeaf returns the stored leaf base when both halves are there and readable; anything
// else is reissued.
func (e *ensurer) storedLeaf(base string) (*x509.Certificate, crypto.Signer, bool) {
	cert, err := certs.DecodeCert(e.old[base+".crt"])
	if err != nil {
		return nil, nil, false
	}
	key, err := certs.DecodeKey(e.old[base+".key"])
	if err != nil {
		return nil, nil, false
	}
	return cert, key, true
}

// put encodes kp under base and remembers it when it is a CA.
func (e *ensurer) put(base string, kp certs.KeyPair) error {
	keyPEM, err := certs.EncodeKey(kp.Key)
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	if kp.Cert.IsCA {
		e.cas[base] = kp
	}
	e.data[base+".crt"], e.data[base+".key"] = certs.EncodeCert(kp.Cert), keyPEM
	return nil
}
