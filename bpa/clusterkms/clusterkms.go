package clusterkms

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/vaultauth"
)

// Namespace holds the clusters' plugin ServiceAccounts and nothing else: the BPA may mint
// tokens of the ServiceAccounts there only (a Role of this namespace), so no other identity of
// the site is within its reach. The plugin's Vault role is bound to this namespace.
const Namespace = "edgefleet-kms"

// ServiceAccountPrefix starts the name of each cluster's plugin ServiceAccount
// (edgefleet-kms-<cluster>).
const ServiceAccountPrefix = "edgefleet-kms-"

// ClusterNamespaceLabel and sitev1.ClusterLabel name, on a plugin's ServiceAccount, the
// ApplicationCluster it is for.
const ClusterNamespaceLabel = "site.edgefleet.io/cluster-namespace"

// ClusterOf is the ApplicationCluster whose plugin's ServiceAccount sa is, as its labels say;
// false for another ServiceAccount.
func ClusterOf(sa metav1.Object) (types.NamespacedName, bool) {
	key := types.NamespacedName{Namespace: sa.GetLabels()[ClusterNamespaceLabel], Name: sa.GetLabels()[sitev1.ClusterLabel]}
	return key, key.Namespace != "" && key.Name != "" && sa.GetName() == ServiceAccountPrefix+key.Name
}

// Options say where the clusters' KMS plugins reach Vault.
type Options struct {
	// VaultAddr is Vault's https URL as the control-plane hosts reach it.
	VaultAddr string
	// VaultCA is the PEM bundle of the CAs of Vault's certificate.
	VaultCA []byte
	// AuthMount is the Kubernetes auth method reviewing the site cluster's tokens, Role the
	// plugin's role there.
	AuthMount, Role string
	// TransitMount is the transit engine; each cluster's key there is KeyPrefix + its name.
	TransitMount, KeyPrefix string
	// TokenTTL is how long a minted token lives (at least 10 minutes, the TokenRequest API's
	// least); a new one is minted once half of it is gone.
	TokenTTL time.Duration
}

// Validate names the first bad option.
func (o Options) Validate() error {
	if u, err := url.Parse(o.VaultAddr); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--cluster-kms-vault-addr %q: want the https URL at which the clusters' control-plane hosts reach Vault", o.VaultAddr)
	}
	for _, f := range []struct{ flag, v string }{{"--cluster-kms-auth-mount", o.AuthMount}, {"--cluster-kms-role", o.Role},
		{"--cluster-kms-transit-mount", o.TransitMount}, {"--cluster-kms-key-prefix", o.KeyPrefix}} {
		if f.v == "" {
			return fmt.Errorf("%s must not be empty", f.flag)
		}
	}
	switch {
	case len(o.VaultCA) == 0:
		return errors.New("--cluster-kms-vault-ca-file: required (the CAs of Vault's certificate, written to the control-plane hosts)")
	case o.TokenTTL < 10*time.Minute:
		return fmt.Errorf("--cluster-kms-token-ttl %s: at least 10m (the TokenRequest API's least)", o.TokenTTL)
	}
	return nil
}

// Source gives clusters their KMS. Safe for concurrent use.
type Source struct {
	opts      Options
	vault     vaultauth.Logical
	kube      kubernetes.Interface
	namespace string
	now       func() time.Time

	mu     sync.Mutex
	tokens map[types.NamespacedName]token // by ApplicationCluster
}

type token struct {
	value           []byte
	minted, expires time.Time
}

// New returns a Source making keys in vault and tokens of ServiceAccounts of namespace
// (Namespace) through kube.
func New(opts Options, vault vaultauth.Logical, kube kubernetes.Interface, namespace string, now func() time.Time) *Source {
	return &Source{opts: opts, vault: vault, kube: kube, namespace: namespace, now: now, tokens: map[types.NamespacedName]token{}}
}

// For is the KMS of the cluster of ApplicationCluster ac: its transit key made when missing,
// its plugin's ServiceAccount made when missing, and a token of it, the one
// minted before while less than half its life is gone. renew is when the next token is due:
// run the cluster again by then.
func (s *Source) For(ctx context.Context, ac *sitev1.ApplicationCluster) (kms *cluster.KMS, renew time.Time, err error) {
	key := s.opts.KeyPrefix + ac.Name
	if err := s.ensureKey(ctx, key); err != nil {
		return nil, time.Time{}, err
	}
	tok, err := s.token(ctx, ac)
	if err != nil {
		return nil, time.Time{}, err
	}
	return &cluster.KMS{
		KMSValues: packages.KMSValues{VaultAddr: s.opts.VaultAddr, AuthMount: s.opts.AuthMount, Role: s.opts.Role, TransitMount: s.opts.TransitMount, TransitKey: key},
		VaultCA:   s.opts.VaultCA,
		Token:     tok.value,
	}, tok.minted.Add(tok.expires.Sub(tok.minted) / 2), nil
}

// Forget drops what the source keeps of a cluster (its token), once the cluster is gone
// (bpa/reconcilers/kmsaccount).
func (s *Source) Forget(cluster types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, cluster)
}

// ensureKey makes the transit key unless it exists. A key is never deleted here: what it
// wrapped stays readable only as long as it exists.
func (s *Source) ensureKey(ctx context.Context, key string) error {
	path := s.opts.TransitMount + "/keys/" + key
	existing, err := s.vault.ReadWithContext(ctx, path)
	if err != nil {
		return fmt.Errorf("read Vault transit key %s: %w (the BPA's Vault policy needs read and create on %s/keys/%s*)", path, err, s.opts.TransitMount, s.opts.KeyPrefix)
	}
	if existing != nil {
		return nil
	}
	if _, err := s.vault.WriteWithContext(ctx, path, map[string]any{"type": "aes256-gcm96"}); err != nil {
		return fmt.Errorf("make Vault transit key %s: %w (the BPA's Vault policy needs read and create on %s/keys/%s*)", path, err, s.opts.TransitMount, s.opts.KeyPrefix)
	}
	return nil
}

// token is the cluster's current token, minted again once half its life is gone.
func (s *Source) token(ctx context.Context, ac *sitev1.ApplicationCluster) (token, error) {
	now := s.now()
	s.mu.Lock()
	t, ok := s.tokens[client.ObjectKeyFromObject(ac)]
	s.mu.Unlock()
	if ok && now.Before(t.minted.Add(t.expires.Sub(t.minted)/2)) {
		return t, nil
	}
	name := ServiceAccountPrefix + ac.Name
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: s.namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "edgefleet-bpa", "app.kubernetes.io/component": "kms-plugin", sitev1.ClusterLabel: ac.Name, ClusterNamespaceLabel: ac.Namespace},
	}}
	if _, err := s.kube.CoreV1().ServiceAccounts(s.namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return token{}, fmt.Errorf("ServiceAccount %s/%s of the cluster's KMS plugin: %w", s.namespace, name, err)
	}
	ttl := int64(s.opts.TokenTTL / time.Second)
	tr, err := s.kube.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		return token{}, fmt.Errorf("token of ServiceAccount %s/%s for the cluster's KMS plugin: %w", s.namespace, name, err)
	}
	t = token{value: []byte(tr.Status.Token), minted: now, expires: tr.Status.ExpirationTimestamp.Time}
	if !t.expires.After(now) {
		return token{}, fmt.Errorf("token of ServiceAccount %s/%s: it expires at %s, already past", s.namespace, name, t.expires)
	}
	s.mu.Lock()
	s.tokens[client.ObjectKeyFromObject(ac)] = t
	s.mu.Unlock()
	return t, nil
}
