package kubeauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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

// Middleware returns a handler that authenticates each request by its "Authorization: Bearer
// <token>" header, stores the User in the request's context (see UserFrom) and calls next.
// A request without a usable token gets 401 with a WWW-Authenticate challenge and an
// api/rest/v1 Error body ({"message": ...}) saying what is wrong: no Authorization header, not a
// Bearer token, or a token the API server rejected (why is logged at V(1), not told to the
// caller). When the API server cannot be asked the answer is 503. Authorization is left to the
// handlers, which call Authorize with the verb of their route.
func (r *Reviewer) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
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
