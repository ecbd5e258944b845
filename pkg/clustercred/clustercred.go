package clustercred

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names of identities inside application clusters.
const (
	// Prefix starts every user name and group of a cluster user, so that no identity of the
	// global cluster can become one of the application cluster's own (system:masters,
	// system:nodes, a ServiceAccount, kubernetes-admin).
	Prefix = "edgefleet:"
	// UsersGroup is the group every cluster user is in; the BPA binds it to the ClusterRole
	// view in every application cluster it builds.
	UsersGroup = Prefix + "cluster-users"
	// systemPrefix starts the identities Kubernetes reserves for itself.
	systemPrefix = "system:"
)

// DefaultMaxTTL is the longest a cluster user's certificate lives unless configured otherwise.
const DefaultMaxTTL = 12 * time.Hour

// maxCSR bounds a PEM certificate signing request.
const maxCSR = 16 << 10

// Identity is who a cluster user is inside an application cluster: the client certificate's
// common name and organizations.
type Identity struct {
	User   string
	Groups []string
}

// IdentityOf returns the identity inside application clusters of the global cluster's user
// name in groups: every name prefixed with Prefix, plus UsersGroup. Groups are sorted and
// deduplicated.
func IdentityOf(name string, groups []string) (Identity, error) {
	if name == "" {
		return Identity{}, errors.New("cluster user: empty user name")
	}
	id := Identity{User: Prefix + name, Groups: []string{UsersGroup}}
	for _, g := range groups {
		if g != "" {
			id.Groups = append(id.Groups, Prefix+g)
		}
	}
	slices.Sort(id.Groups)
	id.Groups = slices.Compact(id.Groups)
	return id, nil
}

// Check refuses an identity the BPA must never sign: a user or a group that is not under
// Prefix, or an empty user. The global controller only makes identities that pass; the BPA
// checks again because the request object it reads could have been written by someone else
// with access to the site.
func (id Identity) Check() error {
	if !strings.HasPrefix(id.User, Prefix) || len(id.User) == len(Prefix) {
		return fmt.Errorf("user %q: a cluster user's name must start with %q", id.User, Prefix)
	}
	for _, g := range id.Groups {
		if !strings.HasPrefix(g, Prefix) || len(g) == len(Prefix) {
			return fmt.Errorf("group %q: a cluster user's groups must start with %q", g, Prefix)
		}
	}
	if strings.HasPrefix(id.User, systemPrefix) || slices.ContainsFunc(id.Groups, func(g string) bool { return strings.HasPrefix(g, systemPrefix) }) {
		return fmt.Errorf("identity %q: a cluster user can never be a %s identity", id.User, systemPrefix)
	}
	return nil
}

// Lifetime is how long a certificate asked for requested lives: requested, at most max; max
// when requested is zero. A negative requested, or a max that is not positive, is an error.
func Lifetime(requested, max time.Duration) (time.Duration, error) {
	switch {
	case max <= 0:
		return 0, fmt.Errorf("maximum lifetime %s: must be positive", max)
	case requested < 0:
		return 0, fmt.Errorf("ttl %s: must not be negative", requested)
	case requested == 0 || requested > max:
		return max, nil
	}
	return requested, nil
}

// NewCSR returns a PEM certificate signing request for key with an empty subject: the identity
// is the global controller's to set, the request only proves that its maker holds key.
func NewCSR(key crypto.Signer) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate signing request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// PublicKey returns the public key of a PEM certificate signing request after checking it may
// be signed for id: one PEM block of type CERTIFICATE REQUEST, a valid self-signature, an
// ECDSA (P-256 or stronger), Ed25519 or RSA (≥ 2048 bits) key, a subject that is empty or
// exactly id's, and no subject alternative names. Errors name what is wrong.
func PublicKey(csrPEM []byte, id Identity) (crypto.PublicKey, error) {
	if len(csrPEM) > maxCSR {
		return nil, fmt.Errorf("csr: %d bytes, more than %d", len(csrPEM), maxCSR)
	}
	block, rest := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("csr: not a PEM CERTIFICATE REQUEST")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, errors.New("csr: more than one PEM block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr: signature: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 256 {
			return nil, fmt.Errorf("csr: ECDSA key on %s: at least P-256 is required", k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("csr: RSA key of %d bits: at least 2048 are required", k.N.BitLen())
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("csr: key of type %T: use ECDSA, Ed25519 or RSA", csr.PublicKey)
	}
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses)+len(csr.URIs) > 0 {
		return nil, errors.New("csr: subject alternative names are not allowed in a client certificate request")
	}
	sub := csr.Subject
	empty := sub.CommonName == "" && len(sub.Organization) == 0 && len(sub.Names) == 0
	if !empty {
		orgs := slices.Sorted(slices.Values(sub.Organization))
		want := slices.Sorted(slices.Values(id.Groups))
		if sub.CommonName != id.User || !slices.Equal(slices.Compact(orgs), slices.Compact(want)) || len(sub.Names) != 1+len(sub.Organization) {
			return nil, fmt.Errorf("csr: subject %q is neither empty nor the identity to sign (user %q, groups %q)", sub.String(), id.User, id.Groups)
		}
	}
	return csr.PublicKey, nil
}

// UsersBindingName names the ClusterRoleBinding of UsersGroup in every application cluster.
const UsersBindingName = "edgefleet-cluster-users"

// UsersBinding is the ClusterRoleBinding the BPA keeps in every application cluster it builds:
// every cluster user may read what the ClusterRole view allows (not Secrets). Admins bind more
// to edgefleet:<user> or edgefleet:<group> themselves.
func UsersBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: UsersBindingName, Labels: map[string]string{"app.kubernetes.io/managed-by": "edgefleet-bpa"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: UsersGroup}},
	}
}

// Kubeconfig returns a kubeconfig for cluster at server (trusting the PEM ca) whose user
// authenticates with the PEM client certificate cert and the PEM private key key; its only
// context, named user@cluster, is current.
func Kubeconfig(cluster, server, user string, ca, cert, key []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	context := user + "@" + cluster
	cfg.Contexts[context] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = context
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s for cluster %s: %w", user, cluster, err)
	}
	return out, nil
}
