package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list

//go:embed templates static
var assets embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Auth checks a user's bearer token (TokenReview) and what the user may do
// (SubjectAccessReview); *kubeauth.Reviewer in production.
type Auth interface {
	Authenticate(ctx context.Context, token string) (kubeauth.User, error)
	AuthorizeAccess(ctx context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error)
}

// Patcher patches objects of the global cluster: the campaigns' brakes.
type Patcher interface {
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
}

// Limits bound what the UI's requests and streams hold.
type Limits struct {
	// RequestTimeout bounds each page's reads and reviews, and each stream update's.
	RequestTimeout time.Duration
	// StreamLifetime ends a live stream; the browser opens a new one, authenticated again.
	StreamLifetime time.Duration
	// KeepAlive is how often an idle stream sends a comment, so proxies keep it open.
	KeepAlive time.Duration
	// UpdateInterval is the shortest time between two updates of one stream: changes in
	// between are sent together.
	UpdateInterval time.Duration
	// WriteTimeout bounds each write to a stream: a client that does not read loses it.
	WriteTimeout time.Duration
	// MaxStreams is how many live streams may be open at once; more get 503.
	MaxStreams int
}

// DefaultLimits are the limits of a Server whose Limits are zero.
func DefaultLimits() Limits {
	return Limits{
		RequestTimeout: 10 * time.Second,
		StreamLifetime: 10 * time.Minute,
		KeepAlive:      15 * time.Second,
		UpdateInterval: 500 * time.Millisecond,
		WriteTimeout:   10 * time.Second,
		MaxStreams:     256,
	}
}

// Config is what a Server reads, writes and checks.
type Config struct {
	// Cache reads Sites, Hosts and Campaigns: the manager's informer cache.
	Cache client.Reader
	// Events lists a site's Events, uncached (the manager's API reader).
	Events client.Reader
	// Campaigns patches campaigns (pause, resume, abort) with the controller's identity, once
	// the user's own access was checked.
	Campaigns Patcher
	// Recorder records on a campaign who paused, resumed or aborted it from the UI.
	Recorder events.EventRecorder
	// Auth checks tokens and access.
	Auth Auth
	// Changes tells live pages that something changed (fed by Hub.Watch).
	Changes *Hub
	// Clock tells the time; the real clock when nil.
	Clock clock.WithTicker
	// Log receives what goes wrong on the server's side.
	Log logr.Logger
	// Limits; DefaultLimits when zero.
	Limits Limits
	// Artifacts is the artifact store the releases page shows (*artifacts.Store); nil: the page
	// shows the releases alone.
	Artifacts ArtifactStore
	// Rules narrows the per-site reviews of users who may not get every site of a namespace
	// (*RulesReviewer); nil: every site of such a namespace is reviewed.
	Rules SiteRules
	// Kubeconfigs issues cluster users' kubeconfigs (*kubeconfigapi.Server); nil: the site page
	// offers none.
	Kubeconfigs Kubeconfigs
	// Logs reads site components' logs (*sitelogapi.Server); nil: the site page offers none.
	Logs SiteLogs
}

// SiteLogs reads the recent log lines of a Site's component for a user, checking their grant
// itself; errors are *problem.Problem.
type SiteLogs interface {
	Logs(ctx context.Context, u kubeauth.User, site types.NamespacedName, q sitelogapi.Query) (restv1.SiteLog, error)
}

// Kubeconfigs issues a user a credential of a Site's application cluster, checking their grant
// itself; errors are *problem.Problem.
type Kubeconfigs interface {
	Issue(ctx context.Context, u kubeauth.User, site types.NamespacedName, req restv1.KubeconfigRequest) (restv1.ClusterCredential, error)
}

// Server serves the web UI.
type Server struct {
	cfg     Config
	pages   map[string]*template.Template
	streams chan struct{} // a slot per open stream
	grants  *grantsCache  // per-site decisions of users who may not get every site
}

// New returns a Server; it fails when a template does not parse.
func New(cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, pages: pages, streams: make(chan struct{}, cfg.Limits.MaxStreams),
		grants: newGrantsCache(cfg.Clock)}, nil
}

// Handler serves the UI under Prefix: the login page and the static files to anyone, every
// other page to users with a valid token (cookie), each showing what their RBAC lets them read.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), securityHeaders)
	static, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	r.StaticFS("/ui/static", http.FS(static))
	r.GET("/ui/login", s.loginPage)
	r.POST("/ui/login", sameOrigin, s.login)
	r.POST("/ui/logout", sameOrigin, s.logout)
	ui := r.Group("/ui", s.authenticated)
	ui.GET("/", s.page(overviewPage))
	ui.GET("/sites", s.page(siteListPage))
	ui.GET("/sites/:namespace/:name", s.page(sitePage))
	ui.GET("/clusters", s.page(clusterListPage))
	ui.GET("/campaigns", s.page(campaignListPage))
	ui.GET("/releases", s.page(releaseListPage))
	ui.GET("/campaigns/:namespace/:name", s.page(campaignPage))
	ui.POST("/campaigns/:namespace/:name/:action", sameOrigin, s.campaignAction)
	ui.POST(kubeconfigRoute, sameOrigin, s.kubeconfig)
	ui.GET(siteLogRoute, s.siteLog)
	r.NoRoute(func(c *gin.Context) {
		s.fail(c, &httpError{status: http.StatusNotFound, msg: "no such page: " + c.Request.URL.Path})
	})
	return r
}

// securityHeaders keeps pages out of frames and caches and allows only the UI's own scripts
// and styles.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// The routes the site page's scripts call (static/kubeconfig.js, static/logs.js), relative to
// Prefix: they answer JSON, their refusals (no session, another origin) included.
const (
	kubeconfigRoute = "/sites/:namespace/:name/kubeconfig"
	siteLogRoute    = "/sites/:namespace/:name/log"
)

// scriptRoute says whether the request's route is one of the scripts' JSON routes.
func scriptRoute(c *gin.Context) bool {
	return c.FullPath() == "/ui"+kubeconfigRoute || c.FullPath() == "/ui"+siteLogRoute
}

// httpError is an answer other than 200, with a message for the user.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// view is what every page template gets.
type view struct {
	Title string
	// User is the signed-in user's name; empty on the login page.
	User string
	// Namespace is the namespace the page is about ("" for all).
	Namespace string
	// Path is the page's path, for the namespace form.
	Path string
	Now  time.Time
	// Data is the page's own data; Error the message of an error page.
	Data  any
	Error string
}

// render writes a page, or with live set only its live part.
func (s *Server) render(name string, live bool, v view) ([]byte, error) {
	t, ok := s.pages[name]
	if !ok {
		return nil, fmt.Errorf("no template %q", name)
	}
	root := "layout"
	if live {
		root = "live"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, root, v); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// fail answers with an error page: the status and message of an httpError, or 500.
func (s *Server) fail(c *gin.Context, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		s.cfg.Log.Error(err, "web UI", "method", c.Request.Method, "path", c.Request.URL.Path)
		he = &httpError{status: http.StatusInternalServerError, msg: "internal error; see the global controller's log"}
	}
	if scriptRoute(c) {
		c.AbortWithStatusJSON(he.status, restv1.Error{Message: he.msg})
		return
	}
	v := view{Title: http.StatusText(he.status), Path: c.Request.URL.Path, Now: s.cfg.Clock.Now(), Error: he.msg}
	if u, ok := c.Get(userKey); ok {
		v.User = u.(kubeauth.User).Name
	}
	body, rerr := s.render("error", false, v)
	if rerr != nil {
		s.cfg.Log.Error(rerr, "render the error page")
		c.String(he.status, he.msg)
		return
	}
	c.Data(he.status, "text/html; charset=utf-8", body)
	c.Abort()
}
