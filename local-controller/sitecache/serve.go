package sitecache

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// PathPrefix is where the handler serves content: PathPrefix + "<digest>".
const PathPrefix = "/sha256/"

// ReadersResource is the virtual resource, in API group site.edgefleet.io, whose get verb lets
// a reader read the site cache (RBAC on the site's API server; no CRD backs it).
const ReadersResource = "artifacts"

// Handler serves the published artifacts to the readers readers lets through (the local
// controller gives the kubeauth.Reviewer of the site's API server, Require("get") on
// artifacts.site.edgefleet.io), and to any request of a URL urls signed (URLs.URL) — a
// signature that does not match its digest is refused 403: GET and HEAD of /sha256/<digest>, with Range requests, ETag
// "sha256:<digest>" (If-None-Match, If-Range) and immutable caching. A file whose content no
// longer matches its digest is never served: it is removed and the request answered 503 with
// Retry-After, while it is fetched again. Other methods and paths get a 405 (Allow) or 404,
// like every refusal as restv1.Error JSON. /healthz answers anyone.
func (c *Cache) Handler(readers func(http.Handler) http.Handler, urls URLs) http.Handler {
	content := http.NewServeMux()
	content.HandleFunc("GET "+PathPrefix+"{digest}", c.serve)
	content.HandleFunc("HEAD "+PathPrefix+"{digest}", c.serve)
	content.HandleFunc(PathPrefix+"{digest}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": the site cache answers GET and HEAD only")
	})
	content.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "path "+r.URL.Path+": the site cache serves "+PathPrefix+"<digest> only")
	})
	authenticated := readers(content)
	mux := http.NewServeMux()
	mux.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has(SignatureParam) {
			authenticated.ServeHTTP(w, r)
			return
		}
		digest := strings.TrimPrefix(r.URL.Path, PathPrefix)
		if !urls.signed(digest, r.URL.Query().Get(SignatureParam)) {
			writeError(w, http.StatusForbidden, "the URL's "+SignatureParam+" is not this site cache's for sha256:"+digest+": ask the site for the URL again (its key may have been renewed)")
			return
		}
		content.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (c *Cache) serve(w http.ResponseWriter, r *http.Request) {
	digest := r.PathValue("digest")
	if !digestRE.MatchString(digest) {
		writeError(w, http.StatusBadRequest, "path: "+PathPrefix+"<digest> takes a sha256 of 64 lower-case hex digits")
		return
	}
	f, err := os.Open(c.Path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, "sha256:"+digest+" is not in this site's cache")
		return
	}
	if err != nil {
		c.log.Error(err, "open cached artifact", "sha256", digest)
		writeError(w, http.StatusInternalServerError, "cannot read sha256:"+digest+" from the cache")
		return
	}
	defer f.Close()
	fi, err := c.verify(digest, f)
	if errors.Is(err, ErrCorrupt) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, "sha256:"+digest+" failed verification in this site's cache and is being fetched again")
		return
	}
	if err != nil {
		c.log.Error(err, "verify cached artifact", "sha256", digest)
		writeError(w, http.StatusInternalServerError, "cannot verify sha256:"+digest)
		return
	}
	w.Header().Set("ETag", `"sha256:`+digest+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(restv1.Error{Message: msg})
}
