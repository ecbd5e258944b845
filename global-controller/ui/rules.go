package ui

import (
	"context"
	"fmt"
	"slices"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// SiteRules tells which sites of a namespace the user's own rules name for get: a hint that
// spares the per-site SubjectAccessReviews of sites the user's RBAC does not mention. It never
// grants anything by itself: every site it names is still checked with a SubjectAccessReview.
type SiteRules interface {
	// GettableSites returns the site names the rules of the token's user grant get in
	// namespace, or all when a rule grants it for every site there. complete is false when the
	// API server could not list every rule (an authorizer other than RBAC): then the hint is
	// not used.
	GettableSites(ctx context.Context, token, namespace string) (names []string, all, complete bool, err error)
}

// RulesReviewer answers SiteRules with a SelfSubjectRulesReview made with the user's own
// token against the API server of config (whose credentials it does not use).
type RulesReviewer struct {
	config *rest.Config
}

// NewRulesReviewer returns a RulesReviewer for the API server config points at.
func NewRulesReviewer(config *rest.Config) *RulesReviewer {
	return &RulesReviewer{config: rest.AnonymousClientConfig(config)}
}

// GettableSites implements SiteRules.
func (r *RulesReviewer) GettableSites(ctx context.Context, token, namespace string) (names []string, all, complete bool, err error) {
	cfg := rest.CopyConfig(r.config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, false, false, fmt.Errorf("client for a rules review: %w", err)
	}
	review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authzv1.SelfSubjectRulesReview{Spec: authzv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, false, fmt.Errorf("rules review in namespace %q: %w", namespace, err)
	}
	names, all = sitesGettable(review.Status.ResourceRules)
	return names, all, !review.Status.Incomplete, nil
}

// sitesGettable reads the rules that grant get on fleet.edgefleet.io sites: the names they
// are limited to, or all when one is not limited.
func sitesGettable(rules []authzv1.ResourceRule) (names []string, all bool) {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if !has(r.APIGroups, fleetv1.GroupVersion.Group) || !has(r.Resources, "sites") || !has(r.Verbs, "get") {
			continue
		}
		if len(r.ResourceNames) == 0 {
			return nil, true
		}
		names = append(names, r.ResourceNames...)
	}
	return names, false
}
