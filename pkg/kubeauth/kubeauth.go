package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// defaultCacheTTL is how long answers are cached when Config.CacheTTL is zero.
const defaultCacheTTL = 10 * time.Second

// maxCacheEntries bounds each of the Reviewer's two caches.
const maxCacheEntries = 10000

// ErrUnauthenticated is wrapped by the errors of Authenticate when the API server does not accept
// the token (or there is none), as opposed to errors in asking it. Test with errors.Is.
var ErrUnauthenticated = errors.New("unauthenticated")

// Config configures a Reviewer.
type Config struct {
	// Client talks to the global cluster's API server as an identity allowed to create
	// tokenreviews and subjectaccessreviews (ClusterRole system:auth-delegator). Required.
	Client kubernetes.Interface
	// Group is the API group of the virtual resource callers are authorized on, for example
	// "fleet.edgefleet.io"; "" is the core group.
	Group string
	// Resource is the virtual resource, for example "artifacts". Required.
	Resource string
	// CacheTTL is how long token and access reviews are cached: 10s when zero, no
	// caching when negative. A revoked token or binding keeps working for at most this long.
	CacheTTL time.Duration
	// Audiences, when set, are the audiences a token must be issued for (TokenReview
	// spec.audiences); when empty the API server's own audiences apply.
	Audiences []string
	// Clock tells the time for cache expiry; the real clock when nil.
	Clock clock.PassiveClock
}

// Reviewer checks bearer tokens with TokenReview and permissions with SubjectAccessReview
// against the global cluster's API server, caching answers for a short time. It is safe for
// concurrent use.
type Reviewer struct {
	client    kubernetes.Interface
	group     string
	resource  string
	audiences []string
	tokens    *ttlCache[[sha256.Size]byte, tokenAnswer]
	decisions *ttlCache[string, decision]
}

// tokenAnswer is a cached TokenReview answer: the user, or why the token was rejected.
type tokenAnswer struct {
	user          User
	authenticated bool
	reason        string
}

// decision is a cached SubjectAccessReview answer.
type decision struct {
	allowed bool
	reason  string
}

// NewReviewer returns a Reviewer. It panics when cfg.Client is nil or cfg.Resource is empty,
// which are programming errors.
func NewReviewer(cfg Config) *Reviewer {
	if cfg.Client == nil {
		panic("kubeauth: NewReviewer: Config.Client is nil")
	}
	if cfg.Resource == "" {
		panic("kubeauth: NewReviewer: Config.Resource is empty")
	}
	ttl := cfg.CacheTTL
	if ttl == 0 {
		ttl = defaultCacheTTL
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Reviewer{
		client:    cfg.Client,
		group:     cfg.Group,
		resource:  cfg.Resource,
		audiences: slices.Clone(cfg.Audiences),
		tokens:    newTTLCache[[sha256.Size]byte, tokenAnswer](clk, ttl, maxCacheEntries),
		decisions: newTTLCache[string, decision](clk, ttl, maxCacheEntries),
	}
}

// User is an authenticated caller, as the API server's authenticators see it.
type User struct {
	// Name is the user name, for example "system:serviceaccount:fleet:uploader".
	Name string
	// UID identifies the user across name reuse; may be empty.
	UID string
	// Groups the user belongs to, for example "system:serviceaccounts" and "system:authenticated".
	Groups []string
	// Extra is additional information the authenticator provided (for ServiceAccount tokens,
	// the pod and credential ID).
	Extra map[string][]string
}

// clone returns a copy that shares no slice or map with u.
func (u User) clone() User {
	c := User{Name: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups)}
	if u.Extra != nil {
		c.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			c.Extra[k] = slices.Clone(v)
		}
	}
	return c
}

// Authenticate returns the user a bearer token belongs to. When the token is empty or the API
// server rejects it, the error wraps ErrUnauthenticated and gives the reason ("token rejected:
// <TokenReview status.error>"); any other error means the API server could not be asked.
// Accepted and rejected tokens are cached under the token's SHA-256 digest; the token itself is
// neither kept nor logged.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (User, error) {
	if token == "" {
		return User{}, fmt.Errorf("%w: empty token", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(token))
	answer, ok := r.tokens.get(key)
	if !ok {
		var err error
		if answer, err = r.reviewToken(ctx, token); err != nil {
			return User{}, err
		}
		r.tokens.add(key, answer)
	}
	if !answer.authenticated {
		return User{}, fmt.Errorf("%w: %s", ErrUnauthenticated, answer.reason)
	}
	return answer.user.clone(), nil
}

func (r *Reviewer) reviewToken(ctx context.Context, token string) (tokenAnswer, error) {
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: r.audiences}}
	got, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return tokenAnswer{}, fmt.Errorf("kubeauth: create TokenReview%s: %w", forbiddenHint(err), err)
	}
	st := got.Status
	if !st.Authenticated {
		reason := "token rejected"
		if st.Error != "" {
			reason += ": " + st.Error
		}
		return tokenAnswer{reason: reason}, nil
	}
	if len(r.audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(r.audiences, a) }) {
		return tokenAnswer{reason: fmt.Sprintf("token rejected: not issued for audiences %q", r.audiences)}, nil
	}
	u := User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = []string(v)
		}
	}
	return tokenAnswer{user: u, authenticated: true}, nil
}

// Authorize reports whether u may do verb (get, list, create, delete, …) on the Reviewer's
// virtual resource, on the object called name or, when name is "", on the resource as a whole.
// It is AuthorizeAccess of the Reviewer's group and resource, cluster-wide.
func (r *Reviewer) Authorize(ctx context.Context, u User, verb, name string) (allowed bool, reason string, err error) {
	return r.AuthorizeAccess(ctx, u, Access{Verb: verb, Group: r.group, Resource: r.resource, Name: name})
}

// Access is what a SubjectAccessReview asks: may the user do Verb on Resource (of API group
// Group), in Namespace ("" for cluster-scoped resources, or all namespaces), on the object Name
// ("" for the collection)?
type Access struct {
	Verb, Group, Resource, Namespace, Name string
}

// String says what was asked, as a sentence fragment: `patch campaigns.fleet.edgefleet.io
// "patch-1" in namespace "fleet"`.
func (a Access) String() string {
	s := a.Verb + " " + a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += fmt.Sprintf(" %q", a.Name)
	}
	if a.Namespace != "" {
		s += fmt.Sprintf(" in namespace %q", a.Namespace)
	} else {
		s += " in all namespaces"
	}
	return s
}

// AuthorizeAccess reports whether u may do what a asks, with a SubjectAccessReview. reason is
// the review's reason, or when denied without one (RBAC gives none) a sentence saying what was
// denied; it names no rule and suits an answer to the caller. Answers are cached by user (name,
// UID, groups, extra) and every field of a.
func (r *Reviewer) AuthorizeAccess(ctx context.Context, u User, a Access) (allowed bool, reason string, err error) {
	if err := checkAccess(u, a); err != nil {
		return false, "", err
	}
	key := decisionKey(u, a)
	if d, ok := r.decisions.get(key); ok {
		return d.allowed, d.reason, nil
	}
	d, err := r.reviewAccess(ctx, u, a)
	if err != nil {
		return false, "", err
	}
	r.decisions.add(key, d)
	return d.allowed, d.reason, nil
}

// AuthorizeAccessNow is AuthorizeAccess without its cache: every call is a new
// SubjectAccessReview, and its answer is not cached either. It is for decisions a revoked grant
// must stop at once (issuing a credential), rather than within the cache's TTL.
func (r *Reviewer) AuthorizeAccessNow(ctx context.Context, u User, a Access) (allowed bool, reason string, err error) {
	if err := checkAccess(u, a); err != nil {
		return false, "", err
	}
	d, err := r.reviewAccess(ctx, u, a)
	if err != nil {
		return false, "", err
	}
	return d.allowed, d.reason, nil
}

// checkAccess refuses a question no review can answer.
func checkAccess(u User, a Access) error {
	if u.Name == "" && len(u.Groups) == 0 {
		return errors.New("kubeauth: authorize: user has neither a name nor groups")
	}
	if a.Verb == "" || a.Resource == "" {
		return fmt.Errorf("kubeauth: authorize: empty verb or resource in %+v", a)
	}
	return nil
}

func (r *Reviewer) reviewAccess(ctx context.Context, u User, a Access) (decision, error) {
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Group:     a.Group,
			Resource:  a.Resource,
			Verb:      a.Verb,
			Namespace: a.Namespace,
			Name:      a.Name,
		},
	}}
	if len(u.Extra) > 0 {
		review.Spec.Extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			review.Spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	got, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("kubeauth: create SubjectAccessReview for %s of user %q%s: %w",
			a, u.Name, forbiddenHint(err), err)
	}
	d := decision{allowed: got.Status.Allowed && !got.Status.Denied, reason: got.Status.Reason}
	if !d.allowed && d.reason == "" {
		d.reason = fmt.Sprintf("user %q cannot %s resource %q in API group %q", u.Name, a.Verb, a.Resource, a.Group)
		if a.Name != "" {
			d.reason += fmt.Sprintf(" (object %q)", a.Name)
		}
		if a.Namespace != "" {
			d.reason += fmt.Sprintf(" in namespace %q", a.Namespace)
		}
	}
	return d, nil
}

// decisionKey encodes everything a SubjectAccessReview depends on without ambiguity: every
// field is length-prefixed; groups are sorted, extra keys too.
func decisionKey(u User, a Access) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(a.Verb)
	field(a.Group)
	field(a.Resource)
	field(a.Namespace)
	field(a.Name)
	b.WriteString(u.Key())
	return b.String()
}

// Key encodes everything about u a SubjectAccessReview depends on (name, UID, groups in any
// order, extra) without ambiguity: equal keys, equal answers. For caches of decisions about u.
func (u User) Key() string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(u.Name)
	field(u.UID)
	groups := slices.Sorted(slices.Values(u.Groups))
	field(strconv.Itoa(len(groups)))
	for _, g := range groups {
		field(g)
	}
	keys := slices.Sorted(maps.Keys(u.Extra))
	field(strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(k)
		field(strconv.Itoa(len(u.Extra[k])))
		for _, v := range u.Extra[k] {
			field(v)
		}
	}
	return b.String()
}

// forbiddenHint explains the usual cause of a Forbidden answer to a review.
func forbiddenHint(err error) string {
	if apierrors.IsForbidden(err) {
		return " (the reviewer's identity needs the ClusterRole system:auth-delegator)"
	}
	return ""
}
