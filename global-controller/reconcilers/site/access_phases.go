package site

import (
	"bytes"
	"context"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Artifact API access: each site reads the artifact store with a token of its own. The global
// controller gives every Site a ServiceAccount on the global cluster (in
// ArtifactAccess.Namespace, named siteIdentity), binds it to the ClusterRole that may only read
// artifacts, requests a short-lived token for it and pushes URL, token and CA to the site as the
// Secret the local controller reads (sitev1.GlobalAPISecretName). The token is renewed when half
// its life is gone; deleting the Site deletes the ServiceAccount, which revokes every token
// issued to it.

// ArtifactAccess configures how sites reach the artifact API; a zero URL turns it off.
type ArtifactAccess struct {
	// URL at which sites reach the artifact API, unless a Site sets spec.artifactAPIURL.
	URL string
	// CA is the PEM bundle sites verify the API's certificate with; empty for plain HTTP or a
	// publicly trusted certificate.
	CA []byte
	// Namespace holds the sites' ServiceAccounts on the global cluster.
	Namespace string
	// TokenTTL is the lifetime of each token (the API server allows 10 minutes or more).
	TokenTTL time.Duration
}

// SiteClusterRole is bound to every site's ServiceAccount: it may only read artifacts
// (deploy/rbac/global-controller/roles.yaml).
const SiteClusterRole = "edgefleet-site"

// TokenExpiresAnnotation on the site's API Secret says when its token expires (RFC 3339).
const TokenExpiresAnnotation = "site.edgefleet.io/token-expires"

// siteIdentity names the ServiceAccount (and the ClusterRoleBinding) of a site: dots cannot
// appear in Kubernetes namespace or object names of Sites, so the name is unambiguous.
func siteIdentity(site *fleetv1.Site) string { return "site." + site.Namespace + "." + site.Name }

// siteLabels mark a site's ServiceAccount and ClusterRoleBinding.
func siteLabels(site *fleetv1.Site) map[string]string {
	return map[string]string{
		sitev1.ManagedByLabel:               sitev1.ManagedByGlobal,
		"fleet.edgefleet.io/site":           site.Name,
		"fleet.edgefleet.io/site-namespace": site.Namespace,
	}
}

// reconcileArtifactAccess keeps the site's artifact API Secret current.
func (r *Reconciler) reconcileArtifactAccess(ctx context.Context, s *scope) error {
	if r.ArtifactAccess.URL == "" && s.site.Spec.ArtifactAPIURL == "" || r.ArtifactAccess.Namespace == "" {
		meta.RemoveStatusCondition(&s.site.Status.Conditions, fleetv1.SiteArtifactAccessCondition)
		return nil
	}
	if !s.siteAnswers() {
		return nil
	}
	siteClient, err := r.Sites.Client(s.key)
	if err != nil {
		return fmt.Errorf("artifact access of site %s: %w", s.key, err)
	}
	url := s.site.Spec.ArtifactAPIURL
	if url == "" {
		url = r.ArtifactAccess.URL
	}
	key := client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: sitev1.GlobalAPISecretName}
	current := &corev1.Secret{}
	switch err := siteClient.Get(ctx, key, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		s.accessFailed(fmt.Errorf("read Secret %s on the site: %w", key, err))
		return nil
	case !managed(current):
		s.accessFailed(fmt.Errorf("the site's Secret %s was not created by the global controller: delete it to let the global controller manage the site's access", key))
		return nil
	}
	if expires, ok := r.tokenCurrent(current, url, s.now); ok {
		r.accessGranted(s, url, expires)
		return nil
	}
	token, expires, err := r.issueToken(ctx, s.site)
	if err != nil {
		return err
	}
	secret := current
	if secret == nil {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	markPushed(secret, map[string]string{}, "Site "+s.key.String())
	secret.Annotations[TokenExpiresAnnotation] = expires.UTC().Format(time.RFC3339)
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = map[string][]byte{sitev1.GlobalAPIURLKey: []byte(url), sitev1.GlobalAPITokenKey: []byte(token)}
	if len(r.ArtifactAccess.CA) > 0 {
		secret.Data[sitev1.GlobalAPICAKey] = r.ArtifactAccess.CA
	}
	if current == nil {
		err = siteClient.Create(ctx, secret)
	} else {
		err = siteClient.Update(ctx, secret)
	}
	if err != nil {
		s.accessFailed(fmt.Errorf("write Secret %s on the site: %w", key, err))
		return nil
	}
	r.accessGranted(s, url, expires)
	return nil
}

// accessGranted reports the site's access, and has the site reconciled again when its token
// is due for renewal.
func (r *Reconciler) accessGranted(s *scope, url string, expires time.Time) {
	s.requeueBy(expires.Sub(s.now) - r.ArtifactAccess.TokenTTL/2)
	setCondition(s.site, fleetv1.SiteArtifactAccessCondition, metav1.ConditionTrue, fleetv1.ReasonTokenIssued,
		fmt.Sprintf("the site reads the artifact API at %s as ServiceAccount %s/%s; its token expires at %s", url,
			r.ArtifactAccess.Namespace, siteIdentity(s.site), expires.UTC().Format(time.RFC3339)))
}

func (s *scope) accessFailed(err error) {
	s.dirty = true
	setCondition(s.site, fleetv1.SiteArtifactAccessCondition, metav1.ConditionFalse, fleetv1.ReasonPushFailed, err.Error())
}

// tokenCurrent reports whether the site's Secret points at url with the configured CA and a
// token that has more than half its life left, and when that token expires.
func (r *Reconciler) tokenCurrent(s *corev1.Secret, url string, now time.Time) (time.Time, bool) {
	if s == nil || string(s.Data[sitev1.GlobalAPIURLKey]) != url || len(s.Data[sitev1.GlobalAPITokenKey]) == 0 ||
		!bytes.Equal(s.Data[sitev1.GlobalAPICAKey], r.ArtifactAccess.CA) {
		return time.Time{}, false
	}
	expires, err := time.Parse(time.RFC3339, s.Annotations[TokenExpiresAnnotation])
	if err != nil || expires.Sub(now) <= r.ArtifactAccess.TokenTTL/2 {
		return time.Time{}, false
	}
	return expires, true
}

// issueToken makes sure the site's ServiceAccount exists and is bound, and requests a token.
func (r *Reconciler) issueToken(ctx context.Context, site *fleetv1.Site) (string, time.Time, error) {
	name, ns := siteIdentity(site), r.ArtifactAccess.Namespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: siteLabels(site)}}
	if err := r.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", time.Time{}, fmt.Errorf("create ServiceAccount %s/%s of site %s/%s: %w", ns, name, site.Namespace, site.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-" + name, Labels: siteLabels(site)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SiteClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if err := r.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", time.Time{}, fmt.Errorf("bind ServiceAccount %s/%s of site %s/%s to ClusterRole %s: %w", ns, name, site.Namespace, site.Name, SiteClusterRole, err)
	}
	seconds := int64(r.ArtifactAccess.TokenTTL / time.Second)
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for ServiceAccount %s/%s of site %s/%s: %w", ns, name, site.Namespace, site.Name, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// removeArtifactAccess deletes a deleted site's ServiceAccount (revoking its tokens) and binding.
func (r *Reconciler) removeArtifactAccess(ctx context.Context, site *fleetv1.Site) error {
	if r.ArtifactAccess.Namespace == "" {
		return nil
	}
	name := siteIdentity(site)
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edgefleet-" + name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ArtifactAccess.Namespace, Name: name}},
	} {
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s of site %s/%s: %w", o, name, site.Namespace, site.Name, err)
		}
	}
	return nil
}
