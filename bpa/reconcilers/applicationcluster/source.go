package applicationcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// siteCache reads packages and charts from the site cache. A package's manifest is read once
// per digest (content-addressed, so it never changes) and kept; archives are streamed to each
// host, which checks the digest again before unpacking.
type siteCache struct {
	http *http.Client

	mu        sync.Mutex
	manifests map[string]*packages.Manifest
}

func newSiteCache(c *http.Client) *siteCache {
	return &siteCache{http: c, manifests: map[string]*packages.Manifest{}}
}

// open GETs url.
func (s *siteCache) open(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("site cache: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("site cache: GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// verified reads all of r (at most limit bytes) and checks its sha256.
func verified(r io.Reader, digest string, limit int64) ([]byte, error) {
	h := sha256.New()
	b, err := io.ReadAll(io.TeeReader(io.LimitReader(r, limit+1), h))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return nil, fmt.Errorf("sha256 is %s, want %s", got, digest)
	}
	return b, nil
}

// pkg is the package of digest at url: its manifest, checked against the whole archive and
// its digest, and a Source that streams it from the site cache. Content of the digest that is
// no valid package is a specError: it never will be one (a broken transfer is not, its digest
// differs).
func (s *siteCache) pkg(ctx context.Context, url, digest string) (install.Package, error) {
	s.mu.Lock()
	m := s.manifests[digest]
	s.mu.Unlock()
	if m == nil {
		body, err := s.open(ctx, url)
		if err != nil {
			return install.Package{}, err
		}
		defer body.Close()
		h := sha256.New()
		var invalid error
		m, invalid = packages.Read(io.TeeReader(body, h))
		if _, err := io.Copy(h, body); err != nil { // whatever gzip, or a refused archive, left unread
			return install.Package{}, fmt.Errorf("package %s: %w", digest, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != digest {
			return install.Package{}, fmt.Errorf("package %s: the site cache served content of sha256 %s", digest, got)
		}
		if invalid != nil {
			return install.Package{}, &specError{fmt.Errorf("spec.packages: sha256:%s is not a valid package (docs/packages.md): %w; upload a valid one and roll out a Release naming it", digest, invalid)}
		}
		s.mu.Lock()
		s.manifests[digest] = m
		s.mu.Unlock()
	}
	var src sshexec.Source = func() (io.ReadCloser, error) { return s.open(ctx, url) }
	return install.Package{Manifest: m, Digest: digest, Archive: src}, nil
}

// maxChart bounds a chart archive read into memory.
const maxChart = 64 << 20

// chart is the chart archive of digest at url, verified.
func (s *siteCache) chart(ctx context.Context, url, digest string) ([]byte, error) {
	body, err := s.open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := verified(body, digest, maxChart)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", digest, err)
	}
	return b, nil
}
