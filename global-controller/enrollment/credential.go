package enrollment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Question is one access question asked on the site through the offered credential, and the
// answer a least-privilege credential gives.
type Question struct {
	Access authzv1.ResourceAttributes
	// Allowed is the answer wanted: true for what the global controller needs
	// (deploy/rbac/site), false for what an admin could do and it must not.
	Allowed bool
}

// Questions are what an enrollment asks of the offered credential: it must be able to do what
// deploy/rbac/site grants, and nothing an admin (or a reader of the site's other Secrets)
// could.
func Questions() []Question {
	ns := sitev1.InfoNamespace
	return []Question{
		{Access: authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns, Name: sitev1.InfoConfigMapName}, Allowed: true},
		{Access: authzv1.ResourceAttributes{Verb: "create", Group: sitev1.GroupVersion.Group, Resource: "applicationclusters", Namespace: ns}, Allowed: true},
		{Access: authzv1.ResourceAttributes{Verb: "create", Group: sitev1.GroupVersion.Group, Resource: "artifactsets", Namespace: ns}, Allowed: true},
		{Access: authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: sitev1.HostsNamespace}, Allowed: true},
		{Access: authzv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, Allowed: false},
		{Access: authzv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, Allowed: false},
		{Access: authzv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: ns}, Allowed: false},
		{Access: authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, Allowed: false},
		{Access: authzv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, Allowed: false},
		{Access: authzv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: ns}, Allowed: false},
	}
}

// CheckCredential decides from the site's answers (answers[i] for questions[i]) whether the
// credential is least-privilege: a credential that may do too much is refused before one that
// may do too little.
func CheckCredential(questions []Question, answers []bool) *Refusal {
	var tooMuch, tooLittle []string
	for i, q := range questions {
		switch {
		case answers[i] && !q.Allowed:
			tooMuch = append(tooMuch, describe(q.Access))
		case !answers[i] && q.Allowed:
			tooLittle = append(tooLittle, describe(q.Access))
		}
	}
	if len(tooMuch) > 0 {
		return &Refusal{ReasonTooPrivileged, "the kubeconfig's credential may do more than the global controller needs (never send an admin credential): it may " +
			strings.Join(tooMuch, "; ") + "; send the credential of the identity deploy/rbac/site grants", 400}
	}
	if len(tooLittle) > 0 {
		return &Refusal{ReasonLacksAccess, "the kubeconfig's credential lacks what the global controller needs on the site (apply deploy/rbac/site): it may not " +
			strings.Join(tooLittle, "; "), 400}
	}
	return nil
}

func describe(a authzv1.ResourceAttributes) string {
	s := a.Verb + " " + a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += fmt.Sprintf(" %q", a.Name)
	}
	if a.Namespace != "" {
		return s + fmt.Sprintf(" in namespace %q", a.Namespace)
	}
	return s + " in all namespaces"
}

// Fingerprint identifies a site cluster by its CA certificate: the same on every boot of the
// same machine, another on another machine's cluster. It is not a claim of the machine: the
// credential is checked against a server that presents a certificate of this CA.
func Fingerprint(cfg *rest.Config) (string, *Refusal) {
	if len(cfg.CAData) == 0 {
		return "", &Refusal{ReasonMalformed, "the kubeconfig's cluster has no certificate-authority-data: enrollment needs the site cluster's CA", 400}
	}
	sum := sha256.Sum256(cfg.CAData)
	return hex.EncodeToString(sum[:]), nil
}

// SelfReviews asks the site, through the offered credential, each question with a
// SelfSubjectAccessReview (which every authenticated user may create).
type SelfReviews struct {
	// Timeout bounds the whole exchange.
	Timeout time.Duration
	// UserAgent is sent to the site.
	UserAgent string
}

// Ask returns the site's answers to questions, in order.
func (s SelfReviews) Ask(ctx context.Context, cfg *rest.Config, questions []Question) ([]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout, cfg.UserAgent = s.Timeout, s.UserAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of site %s: %w", cfg.Host, err)
	}
	answers := make([]bool, len(questions))
	for i, q := range questions {
		access := q.Access
		review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &access}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask site %s whether the credential may %s: %w", cfg.Host, describe(q.Access), err)
		}
		answers[i] = got.Status.Allowed && !got.Status.Denied
	}
	return answers, nil
}
