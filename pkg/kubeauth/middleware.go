package kubeauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// userKey is the context key of the authenticated User.
type userKey struct{}

// UserFrom returns the User that Middleware authenticated for the request whose context ctx is.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	if !ok {
		return User{}, false
	}
	return u.clone(), true
}

// Middleware returns a handler that authenticates each request, stores the User in the
// request's context (see UserFrom) and calls next. A request authenticates by a client
// certificate the TLS server verified (its ClientCAs: the API server's client CA) — user its
// Subject's CommonName, groups its Organizations and system:authenticated, as the API server's
// x509 authenticator maps it — or else by its "Authorization: Bearer <token>" header.
// A request without either gets 401 with a WWW-Authenticate challenge and an
// api/rest/v1 Error body ({"message": ...}) saying what is wrong: no Authorization header, not a
// Bearer token, or a token the API server rejected (why is logged at V(1), not told to the
// caller). When the API server cannot be asked the answer is 503. Authorization is left to the
// handlers, which call Authorize with the verb of their route.
func (r *Reviewer) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, ok := certificateUser(req); ok {
			next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), userKey{}, u)))
			return
		}
		token, problem := bearerToken(req.Header)
		if problem != "" {
			w.Header().Set("WWW-Authenticate", `Bearer`)
			writeError(w, http.StatusUnauthorized, "Authorization", problem)
			return
		}
		u, err := r.Authenticate(req.Context(), token)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			logf.FromContext(req.Context()).V(1).Info("Rejected a request's bearer token", "reason", err.Error(),
				"method", req.Method, "path", req.URL.Path, "remoteAddr", req.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "Authorization",
				"the bearer token in the Authorization header was rejected by the Kubernetes API server: it is invalid, expired or revoked, or not issued for this service")
		case err != nil:
			logf.FromContext(req.Context()).Error(err, "Cannot authenticate a request", "method", req.Method, "path", req.URL.Path)
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "", "cannot check the bearer token now: the Kubernetes API server could not be asked; try again later")
		default:
			next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), userKey{}, u)))
		}
	})
}

// certificateUser is the user of the client certificate the TLS server verified, if any: only
// a verified chain counts, never a certificate merely presented.
func certificateUser(req *http.Request) (User, bool) {
	if req.TLS == nil || len(req.TLS.VerifiedChains) == 0 || len(req.TLS.VerifiedChains[0]) == 0 {
		return User{}, false
	}
	subject := req.TLS.VerifiedChains[0][0].Subject
	if subject.CommonName == "" {
		return User{}, false
	}
	return User{Name: subject.CommonName, Groups: append(slices.Clone(subject.Organization), "system:authenticated")}, true
}

// bearerToken returns the token of the Authorization header, or what is wrong with the header.
func bearerToken(h http.Header) (token, problem string) {
	const want = `send "Authorization: Bearer <token>"`
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", "missing Authorization header: " + want
	case 1:
	default:
		return "", "more than one Authorization header: " + want
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", "the Authorization header is not a Bearer token: " + want
	}
	if token = strings.TrimSpace(token); token == "" {
		return "", "the Authorization header has an empty Bearer token: " + want
	}
	return token, ""
}

// writeError answers with an api/rest/v1 Error body.
func writeError(w http.ResponseWriter, status int, field, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(restv1.Error{Message: message, Field: field})
}

// Require returns a middleware that lets through only requests whose caller Middleware
// authenticates and may do verb on the Reviewer's virtual resource as a whole (Authorize with
// no name); others get 401 (from Middleware), 403 naming the user, the verb and the resource, or
// 503 when the API server cannot be asked.
func (r *Reviewer) Require(verb string) func(http.Handler) http.Handler {
	what := r.resource
	if r.group != "" {
		what += "." + r.group
	}
	return func(next http.Handler) http.Handler {
		return r.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			u, _ := UserFrom(req.Context())
			allowed, reason, err := r.Authorize(req.Context(), u, verb, "")
			switch {
			case err != nil:
				logf.FromContext(req.Context()).Error(err, "Cannot authorize a request", "user", u.Name, "verb", verb, "path", req.URL.Path)
				w.Header().Set("Retry-After", "5")
				writeError(w, http.StatusServiceUnavailable, "", "cannot check permissions now: the Kubernetes API server could not be asked; try again later")
			case !allowed:
				msg := fmt.Sprintf("user %q may not %s %s", u.Name, verb, what)
				if reason != "" {
					msg += ": " + reason
				}
				writeError(w, http.StatusForbidden, "", msg)
			default:
				next.ServeHTTP(w, req)
			}
		}))
	}
}
