package site_test

import (
	"fmt"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/site"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// tokenUser asks the global API server who a token is (empty: nobody).
func tokenUser(t *testing.T, token string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(global.Config)
	review, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated {
		return ""
	}
	return review.Status.User.Username
}

// waitAPISecret waits until the site's artifact API Secret passes check, and returns it.
func waitAPISecret(t *testing.T, cp *controlplane.ControlPlane, check func(*corev1.Secret) error) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	testutil.Eventually(t, wait, func() error {
		if err := cp.Client.Get(t.Context(), types.NamespacedName{Namespace: sitev1.HostsNamespace, Name: sitev1.GlobalAPISecretName}, s); err != nil {
			return err
		}
		return check(s)
	})
	return s
}

// TestArtifactAccess checks that a site gets a token of its own for the artifact API: a
// ServiceAccount bound to the read-only ClusterRole, its token pushed with the URL; the token is
// renewed when half its life is gone and follows a URL change; deleting the Site revokes it.
func TestArtifactAccess(t *testing.T) {
	t.Parallel()
	siteCP, kc := startClusterSite(t)
	ns := global.Namespace(t)
	reg, _ := register(t, ns, "depot-3", kc, func(s *fleetv1.Site) { s.Spec.ArtifactAPIURL = "https://artifacts.example:8443" })
	key := client.ObjectKeyFromObject(reg)
	identity := "site." + ns + ".depot-3"
	user := "system:serviceaccount:" + identityNamespace + ":" + identity

	waitSite(t, key, conditionIs(fleetv1.SiteArtifactAccessCondition, metav1.ConditionTrue, fleetv1.ReasonTokenIssued, identity))
	secret := waitAPISecret(t, siteCP, func(*corev1.Secret) error { return nil })
	if got := string(secret.Data[sitev1.GlobalAPIURLKey]); got != "https://artifacts.example:8443" {
		t.Errorf("url = %q", got)
	}
	if secret.Labels[sitev1.ManagedByLabel] != sitev1.ManagedByGlobal {
		t.Errorf("Secret not marked as pushed: %v", secret.Labels)
	}
	first := string(secret.Data[sitev1.GlobalAPITokenKey])
	if got := tokenUser(t, first); got != user {
		t.Fatalf("the pushed token authenticates as %q, want %q", got, user)
	}
	expires, err := time.Parse(time.RFC3339, secret.Annotations[site.TokenExpiresAnnotation])
	if err != nil {
		t.Fatalf("expiry annotation: %v", err)
	}
	if left := time.Until(expires); left < 50*time.Minute || left > 61*time.Minute {
		t.Errorf("token expires in %s, want the configured hour", left)
	}
	binding := &rbacv1.ClusterRoleBinding{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Name: "edgefleet-" + identity}, binding); err != nil {
		t.Fatal(err)
	}
	if binding.RoleRef.Name != site.SiteClusterRole || len(binding.Subjects) != 1 ||
		binding.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Namespace: identityNamespace, Name: identity}) {
		t.Errorf("binding = %+v %+v", binding.RoleRef, binding.Subjects)
	}

	// A steady site keeps its token.
	heartbeats(t, key, 2)
	if got := waitAPISecret(t, siteCP, func(*corev1.Secret) error { return nil }); string(got.Data[sitev1.GlobalAPITokenKey]) != first {
		t.Errorf("token replaced while more than half its life was left")
	}

	// A token with less than half its life left is renewed.
	controlplane.Update(t, siteCP.Client, secret, func(s *corev1.Secret) {
		s.Annotations[site.TokenExpiresAnnotation] = time.Now().Add(20 * time.Minute).UTC().Format(time.RFC3339)
	})
	renewed := waitAPISecret(t, siteCP, func(s *corev1.Secret) error {
		if string(s.Data[sitev1.GlobalAPITokenKey]) == first {
			return fmt.Errorf("token not renewed yet (expires %s)", s.Annotations[site.TokenExpiresAnnotation])
		}
		return nil
	})
	if got := tokenUser(t, string(renewed.Data[sitev1.GlobalAPITokenKey])); got != user {
		t.Errorf("the renewed token authenticates as %q, want %q", got, user)
	}

	// A new URL reaches the site.
	current := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	controlplane.Update(t, global.Client, current, func(s *fleetv1.Site) {
		s.Spec.ArtifactAPIURL = "https://proxy.example:9443"
	})
	waitAPISecret(t, siteCP, func(s *corev1.Secret) error {
		if got := string(s.Data[sitev1.GlobalAPIURLKey]); got != "https://proxy.example:9443" {
			return fmt.Errorf("url = %q", got)
		}
		return nil
	})

	// Deleting the Site deletes its ServiceAccount and binding: its tokens stop working.
	if err := global.Client.Delete(t.Context(), current); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: identityNamespace, Name: identity}, &corev1.ServiceAccount{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceAccount still there (err %w)", err)
		}
		return nil
	})
	if err := global.Client.Get(t.Context(), types.NamespacedName{Name: "edgefleet-" + identity}, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding still there (err %v)", err)
	}
	testutil.Eventually(t, wait, func() error {
		if got := tokenUser(t, first); got != "" {
			return fmt.Errorf("the deleted site's token still authenticates as %q", got)
		}
		return nil
	})
}
