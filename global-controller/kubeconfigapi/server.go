package kubeconfigapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
)

// Route is the endpoint's path, and Path its http.ServeMux pattern (POST only).
const (
	Route = "/api/v1/namespaces/{namespace}/sites/{site}/kubeconfig"
	Path  = http.MethodPost + " " + Route
)

// The grant: verb create on the subresource-style resource sites/kubeconfig of the fleet group.
const (
	grantGroup    = "fleet.edgefleet.io"
	grantResource = "sites/kubeconfig"
	grantVerb     = "create"
)

// maxBody bounds the request body: a CSR and a number.
const maxBody = 64 << 10

// DefaultWait is how long the server waits for the site's BPA to answer when Server.Wait is
// zero.
const DefaultWait = 30 * time.Second

// Auth checks callers: the bearer token (Middleware) and, on every request and never from a
// cache, the grant (AuthorizeAccessNow). *kubeauth.Reviewer in production.
type Auth interface {
	Middleware(next http.Handler) http.Handler
	AuthorizeAccessNow(ctx context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error)
}

// Sites gives the client of a site, by its Site's namespaced name (a *siteclient.Cache).
type Sites interface {
	Client(site types.NamespacedName) (client.Client, error)
}

// Server issues cluster users' credentials.
type Server struct {
	// Auth authenticates and authorizes callers.
	Auth Auth
	// Reader reads Sites from the global cluster.
	Reader client.Reader
	// Sites reaches the sites' clusters.
	Sites Sites
	// Recorder records every credential issued on the Site: user, cluster, expiry.
	Recorder events.EventRecorder
	// Clock tells the time expiries are counted from.
	Clock clock.PassiveClock
	// MaxTTL is the longest a credential lives; clustercred.DefaultMaxTTL when zero.
	MaxTTL time.Duration
	// Wait bounds the wait for the BPA's answer; DefaultWait when zero.
	Wait time.Duration
	// Poll is how often the answer is looked for; siteclient.DefaultPoll when zero.
	Poll time.Duration
}

// Handler returns the endpoint's handler, authenticating callers with Auth's middleware.
func (s *Server) Handler() http.Handler {
	return s.Auth.Middleware(http.HandlerFunc(s.issue))
}

// Grant is the access a user needs on a Site to get a kubeconfig of its cluster.
func Grant(namespace, site string) kubeauth.Access {
	return kubeauth.Access{Verb: grantVerb, Group: grantGroup, Resource: grantResource, Namespace: namespace, Name: site}
}

func (s *Server) issue(w http.ResponseWriter, r *http.Request) {
	cred, err := s.credential(r)
	if err != nil {
		problem.Write(w, err)
		return
	}
	problem.WriteJSON(w, http.StatusOK, cred)
}

// credential reads the request and issues the credential.
func (s *Server) credential(r *http.Request) (restv1.ClusterCredential, error) {
	u, ok := kubeauth.UserFrom(r.Context())
	if !ok {
		return restv1.ClusterCredential{}, problem.New(http.StatusUnauthorized, "Authorization", "no authenticated user")
	}
	req, err := Decode(r.Body)
	if err != nil {
		return restv1.ClusterCredential{}, err
	}
	return s.Issue(r.Context(), u, types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("site")}, req)
}

// Issue gives u a credential of the application cluster of Site key, when u may have one: the
// grant (a fresh SubjectAccessReview), the CSR, the Site, then the site's answer. Errors are
// *problem.Problem. The web UI calls it for its signed-in users.
func (s *Server) Issue(ctx context.Context, u kubeauth.User, key types.NamespacedName, req restv1.KubeconfigRequest) (restv1.ClusterCredential, error) {
	access := Grant(key.Namespace, key.Name)
	allowed, reason, err := s.Auth.AuthorizeAccessNow(ctx, u, access)
	if err != nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusServiceUnavailable, "", "cannot check permissions with the API server now: %v", err)
	}
	if !allowed {
		return restv1.ClusterCredential{}, problem.New(http.StatusForbidden, "", "user %q may not get a kubeconfig of site %s (%s): %s", u.Name, key, access, reason)
	}
	id, err := clustercred.IdentityOf(u.Name, u.Groups)
	if err != nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusBadRequest, "", "%v", err)
	}
	if _, err := clustercred.PublicKey([]byte(req.CSR), id); err != nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusBadRequest, "csr", "%v", err)
	}
	ttl, err := clustercred.Lifetime(time.Duration(req.TTLSeconds)*time.Second, s.maxTTL())
	if err != nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusBadRequest, "ttlSeconds", "%v", err)
	}
	site := &fleetv1.Site{}
	if err := s.Reader.Get(ctx, key, site); apierrors.IsNotFound(err) {
		return restv1.ClusterCredential{}, problem.New(http.StatusNotFound, "", "there is no Site %s", key)
	} else if err != nil {
		return restv1.ClusterCredential{}, fmt.Errorf("read Site %s: %w", key, err)
	}
	if site.Spec.Cluster == nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusConflict, "", "Site %s has no application cluster (spec.cluster is not set)", key)
	}
	expires := s.Clock.Now().Add(ttl).Truncate(time.Second)
	st, err := s.ask(ctx, key, sitev1.ClusterCredentialRequestSpec{
		Cluster: site.Name, CSR: req.CSR, User: id.User, Groups: id.Groups, ExpirationTime: metav1.NewTime(expires),
	})
	if err != nil {
		return restv1.ClusterCredential{}, err
	}
	cert, err := parseCert(st.Certificate)
	if err != nil {
		return restv1.ClusterCredential{}, problem.New(http.StatusBadGateway, "", "the BPA of site %s answered a certificate that cannot be read: %v", key, err)
	}
	s.Recorder.Eventf(site, nil, corev1.EventTypeNormal, "KubeconfigIssued", "IssueKubeconfig",
		"kubeconfig of cluster %s for user %q (as %q) valid until %s", site.Name, u.Name, id.User, cert.NotAfter.UTC().Format(time.RFC3339))
	return restv1.ClusterCredential{
		Cluster: site.Name, Server: st.Server, CertificateAuthority: st.CertificateAuthority, Certificate: st.Certificate,
		User: id.User, Groups: id.Groups, ExpirationTime: cert.NotAfter.UTC(),
	}, nil
}

// ask creates the request on the site, waits for the BPA's answer and deletes the request,
// whatever happened (siteclient.Ask).
func (s *Server) ask(ctx context.Context, key types.NamespacedName, spec sitev1.ClusterCredentialRequestSpec) (sitev1.ClusterCredentialRequestStatus, error) {
	siteClient, err := s.Sites.Client(key)
	if err != nil {
		return sitev1.ClusterCredentialRequestStatus{}, problem.New(http.StatusServiceUnavailable, "", "site %s cannot be reached now: %v", key, err)
	}
	wait := s.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	ccr := &sitev1.ClusterCredentialRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, GenerateName: "kubeconfig-"},
		Spec:       spec,
	}
	err = siteclient.Ask(ctx, siteClient, ccr, wait, s.Poll, (*sitev1.ClusterCredentialRequest).Answered)
	switch {
	case errors.Is(err, siteclient.ErrNoAnswer):
		return sitev1.ClusterCredentialRequestStatus{}, problem.New(http.StatusGatewayTimeout, "", "the BPA of site %s did not answer within %s (is it running?)", key, wait)
	case err != nil:
		return sitev1.ClusterCredentialRequestStatus{}, problem.New(http.StatusServiceUnavailable, "", "site %s: %v", key, err)
	}
	return answer(key, ccr.Status)
}

// answer maps the BPA's answer to the caller's: the status, or an error naming the reason.
func answer(key types.NamespacedName, st sitev1.ClusterCredentialRequestStatus) (sitev1.ClusterCredentialRequestStatus, error) {
	switch st.Reason {
	case "":
		return st, nil
	case sitev1.CredentialReasonClusterNotInstalled:
		return st, problem.New(http.StatusConflict, "", "site %s: %s: %s", key, st.Reason, st.Message)
	case sitev1.CredentialReasonInvalidRequest:
		return st, problem.New(http.StatusBadRequest, "", "site %s: %s: %s", key, st.Reason, st.Message)
	default:
		return st, problem.New(http.StatusBadGateway, "", "site %s: %s: %s", key, st.Reason, st.Message)
	}
}

func (s *Server) maxTTL() time.Duration {
	if s.MaxTTL > 0 {
		return s.MaxTTL
	}
	return clustercred.DefaultMaxTTL
}

// Decode reads a request body: bounded, strict JSON, with a CSR.
func Decode(r io.Reader) (restv1.KubeconfigRequest, error) {
	var req restv1.KubeconfigRequest
	body, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return req, problem.New(http.StatusBadRequest, "body", "request body: %v", err)
	}
	if len(body) > maxBody {
		return req, problem.New(http.StatusRequestEntityTooLarge, "body", "request body: more than %d bytes", maxBody)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, problem.New(http.StatusBadRequest, "body", "request body is not the expected JSON: %v", err)
	}
	if req.CSR == "" {
		return req, problem.New(http.StatusBadRequest, "csr", "csr: required (a PEM certificate signing request)")
	}
	return req, nil
}

func parseCert(s string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM CERTIFICATE")
	}
	return x509.ParseCertificate(block.Bytes)
}
