package artifactapi_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// flakyTransport sends the admin's token and breaks the first request whose method and path
// match after cut bytes of its body (upload) or of its answer (download), like a lost link.
type flakyTransport struct {
	method, pathPrefix string
	cut                int64
	broken             atomic.Bool
}

var errLinkLost = errors.New("link lost")

func (f *flakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+adminToken)
	breakThis := req.Method == f.method && strings.HasPrefix(req.URL.Path, f.pathPrefix) && f.broken.CompareAndSwap(false, true)
	if breakThis && req.Body != nil {
		req.Body = io.NopCloser(io.MultiReader(io.LimitReader(req.Body, f.cut), errReader{}))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !breakThis || req.Body != nil {
		return resp, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(resp.Body, f.cut), errReader{}), resp.Body}
	return resp, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errLinkLost }

func flakyClient(method, pathPrefix string, cut int64) (*artifactclient.Client, *flakyTransport) {
	ft := &flakyTransport{method: method, pathPrefix: pathPrefix, cut: cut}
	// The server may still be saving the broken request when the client comes back (409, busy):
	// the retries span about 25 s, as they would in the CLI.
	return &artifactclient.Client{BaseURL: server.URL, HTTP: &http.Client{Transport: ft}, Retries: 7, RetryDelay: 200 * time.Millisecond}, ft
}

// TestClientResumesBrokenUpload breaks the upload's first PATCH half way: the client asks the
// server for its offset and sends the rest.
func TestClientResumesBrokenUpload(t *testing.T) {
	data, digest := testutil.RandomContent(6<<20+5, 20)
	path := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cl, ft := flakyClient(http.MethodPatch, "/api/v1/uploads/", 4<<20+3)
	var last int64
	a, err := cl.Upload(t.Context(), restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "flaky-upload", Version: "1", Architecture: "amd64"}, path,
		func(done int64) { last = done })
	if err != nil {
		t.Fatal(err)
	}
	if !ft.broken.Load() {
		t.Fatal("the link was never broken: the test proves nothing")
	}
	if a.SHA256 != digest || a.Size != int64(len(data)) || last != int64(len(data)) {
		t.Fatalf("artifact %+v, progress ended at %d", a, last)
	}
}

// TestClientResumesBrokenDownload breaks the download's answer half way: the client continues
// with a Range request and verifies the whole file before renaming it into place.
func TestClientResumesBrokenDownload(t *testing.T) {
	data, digest := testutil.RandomContent(3<<20+11, 21)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "flaky-download", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)

	cl, ft := flakyClient(http.MethodGet, "/api/v1/blobs/", 1<<20+7)
	dst := filepath.Join(t.TempDir(), "pkg.tar.gz")
	if err := cl.Download(t.Context(), digest, dst, nil); err != nil {
		t.Fatal(err)
	}
	if !ft.broken.Load() {
		t.Fatal("the link was never broken: the test proves nothing")
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file differs (err %v)", err)
	}
	if _, err := os.Stat(dst + ".part"); !os.IsNotExist(err) {
		t.Errorf("the partial file is left behind: %v", err)
	}
}

// TestClientRejectsCorruptDownload serves a part file that does not match: the client refuses it.
func TestClientRejectsCorruptDownload(t *testing.T) {
	data, digest := testutil.RandomContent(200_000, 22)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "corrupt-part", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)
	dst := filepath.Join(t.TempDir(), "pkg")
	// A stale part file with wrong bytes: the resumed download appends to it and the sum fails.
	if err := os.WriteFile(dst+".part", bytes.Repeat([]byte{'x'}, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, _ := flakyClient("NONE", "", 0)
	err := cl.Download(t.Context(), digest, dst, nil)
	if err == nil || !strings.Contains(err.Error(), "discarded") {
		t.Fatalf("Download = %v, want a sha256 mismatch", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Error("a corrupt file was renamed into place")
	}
}

// TestClientAbortsSessionOfUnreadableFile uploads a directory, which opens and has a size but
// cannot be read: the client fails with the local error and aborts the session it opened.
func TestClientAbortsSessionOfUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	cl, _ := flakyClient("NONE", "", 0)
	_, err := cl.Upload(t.Context(), restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "unreadable", Version: "1", Architecture: "amd64"}, dir, nil)
	var local *artifactclient.LocalError
	if !errors.As(err, &local) || local.Path != dir {
		t.Fatalf("Upload of a directory = %v, want a local error naming it", err)
	}
	if n, err := database.Collection("uploads").CountDocuments(t.Context(), bson.D{{Key: "spec.name", Value: "unreadable"}}); err != nil || n != 0 {
		t.Errorf("%d upload sessions left behind (%v), want none", n, err)
	}
}
