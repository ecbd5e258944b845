package enrollment

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;update;delete
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The RBAC of issuing, listing and revoking a site's tokens: verbs on the subresource-style
// resource "sites/enrollment" of group fleet.edgefleet.io, on the Site by name, in its namespace.
const (
	rbacGroup    = "fleet.edgefleet.io"
	rbacResource = "sites/enrollment"
	verbCreate   = "create"
	verbGet      = "get"
	verbDelete   = "delete"
)

// Bounds of request bodies.
const (
	maxEnrollBody     = 256 << 10
	maxKubeconfig     = 128 << 10
	maxCreateBody     = 4 << 10
	maxMachineNameLen = 253
)

// Auth authenticates people (Middleware, TokenReview) and authorizes them
// (AuthorizeAccess, SubjectAccessReview): *kubeauth.Reviewer.
type Auth interface {
	Middleware(next http.Handler) http.Handler
	AuthorizeAccess(ctx context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error)
}

// SiteAccess asks a site, through a credential, what that credential may do: SelfReviews.
type SiteAccess interface {
	Ask(ctx context.Context, cfg *rest.Config, questions []Question) ([]bool, error)
}

// Server serves token issuing (people, authenticated like the artifact API) and enrollment
// (machines, authenticated by their token).
type Server struct {
	// Client writes token records, kubeconfig Secrets; Reader reads Secrets from the API server
	// (no cache of every Secret); Sites reads Sites (the manager's cache).
	Client client.Client
	Reader client.Reader
	Sites  client.Reader
	Auth   Auth
	Access SiteAccess
	// Vault stores the kubeconfigs of Sites that keep theirs in Vault (spec.kubeconfigVaultRef);
	// nil when the controller runs without Vault, and such Sites cannot enroll.
	Vault vaultref.Store
	// Recorder emits the event of an enrollment on its Site.
	Recorder events.EventRecorder
	Log      logr.Logger
	Clock    clock.PassiveClock
	// Random makes tokens: crypto/rand.Reader.
	Random io.Reader
	// DefaultTTL and MaxTTL bound tokens' lifetimes.
	DefaultTTL, MaxTTL time.Duration
	// Timeout bounds each request's work (the site's reviews included).
	Timeout time.Duration
	// Addresses says which addresses of an enrolling site's API server the controller
	// connects to (the Site reconciler's site clients use the same policy after enrollment).
	Addresses siteclient.AddressPolicy
	// MaxFailures is how many attempts with a token may fail or be refused, once the token
	// proved its secret, before every further one is refused.
	MaxFailures int
}

// unreachable is what the machine is told when the site's API server did not answer the
// global controller's reviews: the transport's error stays in the log, for it would tell a
// holder of a leaked token what answers on the global controller's network.
const unreachable = "the site's API server could not be reached or did not prove its identity; check the URL and CA given to enrollment (the global controller's log has the details)"

// Paths the server answers; setup routes them here.
const (
	EnrollPath = "/api/v1/enroll"
	// TokensPrefix starts /api/v1/namespaces/{namespace}/sites/{site}/enrollment-tokens[/{id}].
	TokensPrefix = "/api/v1/namespaces/"
)

// Handler serves POST EnrollPath and the enrollment-tokens paths under TokensPrefix.
func (s *Server) Handler() http.Handler {
	tokens := http.NewServeMux()
	const base = TokensPrefix + "{namespace}/sites/{site}/enrollment-tokens"
	tokens.HandleFunc("POST "+base, s.createToken)
	tokens.HandleFunc("GET "+base, s.listTokens)
	tokens.Handle(base, problem.MethodNotAllowed(http.MethodGet, http.MethodPost))
	tokens.HandleFunc("DELETE "+base+"/{id}", s.revokeToken)
	tokens.Handle(base+"/{id}", problem.MethodNotAllowed(http.MethodDelete))
	tokens.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, restv1.Error{Message: fmt.Sprintf("no such API path: %s %s", r.Method, r.URL.Path)})
	})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+EnrollPath, s.enroll)
	mux.Handle(EnrollPath, problem.MethodNotAllowed(http.MethodPost))
	mux.Handle(TokensPrefix, s.Auth.Middleware(tokens))
	return mux
}

// authorized answers 403 (or 500) and returns false when the request's user may not do verb on
// the enrollment of the request's site.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, verb string) bool {
	u, ok := kubeauth.UserFrom(r.Context())
	if !ok {
		writeError(w, http.StatusUnauthorized, restv1.Error{Message: "no authenticated user", Field: "Authorization"})
		return false
	}
	a := kubeauth.Access{Verb: verb, Group: rbacGroup, Resource: rbacResource, Namespace: r.PathValue("namespace"), Name: r.PathValue("site")}
	allowed, reason, err := s.Auth.AuthorizeAccess(r.Context(), u, a)
	if err != nil {
		s.Log.Error(err, "authorize", "user", u.Name, "access", a.String())
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, restv1.Error{Message: "could not check permissions with the API server now; try again"})
		return false
	}
	if !allowed {
		writeError(w, http.StatusForbidden, restv1.Error{Message: fmt.Sprintf("user %q may not %s: %s", u.Name, a, reason)})
		return false
	}
	return true
}

// site reads the Site of the request; it answers 404 and returns nil when there is none.
func (s *Server) site(ctx context.Context, w http.ResponseWriter, namespace, name string) *fleetv1.Site {
	site := &fleetv1.Site{}
	err := s.Sites.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, site)
	switch {
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusNotFound, restv1.Error{Message: fmt.Sprintf("site %s/%s does not exist: create the Site first", namespace, name), Reason: ReasonSiteNotFound})
		return nil
	case err != nil:
		s.internal(w, err, "read site", namespace+"/"+name)
		return nil
	}
	return site
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, verbCreate) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.Timeout)
	defer cancel()
	ns, name := r.PathValue("namespace"), r.PathValue("site")
	var req restv1.CreateEnrollmentToken
	if !decode(w, r, maxCreateBody, true, &req) {
		return
	}
	ttl, err := TTL(req.TTL, s.DefaultTTL, s.MaxTTL)
	if err != nil {
		writeError(w, http.StatusBadRequest, restv1.Error{Message: err.Error(), Field: "ttl"})
		return
	}
	if s.site(ctx, w, ns, name) == nil {
		return
	}
	token, id, err := NewToken(s.Random)
	if err != nil {
		s.internal(w, err, "make token", ns+"/"+name)
		return
	}
	_, secret, _ := strings.Cut(token, ".")
	u, _ := kubeauth.UserFrom(r.Context())
	now := s.Clock.Now().Truncate(time.Second)
	rec := Record{ID: id, Namespace: ns, Site: name, Hash: HashSecret(secret), CreatedBy: u.Name, Created: now, Expires: now.Add(ttl)}
	if err := s.Client.Create(ctx, rec.newSecret()); err != nil {
		s.internal(w, err, "store token record", ns+"/"+name)
		return
	}
	s.Log.Info("Issued an enrollment token", "namespace", ns, "site", name, "id", id, "user", u.Name, "expires", rec.Expires)
	out := rec.wire(now)
	out.Token = token
	problem.WriteJSON(w, http.StatusCreated, out)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, verbGet) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.Timeout)
	defer cancel()
	ns, name := r.PathValue("namespace"), r.PathValue("site")
	var secrets corev1.SecretList
	if err := s.Reader.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{SiteLabel: name}); err != nil {
		s.internal(w, err, "list token records", ns+"/"+name)
		return
	}
	now := s.Clock.Now()
	out := restv1.EnrollmentTokenList{Items: []restv1.EnrollmentToken{}}
	for i := range secrets.Items {
		rec, err := recordOf(&secrets.Items[i])
		if err != nil {
			s.Log.Error(err, "skip a token record")
			continue
		}
		out.Items = append(out.Items, rec.wire(now))
	}
	slices.SortFunc(out.Items, func(a, b restv1.EnrollmentToken) int { return a.Created.Compare(b.Created) })
	problem.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, verbDelete) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.Timeout)
	defer cancel()
	ns, name, id := r.PathValue("namespace"), r.PathValue("site"), r.PathValue("id")
	secret := &corev1.Secret{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName(id)}, secret)
	var rec Record
	if err == nil {
		rec, err = recordOf(secret)
	}
	if apierrors.IsNotFound(err) || err == nil && rec.Site != name {
		writeError(w, http.StatusNotFound, restv1.Error{Message: fmt.Sprintf("site %s/%s has no enrollment token %q", ns, name, id)})
		return
	}
	if err != nil {
		s.internal(w, err, "read token record", ns+"/"+SecretName(id))
		return
	}
	if !rec.Revoked {
		rec.Revoked = true
		rec.toSecret(secret)
		if err := s.Client.Update(ctx, secret); err != nil {
			s.internal(w, err, "revoke token", ns+"/"+SecretName(id))
			return
		}
		u, _ := kubeauth.UserFrom(r.Context())
		s.Log.Info("Revoked an enrollment token", "namespace", ns, "site", name, "id", id, "user", u.Name)
	}
	problem.WriteJSON(w, http.StatusOK, rec.wire(s.Clock.Now()))
}

// enroll takes a site machine's credential in exchange for its token. Every check comes before
// the first write; the token is bound to the machine's cluster before the kubeconfig is stored,
// so that a retry by the same machine finishes what a crash interrupted, and no other machine
// gets past CheckMachine.
func (s *Server) enroll(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.Timeout)
	defer cancel()
	var req restv1.Enroll
	if !decode(w, r, maxEnrollBody, false, &req) {
		return
	}
	if refusal := validateEnroll(req); refusal != nil {
		s.refuse(w, r, req, refusal)
		return
	}
	token, malformed := bearer(r.Header)
	if malformed != "" {
		s.refuse(w, r, req, &Refusal{ReasonMalformed, malformed, http.StatusUnauthorized})
		return
	}
	id, secret, err := ParseToken(token)
	if err != nil {
		s.refuse(w, r, req, &Refusal{ReasonMalformed, err.Error(), http.StatusUnauthorized})
		return
	}
	recSecret := &corev1.Secret{}
	var rec *Record
	switch err := s.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: SecretName(id)}, recSecret); {
	case apierrors.IsNotFound(err):
	case err != nil:
		s.internal(w, err, "read token record", req.Namespace+"/"+SecretName(id))
		return
	default:
		got, err := recordOf(recSecret)
		if err != nil {
			s.internal(w, err, "read token record", req.Namespace+"/"+SecretName(id))
			return
		}
		rec = &got
	}
	now := s.Clock.Now()
	if refusal := CheckToken(rec, secret, req.Namespace, req.Site, now, s.MaxFailures); refusal != nil {
		s.refuse(w, r, req, refusal)
		return
	}
	site := s.site(ctx, w, req.Namespace, req.Site)
	if site == nil {
		return
	}
	if site.Spec.KubeconfigVaultRef != nil && s.Vault == nil {
		s.refuse(w, r, req, &Refusal{ReasonNoVault, "the Site keeps its kubeconfig in Vault (spec.kubeconfigVaultRef) but the global controller runs without Vault: start it with --vault-addr, or set spec.kubeconfigSecretRef", http.StatusServiceUnavailable})
		return
	}
	cfg, err := siteclient.Load([]byte(req.Kubeconfig))
	if err != nil {
		reason := ReasonMalformed
		if errors.Is(err, siteclient.ErrUnsafe) {
			reason = ReasonUnsafe
		}
		s.refuse(w, r, req, &Refusal{reason, "kubeconfig: " + err.Error(), http.StatusBadRequest})
		return
	}
	fingerprint, refusal := Fingerprint(cfg)
	if refusal != nil {
		s.refuse(w, r, req, refusal)
		return
	}
	// From here on the attempt counts against the token unless it enrolls: it is counted
	// before the site is asked anything (the record's optimistic lock lets no two attempts
	// take the same count), and given back once it enrolled.
	rec.Failures++
	if !s.updateRecord(ctx, w, rec, recSecret, "count the attempt against the token") {
		return
	}
	if refusal := CheckMachine(*rec, fingerprint); refusal != nil {
		s.refuse(w, r, req, refusal)
		return
	}
	err = s.Addresses.Check(ctx, cfg)
	var refused *siteclient.AddressError
	if errors.As(err, &refused) {
		s.refuse(w, r, req, &Refusal{ReasonAddress, fmt.Sprintf("the site's API server %s resolves to a %s address, which the global controller does not connect to unless its operator allows it (--enrollment-allowed-networks)",
			refused.Host, refused.Class), http.StatusForbidden})
		s.Log.Info("Refused the address of an enrolling site's API server", "address", refused.Addr.String(), "namespace", req.Namespace, "site", req.Site, "machine", req.Machine)
		return
	}
	questions := Questions()
	var answers []bool
	if err == nil {
		var guarded *rest.Config
		if guarded, err = s.Addresses.Guard(cfg); err == nil {
			answers, err = s.Access.Ask(ctx, guarded, questions)
		}
	}
	if err != nil {
		s.Log.Info("Could not check an enrolling site's credential on its API server", "error", err.Error(), "namespace", req.Namespace, "site", req.Site, "machine", req.Machine)
		s.refuse(w, r, req, &Refusal{ReasonUnreachable, unreachable, http.StatusBadGateway})
		return
	}
	if refusal := CheckCredential(questions, answers); refusal != nil {
		s.refuse(w, r, req, refusal)
		return
	}
	rec.Failures--
	if rec.UsedBy == "" {
		rec.UsedBy, rec.Machine, rec.Used = fingerprint, req.Machine, now.Truncate(time.Second)
	}
	if !s.updateRecord(ctx, w, rec, recSecret, "bind token to the machine") {
		return
	}
	where, changed, err := s.storeKubeconfig(ctx, site, []byte(req.Kubeconfig), rec.ID, req.Machine)
	if err != nil {
		s.internal(w, err, "store kubeconfig", where)
		return
	}
	if changed {
		s.Recorder.Eventf(site, nil, corev1.EventTypeNormal, "Enrolled", "Enroll",
			"machine %q (cluster %s) enrolled with enrollment token %s; its credential is in %s", req.Machine, short(fingerprint), rec.ID, where)
	}
	s.Log.Info("Enrolled a site", "namespace", req.Namespace, "site", req.Site, "machine", req.Machine, "cluster", short(fingerprint), "id", rec.ID, "stored", where, "changed", changed)
	got := restv1.Enrolled{Namespace: req.Namespace, Site: req.Site, Fingerprint: fingerprint}
	if ref := site.Spec.KubeconfigVaultRef; ref != nil {
		got.VaultEntry = s.Vault.Where(site.Namespace, ref.Path)
	} else {
		got.Secret = site.Spec.KubeconfigSecretRef.Name
	}
	problem.WriteJSON(w, http.StatusOK, got)
}

// updateRecord writes rec into its Secret, read as recSecret; on a conflict it answers 409 (the
// machine tries again), on another error 500, and returns false.
func (s *Server) updateRecord(ctx context.Context, w http.ResponseWriter, rec *Record, recSecret *corev1.Secret, what string) bool {
	rec.toSecret(recSecret)
	err := s.Client.Update(ctx, recSecret)
	switch {
	case apierrors.IsConflict(err):
		writeError(w, http.StatusConflict, restv1.Error{Message: "the enrollment token changed meanwhile; try again", Reason: "Conflict"})
		return false
	case err != nil:
		s.internal(w, err, what, rec.Namespace+"/"+SecretName(rec.ID))
		return false
	}
	return true
}

// Labels and annotations of a kubeconfig Secret written by enrollment.
const (
	// EnrolledLabel marks a kubeconfig Secret written by enrollment; its value is the token's id.
	EnrolledLabel = "edgefleet.io/enrollment-token"
	// MachineAnnotation names the machine that enrolled.
	MachineAnnotation = "edgefleet.io/enrolled-machine"
)

// storeKubeconfig stores the Site's kubeconfig where its spec says, a Secret or a Vault entry;
// it reports where (for messages) and whether anything changed.
func (s *Server) storeKubeconfig(ctx context.Context, site *fleetv1.Site, kubeconfig []byte, id, machine string) (string, bool, error) {
	if ref := site.Spec.KubeconfigVaultRef; ref != nil {
		key := cmp.Or(ref.Key, "kubeconfig")
		where := "Vault entry " + s.Vault.Where(site.Namespace, ref.Path)
		entry, err := s.Vault.Read(ctx, site.Namespace, ref.Path)
		if err != nil && !errors.Is(err, vaultref.ErrNotFound) {
			return where, false, err
		}
		if entry.Data[key] == string(kubeconfig) && entry.Data[EnrolledLabel] == id {
			return where, false, nil
		}
		// The entry keeps its other keys; who enrolled is kept beside the kubeconfig, as the
		// Secret keeps it in a label and an annotation.
		data := map[string]string{}
		maps.Copy(data, entry.Data)
		data[key], data[EnrolledLabel], data[MachineAnnotation] = string(kubeconfig), id, machine
		_, err = s.Vault.Write(ctx, site.Namespace, ref.Path, data)
		return where, err == nil, err
	}
	ref := site.Spec.KubeconfigSecretRef
	where := "Secret " + ref.Name
	key := ref.Key
	if key == "" {
		key = "kubeconfig"
	}
	secret := &corev1.Secret{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: ref.Name}, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: ref.Name,
				Labels: map[string]string{EnrolledLabel: id}, Annotations: map[string]string{MachineAnnotation: machine}},
			Data: map[string][]byte{key: kubeconfig},
		}
		return where, true, s.Client.Create(ctx, secret)
	}
	if err != nil {
		return where, false, err
	}
	if bytes.Equal(secret.Data[key], kubeconfig) && secret.Labels[EnrolledLabel] == id {
		return where, false, nil
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Data[key], secret.Labels[EnrolledLabel], secret.Annotations[MachineAnnotation] = kubeconfig, id, machine
	return where, true, s.Client.Update(ctx, secret)
}

// validateEnroll checks the body's fields before anything is read.
func validateEnroll(req restv1.Enroll) *Refusal {
	bad := func(field, msg string) *Refusal {
		return &Refusal{ReasonMalformed, fmt.Sprintf("%s: %s", field, msg), http.StatusBadRequest}
	}
	if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
		return bad("namespace", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(req.Site); len(errs) > 0 {
		return bad("site", strings.Join(errs, "; "))
	}
	if req.Machine == "" || len(req.Machine) > maxMachineNameLen || strings.ContainsFunc(req.Machine, func(r rune) bool { return r < '!' || r > '~' }) {
		return bad("machine", fmt.Sprintf("must be 1 to %d printable ASCII characters without spaces (the machine's host name)", maxMachineNameLen))
	}
	if len(req.Kubeconfig) == 0 || len(req.Kubeconfig) > maxKubeconfig {
		return bad("kubeconfig", fmt.Sprintf("must be 1 byte to %d KiB", maxKubeconfig>>10))
	}
	return nil
}

// refuse answers a refused enrollment and logs why, naming the site and the machine, never the
// token.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, req restv1.Enroll, refusal *Refusal) {
	s.Log.Info("Refused an enrollment", "reason", refusal.Reason, "message", refusal.Message,
		"namespace", req.Namespace, "site", req.Site, "machine", req.Machine, "remoteAddr", r.RemoteAddr)
	if refusal.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	writeError(w, refusal.Status, restv1.Error{Message: refusal.Message, Reason: refusal.Reason})
}

func (s *Server) internal(w http.ResponseWriter, err error, what, object string) {
	s.Log.Error(err, what, "object", object)
	writeError(w, http.StatusInternalServerError, restv1.Error{Message: fmt.Sprintf("%s %s failed; see the global controller's log", what, object)})
}

// bearer returns the enrollment token of the Authorization header, or what is wrong with it.
func bearer(h http.Header) (token, malformed string) {
	const want = `send the enrollment token as "Authorization: Bearer <token>"`
	values := h.Values("Authorization")
	if len(values) != 1 {
		return "", "want exactly one Authorization header: " + want
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", "the Authorization header is not a Bearer token: " + want
	}
	return strings.TrimSpace(token), ""
}

// decode reads a JSON body of at most limit bytes strictly; an empty body is fine when optional.
func decode(w http.ResponseWriter, r *http.Request, limit int64, optional bool, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		status := http.StatusBadRequest
		if errors.As(err, new(*http.MaxBytesError)) {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, status, restv1.Error{Message: fmt.Sprintf("request body: %v (at most %d bytes)", err, limit), Field: "body", Reason: ReasonMalformed})
		return false
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("request body is not the expected JSON: %v", err), Field: "body", Reason: ReasonMalformed})
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, e restv1.Error) { problem.WriteJSON(w, status, e) }
