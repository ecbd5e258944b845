package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// tokenCookie holds the user's bearer token: HttpOnly (no script reads it), Secure (HTTPS
// only; browsers make an exception for http://localhost), SameSite=Strict (no other site's page
// sends it), valid for the browser session.
const tokenCookie = "edgefleet-token"

// maxTokenLength keeps a token within what browsers store in one cookie (4096 bytes with the
// cookie's name and attributes).
const maxTokenLength = 3800

// Keys of what authenticated puts into the gin context.
const (
	userKey  = "user"
	tokenKey = "token"
)

// loginPage shows the login form.
func (s *Server) loginPage(c *gin.Context) {
	problem := ""
	if c.Query("expired") != "" {
		problem = "Your token was rejected (expired or revoked): sign in again."
	}
	s.showLogin(c, http.StatusOK, c.Query("next"), problem)
}

func (s *Server) showLogin(c *gin.Context, status int, next, problem string) {
	body, err := s.render("login", false, view{Title: "Sign in", Path: c.Request.URL.Path, Now: s.cfg.Clock.Now(),
		Data: struct{ Next string }{localPath(next)}, Error: problem})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Data(status, "text/html; charset=utf-8", body)
}

// login checks the token of the form with a TokenReview and keeps it in the cookie.
func (s *Server) login(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10)
	token, next := strings.TrimSpace(c.PostForm("token")), c.PostForm("next")
	switch {
	case token == "":
		s.showLogin(c, http.StatusBadRequest, next, "Paste a bearer token: kubectl create token <service account>, or your OIDC ID token.")
		return
	case len(token) > maxTokenLength:
		s.showLogin(c, http.StatusBadRequest, next, fmt.Sprintf("The token has %d bytes; a browser keeps at most %d in a cookie.", len(token), maxTokenLength))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.Limits.RequestTimeout)
	defer cancel()
	u, err := s.cfg.Auth.Authenticate(ctx, token)
	switch {
	case errors.Is(err, kubeauth.ErrUnauthenticated):
		s.showLogin(c, http.StatusUnauthorized, next, "The Kubernetes API server rejected this token: it is invalid, expired or revoked.")
		return
	case err != nil:
		s.cfg.Log.Error(err, "authenticate a login")
		s.showLogin(c, http.StatusServiceUnavailable, next, "The token cannot be checked now: the Kubernetes API server could not be asked. Try again later.")
		return
	}
	s.cfg.Log.Info("signed in to the web UI", "user", u.Name, "remoteAddr", c.Request.RemoteAddr)
	setTokenCookie(c, token, 0)
	c.Redirect(http.StatusSeeOther, localPath(next))
}

// logout forgets the token.
func (s *Server) logout(c *gin.Context) {
	setTokenCookie(c, "", -1)
	c.Redirect(http.StatusSeeOther, "/ui/login")
}

func setTokenCookie(c *gin.Context, token string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{Name: tokenCookie, Value: token, Path: "/ui", MaxAge: maxAge,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// authenticated checks the cookie's token with a TokenReview and puts the user and the token
// into the context. Without a usable token, pages redirect to the login page and the rest
// (posts, streams, the scripts' JSON routes) get 401.
func (s *Server) authenticated(c *gin.Context) {
	cookie, err := c.Request.Cookie(tokenCookie)
	if err != nil || cookie.Value == "" {
		s.unauthenticated(c, false)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.Limits.RequestTimeout)
	defer cancel()
	u, err := s.cfg.Auth.Authenticate(ctx, cookie.Value)
	switch {
	case errors.Is(err, kubeauth.ErrUnauthenticated):
		setTokenCookie(c, "", -1)
		s.unauthenticated(c, true)
		return
	case err != nil:
		s.cfg.Log.Error(err, "authenticate a web UI request")
		c.Header("Retry-After", "5")
		s.fail(c, &httpError{status: http.StatusServiceUnavailable, msg: "Your token cannot be checked now: the Kubernetes API server could not be asked. Try again later."})
		return
	}
	c.Set(userKey, u)
	c.Set(tokenKey, cookie.Value)
}

func (s *Server) unauthenticated(c *gin.Context, expired bool) {
	if c.Request.Method == http.MethodGet && !wantsStream(c.Request) && !scriptRoute(c) {
		q := url.Values{"next": {c.Request.URL.RequestURI()}}
		if expired {
			q.Set("expired", "1")
		}
		c.Redirect(http.StatusSeeOther, "/ui/login?"+q.Encode())
		c.Abort()
		return
	}
	msg := "Sign in first."
	if expired {
		msg = "Your token was rejected (expired or revoked): sign in again."
	}
	s.fail(c, &httpError{status: http.StatusUnauthorized, msg: msg})
}

// sameOrigin refuses a POST that another site's page sent (cross-site request forgery): the
// browser's Origin header must be this server's own. SameSite=Strict already keeps the cookie
// out of such requests; this check does not rely on the browser honouring it.
func sameOrigin(c *gin.Context) {
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	want := scheme + "://" + c.Request.Host
	if got := c.GetHeader("Origin"); got != want {
		msg := fmt.Sprintf("refused: the request's Origin %q is not this server's (%s); forms of other sites may not post here", got, want)
		if scriptRoute(c) {
			c.AbortWithStatusJSON(http.StatusForbidden, restv1.Error{Message: msg})
			return
		}
		c.Header("Content-Type", "text/plain; charset=utf-8")
		c.String(http.StatusForbidden, "%s", msg)
		c.Abort()
	}
}

// localPath returns p when it is a path of the UI, the overview otherwise: the login's next
// page never leads elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, Prefix) || strings.HasPrefix(p, "//") {
		return Prefix
	}
	return u.RequestURI()
}

// authorize returns an httpError (403) unless the user may do what a asks.
func (s *Server) authorize(ctx context.Context, u kubeauth.User, a kubeauth.Access) error {
	allowed, reason, err := s.cfg.Auth.AuthorizeAccess(ctx, u, a)
	if err != nil {
		return fmt.Errorf("check whether %s may %s: %w", u.Name, a, err)
	}
	if !allowed {
		return &httpError{status: http.StatusForbidden, msg: fmt.Sprintf("%s may not %s: %s", u.Name, a, reason)}
	}
	return nil
}

// allowed reports whether the user may do what a asks; errors count as no.
func (s *Server) allowed(ctx context.Context, u kubeauth.User, a kubeauth.Access) bool {
	ok, _, err := s.cfg.Auth.AuthorizeAccess(ctx, u, a)
	if err != nil {
		s.cfg.Log.Error(err, "check access", "user", u.Name, "access", a.String())
	}
	return ok && err == nil
}

// fleetAccess is a verb on a fleet.edgefleet.io resource.
func fleetAccess(verb, resource, namespace, name string) kubeauth.Access {
	return kubeauth.Access{Verb: verb, Group: "fleet.edgefleet.io", Resource: resource, Namespace: namespace, Name: name}
}
