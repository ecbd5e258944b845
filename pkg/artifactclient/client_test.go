package artifactclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// blobServer serves one blob at /api/v1/blobs/sha256:DIGEST, with Range, and counts the
// requests of anything. While breakFirst is set, the first blob answer stops half way, like a
// lost link.
type blobServer struct {
	*httptest.Server
	data       []byte
	digest     string
	breakFirst bool
	requests   atomic.Int32
}

func newBlobServer(t *testing.T, size int, breakFirst bool) *blobServer {
	t.Helper()
	data := bytes.Repeat([]byte("edgefleet "), size/10+1)[:size]
	sum := sha256.Sum256(data)
	s := &blobServer{data: data, digest: hex.EncodeToString(sum[:]), breakFirst: breakFirst}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/blobs/sha256:"+s.digest {
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
			return
		}
		if s.breakFirst && n == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(s.data[:len(s.data)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection breaks
		}
		w.Header().Set("ETag", `"sha256:`+s.digest+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(s.data))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestDownloadToMissingDirectoryFailsAtOnce downloads to a directory that does not exist: the
// error names it and comes at once, not after the retries a broken connection gets (here one
// hour before the first: the test's deadline would end them, with a context error).
func TestDownloadToMissingDirectoryFailsAtOnce(t *testing.T) {
	srv := newBlobServer(t, 1000, false)
	var retries []artifactclient.Retry
	cl := &artifactclient.Client{BaseURL: srv.URL, HTTP: srv.Client(), Retries: 8, RetryDelay: time.Hour,
		OnRetry: func(r artifactclient.Retry) { retries = append(retries, r) }}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "no-such-dir")
	path := filepath.Join(dir, "x")
	err := cl.Download(ctx, srv.digest, path, nil)
	if err == nil {
		t.Fatal("download to a missing directory succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) || len(retries) > 0 {
		t.Fatalf("a local error was retried (%d notices): %v", len(retries), err)
	}
	var local *artifactclient.LocalError
	if !errors.As(err, &local) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("error %q (%T) does not say that directory %s does not exist", err, errors.Unwrap(err), dir)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("%d requests for a file that cannot be written, want none", n)
	}
}

// TestDownloadDiskFullFailsAtOnce writes the download to /dev/full (the part file is a link
// to it): the write fails with ENOSPC after the first request, and the download gives up at
// once, naming the file, instead of asking the server again.
func TestDownloadDiskFullFailsAtOnce(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	srv := newBlobServer(t, 100<<10, false)
	var retries []artifactclient.Retry
	cl := &artifactclient.Client{BaseURL: srv.URL, HTTP: srv.Client(), Retries: 8, RetryDelay: time.Millisecond,
		OnRetry: func(r artifactclient.Retry) { retries = append(retries, r) }}
	path := filepath.Join(t.TempDir(), "x")
	if err := os.Symlink("/dev/full", path+".part"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := cl.Download(ctx, srv.digest, path, nil)
	if err == nil {
		t.Fatal("download to a full disk succeeded")
	}
	if n := srv.requests.Load(); n != 1 || len(retries) != 0 {
		t.Errorf("%d requests and %d retries for a full disk, want 1 and none: %v", n, len(retries), err)
	}
	if !strings.Contains(err.Error(), path+".part") || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("error %q does not name the file and the full disk", err)
	}
}

// TestDownloadRetryIsAnnounced breaks the first answer half way: the download resumes, and
// before its pause tells what it retries, why, and when.
func TestDownloadRetryIsAnnounced(t *testing.T) {
	srv := newBlobServer(t, 256<<10, true)
	var mu sync.Mutex
	var retries []artifactclient.Retry
	cl := &artifactclient.Client{BaseURL: srv.URL, HTTP: srv.Client(), Retries: 3, RetryDelay: 10 * time.Millisecond,
		OnRetry: func(r artifactclient.Retry) { mu.Lock(); retries = append(retries, r); mu.Unlock() }}
	path := filepath.Join(t.TempDir(), "x")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := cl.Download(ctx, srv.digest, path, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, srv.data) {
		t.Fatalf("downloaded %d bytes (%v), want the %d served", len(got), err, len(srv.data))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retries) != 1 {
		t.Fatalf("%d retry notices, want 1: %v", len(retries), retries)
	}
	r := retries[0]
	if r.Attempt != 2 || r.Of != 4 || r.After != 10*time.Millisecond || r.Err == nil {
		t.Errorf("notice %+v, want attempt 2 of 4 after 10ms with the error", r)
	}
	msg := r.String()
	for _, want := range []string{"download of sha256:" + srv.digest, path, "in 10ms", "attempt 2 of 4", r.Err.Error()} {
		if !strings.Contains(msg, want) {
			t.Errorf("notice %q does not contain %q", msg, want)
		}
	}
}

// TestUploadOfMissingFileFailsAtOnce uploads a file that does not exist: the error names it,
// and nothing reaches the server.
func TestUploadOfMissingFileFailsAtOnce(t *testing.T) {
	srv := newBlobServer(t, 10, false)
	cl := &artifactclient.Client{BaseURL: srv.URL, HTTP: srv.Client(), Retries: 8, RetryDelay: time.Hour}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "missing.tar.gz")
	_, err := cl.Upload(ctx, restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "x", Version: "1", Architecture: "amd64"}, path, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s that does not exist", err, path)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("%d requests for a file that does not exist, want none", n)
	}
}
