package artifactapi

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

//go:embed openapi.yaml
var openapi []byte

// Verbs on the virtual resource "artifacts" that RBAC grants.
const (
	verbGet    = "get"
	verbList   = "list"
	verbCreate = "create"
	verbDelete = "delete"
)

// maxJSONBody bounds JSON request bodies.
const maxJSONBody = 1 << 20

// Auth checks callers: the bearer token (Authenticate, through Middleware) and each request's
// permission (Authorize). *kubeauth.Reviewer in production.
type Auth interface {
	Middleware(next http.Handler) http.Handler
	Authorize(ctx context.Context, u kubeauth.User, verb, name string) (bool, string, error)
}

// Server serves the artifact API.
type Server struct {
	Store *artifacts.Store
	Auth  Auth
	Log   logr.Logger
	// BodyReadTimeout is how long an upload's body may send nothing before the upload is cut
	// (408; a session keeps what arrived); DefaultBodyReadTimeout when zero. It bounds each
	// read, not the whole upload.
	BodyReadTimeout time.Duration
}

// Handler returns the API's HTTP handler: /api/v1/openapi.yaml is public, everything else needs
// a valid bearer token.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.HandleMethodNotAllowed = true
	v1 := r.Group("/api/v1")
	v1.POST("/uploads", s.authorized(verbCreate, s.createUpload))
	v1.GET("/uploads/:id", s.authorized(verbCreate, s.getUpload))
	v1.HEAD("/uploads/:id", s.authorized(verbCreate, s.getUpload))
	v1.PATCH("/uploads/:id", s.authorized(verbCreate, s.appendUpload))
	v1.POST("/uploads/:id/finish", s.authorized(verbCreate, s.finishUpload))
	v1.DELETE("/uploads/:id", s.authorized(verbCreate, s.abortUpload))
	v1.POST("/artifacts", s.authorized(verbCreate, s.uploadArtifact))
	v1.GET("/artifacts", s.authorized(verbList, s.listArtifacts))
	v1.GET("/artifacts/:id", s.authorized(verbGet, s.getArtifact))
	v1.DELETE("/artifacts/:id", s.authorized(verbDelete, s.deleteArtifact))
	v1.GET("/artifacts/:id/content", s.authorized(verbGet, s.artifactContent))
	v1.HEAD("/artifacts/:id/content", s.authorized(verbGet, s.artifactContent))
	v1.GET("/blobs/:digest", s.authorized(verbGet, s.blobContent))
	v1.HEAD("/blobs/:digest", s.authorized(verbGet, s.blobContent))
	r.NoRoute(func(c *gin.Context) {
		writeError(c, http.StatusNotFound, restv1.Error{Message: fmt.Sprintf("no such API path: %s %s", c.Request.Method, c.Request.URL.Path)})
	})
	r.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, restv1.Error{Message: fmt.Sprintf("method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path)})
	})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapi)
	})
	mux.Handle("/", s.Auth.Middleware(r))
	return mux
}

// authorized wraps a handler with the RBAC check of verb on the artifact named by the :id
// parameter (or on the collection).
func (s *Server) authorized(verb string, h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		u, ok := kubeauth.UserFrom(c.Request.Context())
		if !ok {
			writeError(c, http.StatusUnauthorized, restv1.Error{Message: "no authenticated user", Field: "Authorization"})
			return
		}
		allowed, reason, err := s.Auth.Authorize(c.Request.Context(), u, verb, c.Param("id"))
		if err != nil {
			s.Log.Error(err, "authorize", "user", u.Name, "verb", verb)
			c.Header("Retry-After", "5")
			writeError(c, http.StatusServiceUnavailable, restv1.Error{Message: "could not check permissions with the API server now; try again"})
			return
		}
		if !allowed {
			msg := fmt.Sprintf("user %q may not %s artifacts.fleet.edgefleet.io", u.Name, verb)
			if reason != "" {
				msg += ": " + reason
			}
			writeError(c, http.StatusForbidden, restv1.Error{Message: msg})
			return
		}
		c.Set("user", u.Name)
		h(c)
	}
}

func writeError(c *gin.Context, status int, e restv1.Error) {
	c.AbortWithStatusJSON(status, e)
}

// fail answers with the status and body an error of the store calls for.
func (s *Server) fail(c *gin.Context, err error) {
	var (
		ve *artifacts.ValidationError
		oe *artifacts.OffsetError
		de *artifacts.DigestError
		ce *artifacts.ConflictError
		re *artifacts.ReferencedError
		te *artifacts.TooLargeError
		se *artifacts.SpaceError
	)
	switch {
	case errors.As(err, &ve):
		writeError(c, http.StatusBadRequest, restv1.Error{Message: ve.Error(), Field: ve.Field})
	case errors.As(err, &oe):
		c.Header(restv1.HeaderUploadOffset, strconv.FormatInt(oe.Expected, 10))
		writeError(c, http.StatusConflict, restv1.Error{Message: oe.Error(), Field: restv1.HeaderUploadOffset, ExpectedOffset: &oe.Expected})
	case errors.As(err, &de):
		writeError(c, http.StatusBadRequest, restv1.Error{Message: de.Error(), Field: "sha256", ExpectedSHA256: de.Expected, ActualSHA256: de.Actual})
	case errors.As(err, &ce):
		writeError(c, http.StatusConflict, restv1.Error{Message: ce.Error()})
	case errors.As(err, &re):
		writeError(c, http.StatusConflict, restv1.Error{Message: re.Error()})
	case errors.As(err, &te):
		writeError(c, http.StatusRequestEntityTooLarge, restv1.Error{Message: te.Error(), Field: sizeField(te.Undeclared)})
	case errors.As(err, &se):
		writeError(c, http.StatusInsufficientStorage, restv1.Error{Message: se.Error(), Field: sizeField(se.Undeclared)})
	case errors.Is(err, artifacts.ErrBusy):
		writeError(c, http.StatusConflict, restv1.Error{Message: err.Error()})
	case errors.Is(err, artifacts.ErrNotFound):
		writeError(c, http.StatusNotFound, restv1.Error{Message: err.Error()})
	case c.Request.Context().Err() != nil && errors.Is(err, c.Request.Context().Err()):
		// The client went away, or the server is stopping, while the request waited (for
		// transfer memory, say): nobody reads the answer, nothing to log.
		writeError(c, http.StatusServiceUnavailable, restv1.Error{Message: err.Error()})
	default:
		s.Log.Error(err, "artifact API", "method", c.Request.Method, "path", c.Request.URL.Path)
		writeError(c, http.StatusInternalServerError, restv1.Error{Message: "internal error; see the global controller's log"})
	}
}

// bindJSON decodes a JSON body strictly; an empty body leaves v as it is when optional.
func bindJSON(c *gin.Context, v any, optional bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxJSONBody))
	if err != nil {
		status := http.StatusBadRequest
		if errors.As(err, new(*http.MaxBytesError)) {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(c, status, restv1.Error{Message: fmt.Sprintf("request body: %v (at most %d bytes)", err, maxJSONBody), Field: "body"})
		return false
	}
	if optional && len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(c, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("request body is not the expected JSON: %v", err), Field: "body"})
		return false
	}
	return true
}

func (s *Server) createUpload(c *gin.Context) {
	var req restv1.CreateUpload
	if !bindJSON(c, &req, false) {
		return
	}
	up, err := s.Store.CreateUpload(c.Request.Context(), req, c.GetString("user"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/uploads/"+up.ID)
	c.Header(restv1.HeaderUploadOffset, "0")
	c.JSON(http.StatusCreated, up)
}

func (s *Server) getUpload(c *gin.Context) {
	up, err := s.Store.GetUpload(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header(restv1.HeaderUploadOffset, strconv.FormatInt(up.Offset, 10))
	if c.Request.Method == http.MethodHead {
		c.Status(http.StatusOK)
		return
	}
	c.JSON(http.StatusOK, up)
}

// sizeField is the field a size refusal names: the declared size, or the body of an upload
// that declared none.
func sizeField(undeclared bool) string {
	if undeclared {
		return "body"
	}
	return "size"
}

func (s *Server) appendUpload(c *gin.Context) {
	raw := c.GetHeader(restv1.HeaderUploadOffset)
	offset, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || offset < 0 {
		writeError(c, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("header %s must be the non-negative byte offset the body starts at, got %q", restv1.HeaderUploadOffset, raw), Field: restv1.HeaderUploadOffset})
		return
	}
	body := s.idleBody(c)
	defer body.done()
	next, err := s.Store.Append(c.Request.Context(), c.Param("id"), offset, body)
	var re *artifacts.ReadError
	if errors.As(err, &re) {
		status, msg := body.problem(c, re)
		s.Log.V(1).Info("upload body broke off", "upload", re.Upload, "read", re.Read, "offset", re.Offset, "error", re.Err.Error())
		c.Header(restv1.HeaderUploadOffset, strconv.FormatInt(re.Offset, 10))
		writeError(c, status, restv1.Error{Message: fmt.Sprintf("%s; the upload keeps what arrived: send the rest with PATCH from offset %d (HEAD tells it)", msg, re.Offset), Field: "body", ExpectedOffset: &re.Offset})
		return
	}
	if err != nil {
		var se *artifacts.SpaceError
		if errors.As(err, &se) {
			c.Header(restv1.HeaderUploadOffset, strconv.FormatInt(next, 10)) // kept, to resume from
		}
		s.fail(c, err)
		return
	}
	c.Header(restv1.HeaderUploadOffset, strconv.FormatInt(next, 10))
	c.Status(http.StatusNoContent)
}

func (s *Server) finishUpload(c *gin.Context) {
	var req restv1.FinishUpload
	if !bindJSON(c, &req, true) {
		return
	}
	a, err := s.Store.Finish(c.Request.Context(), c.Param("id"), req.SHA256)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/artifacts/"+a.ID)
	c.JSON(http.StatusCreated, a)
}

func (s *Server) abortUpload(c *gin.Context) {
	if err := s.Store.Abort(c.Request.Context(), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// uploadArtifact takes a whole artifact in one request: metadata in the query
// (kind, name, version, architecture, description, label=key=value...), the sha256 in the
// X-Content-SHA256 header or trailer. Whatever fails, nothing is stored.
func (s *Server) uploadArtifact(c *gin.Context) {
	q := c.Request.URL.Query()
	req := restv1.CreateUpload{ArtifactSpec: restv1.ArtifactSpec{
		Kind: restv1.ArtifactKind(q.Get("kind")), Name: q.Get("name"), Version: q.Get("version"),
		Architecture: q.Get("architecture"), Description: q.Get("description"),
	}}
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			writeError(c, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("query parameter label must be key=value, got %q", l), Field: "label"})
			return
		}
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[k] = v
	}
	if c.Request.ContentLength >= 0 {
		n := c.Request.ContentLength
		req.Size = &n
	}
	req.SHA256 = c.GetHeader(restv1.HeaderSHA256)
	if _, trailer := c.Request.Trailer[http.CanonicalHeaderKey(restv1.HeaderSHA256)]; req.SHA256 == "" && !trailer {
		writeError(c, http.StatusBadRequest, restv1.Error{Message: "the sha256 of the body must be sent as header " + restv1.HeaderSHA256 + ", or declared as a trailer (Trailer: " + restv1.HeaderSHA256 + ")", Field: restv1.HeaderSHA256})
		return
	}
	ctx := c.Request.Context()
	up, err := s.Store.CreateUpload(ctx, req, c.GetString("user"))
	if err != nil {
		s.fail(c, err)
		return
	}
	body := s.idleBody(c)
	defer body.done()
	a, err := s.uploadWhole(c, up.ID, body)
	if err != nil {
		if abortErr := s.Store.Abort(context.WithoutCancel(ctx), up.ID); abortErr != nil && !errors.Is(abortErr, artifacts.ErrNotFound) {
			s.Log.Error(abortErr, "abort failed single-request upload", "upload", up.ID)
		}
		var re *artifacts.ReadError
		if errors.As(err, &re) {
			status, msg := body.problem(c, re)
			s.Log.V(1).Info("single-request upload body broke off", "upload", re.Upload, "read", re.Read, "error", re.Err.Error())
			writeError(c, status, restv1.Error{Message: msg + "; nothing was stored: send the artifact again, or through an upload session (POST /api/v1/uploads), which resumes after a cut", Field: "body"})
			return
		}
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/artifacts/"+a.ID)
	c.JSON(http.StatusCreated, a)
}

func (s *Server) uploadWhole(c *gin.Context, id string, body io.Reader) (restv1.Artifact, error) {
	if _, err := s.Store.Append(c.Request.Context(), id, 0, body); err != nil {
		return restv1.Artifact{}, err
	}
	// A trailer is set once the body is read; Finish names the field when neither came.
	return s.Store.Finish(c.Request.Context(), id, c.Request.Trailer.Get(restv1.HeaderSHA256))
}

func (s *Server) listArtifacts(c *gin.Context) {
	q := c.Request.URL.Query()
	f := artifacts.Filter{Kind: restv1.ArtifactKind(q.Get("kind")), Name: q.Get("name")}
	if sel := q.Get("labelSelector"); sel != "" {
		ls, err := labels.Parse(sel)
		if err != nil {
			writeError(c, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("query parameter labelSelector: %v", err), Field: "labelSelector"})
			return
		}
		f.Labels = ls
	}
	limit := int64(100)
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 || n > 1000 {
			writeError(c, http.StatusBadRequest, restv1.Error{Message: fmt.Sprintf("query parameter limit must be between 1 and 1000, got %q", raw), Field: "limit"})
			return
		}
		limit = n
	}
	list, err := s.Store.List(c.Request.Context(), f, limit, q.Get("continue"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list)
}

func (s *Server) getArtifact(c *gin.Context) {
	a, err := s.Store.Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

func (s *Server) deleteArtifact(c *gin.Context) {
	if err := s.Store.Delete(c.Request.Context(), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) artifactContent(c *gin.Context) {
	a, err := s.Store.Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.serveBlob(c, a.SHA256, a.Name+"-"+a.Version)
}

func (s *Server) blobContent(c *gin.Context) {
	digest := strings.TrimPrefix(c.Param("digest"), "sha256:")
	if err := artifacts.ValidateSHA256("digest", digest); err != nil {
		s.fail(c, err)
		return
	}
	s.serveBlob(c, digest, "")
}
