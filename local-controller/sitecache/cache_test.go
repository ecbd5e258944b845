package sitecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// fakeFetcher serves content from memory, the way artifactclient.Client does: it writes path
// only with the complete content. It counts the downloads.
type fakeFetcher struct {
	content map[string][]byte
	calls   atomic.Int32
	delay   time.Duration
}

func (f *fakeFetcher) Download(_ context.Context, digest, path string, _ artifactclient.Progress) error {
	f.calls.Add(1)
	time.Sleep(f.delay)
	b, ok := f.content[digest]
	if !ok {
		return fmt.Errorf("404 Not Found: sha256:%s", digest)
	}
	return os.WriteFile(path, b, 0o644)
}

func content(s string) (string, []byte) {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), []byte(s)
}

func newCache(t *testing.T) (*Cache, *fakeFetcher, []string) {
	t.Helper()
	c, err := New(t.TempDir(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFetcher{content: map[string][]byte{}}
	var digests []string
	for _, s := range []string{"the first artifact", "the second artifact, a little longer", "third"} {
		d, b := content(s)
		f.content[d] = b
		digests = append(digests, d)
	}
	return c, f, digests
}

func TestFetchPublishesOnceAndSharesConcurrentTransfers(t *testing.T) {
	c, f, ds := newCache(t)
	f.delay = 50 * time.Millisecond
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Fetch(ctx, ds[0], f); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("5 concurrent fetches of one digest made %d downloads, want 1", n)
	}
	e, err := c.Fetch(ctx, ds[0], f)
	if err != nil {
		t.Fatal(err)
	}
	if e.Size != int64(len(f.content[ds[0]])) || f.calls.Load() != 1 {
		t.Fatalf("second fetch: entry %+v after %d downloads; want size %d and no new download", e, f.calls.Load(), len(f.content[ds[0]]))
	}
	if _, err := os.Stat(c.partPath(ds[0])); !os.IsNotExist(err) {
		t.Fatalf("incoming file left behind after publication: %v", err)
	}
	if _, err := c.Fetch(ctx, "0000000000000000000000000000000000000000000000000000000000000000", f); err == nil {
		t.Fatal("fetch of a digest the fetcher does not have succeeded")
	}
	if _, _, err := c.Check("not-a-digest"); err == nil {
		t.Fatal("Check accepted a malformed digest")
	}
}

// fakeReaders stands for the kubeauth guard: it lets through requests that say
// "Authorization: Bearer reader" and answers others 401.
func fakeReaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer reader" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// testURLs are URLs signed with a key made of seed.
func testURLs(t *testing.T, seed string) URLs {
	t.Helper()
	u, err := NewURLs("https://cache.site:8180/", []byte(strings.Repeat(seed, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// readerGet GETs url as a reader fakeReaders lets through.
func readerGet(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer reader")
	return http.DefaultClient.Do(req)
}

func TestServe(t *testing.T) {
	c, f, ds := newCache(t)
	if _, err := c.Fetch(context.Background(), ds[1], f); err != nil {
		t.Fatal(err)
	}
	urls := testURLs(t, "k")
	srv := httptest.NewServer(c.Handler(fakeReaders, urls))
	defer srv.Close()
	body := f.content[ds[1]]
	// query is the signature part of a URL signed by u.
	query := func(u URLs, digest string) string {
		_, q, _ := strings.Cut(u.URL(digest), "?")
		return "?" + q
	}
	other := testURLs(t, "another site's key")
	etag := `"sha256:` + ds[1] + `"`
	tests := []struct {
		name       string
		method     string
		digest     string
		header     map[string]string
		wantStatus int
		wantBody   string
		query      string // a signed URL's, read without a credential
	}{
		{"full", http.MethodGet, ds[1], nil, http.StatusOK, string(body), ""},
		{"head", http.MethodHead, ds[1], nil, http.StatusOK, "", ""},
		{"range", http.MethodGet, ds[1], map[string]string{"Range": "bytes=4-9"}, http.StatusPartialContent, string(body[4:10]), ""},
		{"open range", http.MethodGet, ds[1], map[string]string{"Range": "bytes=20-"}, http.StatusPartialContent, string(body[20:]), ""},
		{"if-range matching", http.MethodGet, ds[1], map[string]string{"Range": "bytes=4-9", "If-Range": etag}, http.StatusPartialContent, string(body[4:10]), ""},
		{"if-range other", http.MethodGet, ds[1], map[string]string{"Range": "bytes=4-9", "If-Range": `"sha256:other"`}, http.StatusOK, string(body), ""},
		{"not modified", http.MethodGet, ds[1], map[string]string{"If-None-Match": etag}, http.StatusNotModified, "", ""},
		{"unsatisfiable", http.MethodGet, ds[1], map[string]string{"Range": "bytes=1000-"}, http.StatusRequestedRangeNotSatisfiable, "", ""},
		{"not cached", http.MethodGet, ds[2], nil, http.StatusNotFound, "", ""},
		{"bad digest", http.MethodGet, "ABC", nil, http.StatusBadRequest, "", ""},
		{"not a reader", http.MethodGet, ds[1], map[string]string{"Authorization": "Bearer stranger"}, http.StatusUnauthorized, "", ""},
		{"signed, no credential", http.MethodGet, ds[1], nil, http.StatusOK, string(body), query(urls, ds[1])},
		{"signed, a range", http.MethodGet, ds[1], map[string]string{"Range": "bytes=4-9"}, http.StatusPartialContent, string(body[4:10]), query(urls, ds[1])},
		{"signed for another digest", http.MethodGet, ds[1], nil, http.StatusForbidden, "", query(urls, ds[2])},
		{"signed with another key", http.MethodGet, ds[1], nil, http.StatusForbidden, "", query(other, ds[1])},
		{"signature garbled", http.MethodGet, ds[1], nil, http.StatusForbidden, "", "?signature=zz"},
		{"signature empty, with a credential", http.MethodGet, ds[1], map[string]string{"Authorization": "Bearer reader"}, http.StatusForbidden, "", "?signature="},
		{"signed, not cached", http.MethodGet, ds[2], nil, http.StatusNotFound, "", query(urls, ds[2])},
		{"another method", http.MethodPut, ds[1], nil, http.StatusMethodNotAllowed, "", ""},
		{"a path below a digest", http.MethodGet, ds[1] + "/x", nil, http.StatusNotFound, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+PathPrefix+tt.digest+tt.query, nil)
			if tt.query == "" {
				req.Header.Set("Authorization", "Bearer reader")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, got)
			}
			if tt.wantBody != "" && string(got) != tt.wantBody {
				t.Fatalf("body %q, want %q", got, tt.wantBody)
			}
			// The cache's refusals are restv1.Error JSON (not the 401 of the fake readers, nor
			// the 416 of http.ServeContent, which says text/plain).
			var e restv1.Error
			if s := tt.wantStatus; (s == 400 || s == 403 || s == 404 || s == 405) && (resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(got, &e) != nil || e.Message == "") {
				t.Fatalf("refusal %s: %s, want restv1.Error JSON", resp.Header.Get("Content-Type"), got)
			}
			if tt.wantStatus == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Fatalf("405 with Allow %q, want GET, HEAD", resp.Header.Get("Allow"))
			}
			if tt.wantStatus < 300 && resp.Header.Get("ETag") != etag {
				t.Fatalf("ETag %q, want %q", resp.Header.Get("ETag"), etag)
			}
			if tt.method == http.MethodHead && resp.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
				t.Fatalf("HEAD Content-Length %q, want %d", resp.Header.Get("Content-Length"), len(body))
			}
		})
	}
}

func TestCorruptedFileIsNeverServedAndIsFetchedAgain(t *testing.T) {
	c, f, ds := newCache(t)
	var reported []string
	c.OnCorrupt = func(d string) { reported = append(reported, d) }
	ctx := context.Background()
	if _, err := c.Fetch(ctx, ds[1], f); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler(fakeReaders, testURLs(t, "k")))
	defer srv.Close()

	// Flip bytes in place: same size, new modification time.
	p := c.Path(ds[1])
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("XX"), 3); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	// File times tick at the kernel's clock resolution: make the write look as late as it
	// would be in real life, not within the tick of the fetch.
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}

	resp, err := readerGet(srv.URL + PathPrefix + ds[1])
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("corrupted file answered %d %q, want 503 with Retry-After", resp.StatusCode, got)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("corrupted file still in the cache: %v", err)
	}
	if len(reported) != 1 || reported[0] != ds[1] {
		t.Fatalf("OnCorrupt got %v, want [%s]", reported, ds[1])
	}
	if _, ok, _ := c.Check(ds[1]); ok {
		t.Fatal("Check reports a removed file as cached")
	}
	if _, err := c.Fetch(ctx, ds[1], f); err != nil {
		t.Fatal(err)
	}
	if f.calls.Load() != 2 {
		t.Fatalf("%d downloads, want 2 (the refetch)", f.calls.Load())
	}
	resp, err = readerGet(srv.URL + PathPrefix + ds[1])
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != string(f.content[ds[1]]) {
		t.Fatalf("after refetch: %d %q", resp.StatusCode, got)
	}
}

func TestVerifyAllFindsCorruptionThatKeptSizeAndTime(t *testing.T) {
	c, f, ds := newCache(t)
	ctx := context.Background()
	for _, d := range ds {
		if _, err := c.Fetch(ctx, d, f); err != nil {
			t.Fatal(err)
		}
	}
	p := c.Path(ds[0])
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("!"), 0); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	n, err := c.VerifyAll(ctx)
	if err != nil || n != 1 {
		t.Fatalf("VerifyAll = %d, %v; want 1 corrupted", n, err)
	}
	entries, err := c.List()
	if err != nil || len(entries) != 2 {
		t.Fatalf("after VerifyAll the cache lists %v (%v), want the 2 intact artifacts", entries, err)
	}
}

func TestKeepRemovesWhatNoSetNeeds(t *testing.T) {
	c, f, ds := newCache(t)
	ctx := context.Background()
	for _, d := range ds[:2] {
		if _, err := c.Fetch(ctx, d, f); err != nil {
			t.Fatal(err)
		}
	}
	// A broken transfer of the third, and of a digest nobody wants.
	for _, d := range []string{ds[2], "1111111111111111111111111111111111111111111111111111111111111111"} {
		if err := os.WriteFile(c.partPath(d)+".part", []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := c.Keep(map[string]bool{ds[1]: true, ds[2]: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != ds[0] {
		t.Fatalf("removed %v, want [%s]", removed, ds[0])
	}
	left, _ := filepath.Glob(filepath.Join(c.dir, "*", "*"))
	want := map[string]bool{c.Path(ds[1]): true, c.partPath(ds[2]) + ".part": true}
	if len(left) != len(want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	for _, p := range left {
		if !want[p] {
			t.Fatalf("left %v, want %v", left, want)
		}
	}
}
