package cmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// artifactAPI serves one artifact's metadata and content and counts the content's requests;
// with breakFirst, the first content answer stops half way, like a lost link.
type artifactAPI struct {
	*httptest.Server
	artifact restv1.Artifact
	data     []byte
	blobGets atomic.Int32
}

func newArtifactAPI(t *testing.T, breakFirst bool) *artifactAPI {
	t.Helper()
	data := bytes.Repeat([]byte("edge-os "), 8<<10)
	sum := sha256.Sum256(data)
	a := &artifactAPI{data: data, artifact: restv1.Artifact{
		ArtifactSpec: restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "edge-os", Version: "1.0", Architecture: "amd64"},
		ID:           "a1", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Created: time.Now(),
	}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/artifacts/a1":
			_ = json.NewEncoder(w).Encode(a.artifact)
		case "/api/v1/blobs/sha256:" + a.artifact.SHA256:
			if a.blobGets.Add(1) == 1 && breakFirst {
				w.Header().Set("Content-Length", strconv.Itoa(len(data)))
				_, _ = w.Write(data[:len(data)/2])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection breaks
			}
			w.Header().Set("ETag", `"sha256:`+a.artifact.SHA256+`"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		default:
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// tokenKubeconfig writes a kubeconfig whose user has a bearer token (what the artifact API
// takes); only the test servers see it.
func tokenKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: g, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t0ken}}]\ncontexts: [{name: c, context: {cluster: g, user: u, namespace: fleet}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runBounded runs the CLI like runAs, but gives up after limit: a command still running then
// is retrying what it should not (the CLI waits 1 s, 2 s, … 128 s between its 8 retries).
func runBounded(t *testing.T, limit time.Duration, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	out := &syncBuffer{}
	select {
	case err := <-start(t, out, append([]string{"--kubeconfig", kubeconfig}, args...)...):
		return out.String(), err
	case <-time.After(limit):
		t.Fatalf("edgefleet %s still runs after %s (retrying?); its output so far: %s", strings.Join(args, " "), limit, out)
		return "", nil
	}
}

// TestArtifactDownloadToMissingDirectory downloads to a directory that does not exist: the
// command fails at once, naming the directory, without retrying or asking for the content.
func TestArtifactDownloadToMissingDirectory(t *testing.T) {
	api := newArtifactAPI(t, false)
	dir := filepath.Join(t.TempDir(), "no-such-dir")
	out, err := runBounded(t, 30*time.Second, tokenKubeconfig(t), "--api-server", api.URL, "-q", "artifact", "download", "a1", "-f", filepath.Join(dir, "x"))
	if err == nil {
		t.Fatalf("download to a missing directory succeeded: %s", out)
	}
	if !strings.Contains(err.Error(), "directory "+dir+" does not exist") {
		t.Errorf("error %q does not say that directory %s does not exist", err, dir)
	}
	if strings.Contains(out, "retrying") || api.blobGets.Load() != 0 {
		t.Errorf("%d content requests, output %q: want none and no retry", api.blobGets.Load(), out)
	}
}

// TestArtifactDownloadSaysWhatItRetries breaks the first content answer: the download resumes
// and verifies, and stderr says what was retried, why, and when.
func TestArtifactDownloadSaysWhatItRetries(t *testing.T) {
	api := newArtifactAPI(t, true)
	file := filepath.Join(t.TempDir(), "edge-os.img")
	out, err := runBounded(t, 30*time.Second, tokenKubeconfig(t), "--api-server", api.URL, "-q", "artifact", "download", "a1", "-f", file)
	if err != nil {
		t.Fatalf("download: %v: %s", err, out)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, api.data) {
		t.Fatalf("downloaded %d bytes (%v), want %d", len(got), err, len(api.data))
	}
	want := "retrying download of sha256:" + api.artifact.SHA256 + " to " + file + " in 1s (attempt 2 of 9): "
	if !strings.Contains(out, want) || !strings.Contains(out, "sha256 "+api.artifact.SHA256+" verified") {
		t.Errorf("output %q does not contain %q and the verification", out, want)
	}
	if n := api.blobGets.Load(); n != 2 {
		t.Errorf("%d content requests, want 2 (the broken one and its resumption)", n)
	}
}
