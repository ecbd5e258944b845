package artifactapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.mongodb.org/mongo-driver/v2/bson"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// spaceServer serves the API over a store in a database of its own whose volume has free bytes
// free (a fake of the embedded FerretDB's free space), with the default reserve of 2 GiB.
func spaceServer(t *testing.T, db string, free int64) (*httptest.Server, *artifacts.Store) {
	t.Helper()
	return spaceServerWith(t, db, artifacts.Options{FreeSpace: func() (int64, error) { return free, nil }})
}

// spaceServerWith serves the API over a store with opts in a database of its own.
func spaceServerWith(t *testing.T, db string, opts artifacts.Options) (*httptest.Server, *artifacts.Store) {
	t.Helper()
	d := database.Client().Database(db)
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	s, err := artifacts.Open(t.Context(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&artifactapi.Server{Store: s, Auth: auth, Log: logr.Discard()}).Handler())
	t.Cleanup(srv.Close)
	return srv, s
}

// openUploads lists the store's upload sessions.
func openUploads(t *testing.T, s *artifacts.Store) []restv1.Upload {
	t.Helper()
	ups, err := s.ListUploads(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return ups
}

// postDeclaring sends POST path with a Content-Length of size and no body yet, and reads the
// answer, which must come before any byte of the body.
func postDeclaring(t *testing.T, path string, size int64) (answer, []byte) {
	t.Helper()
	u, _ := url.Parse(server.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
		path, u.Host, adminToken, restv1.HeaderSHA256, strings.Repeat("a", 64), size)
	req, _ := http.NewRequest(http.MethodPost, server.URL+path, nil)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("no answer to an upload declaring %d bytes before its body: %v", size, err)
	}
	return answerOf(resp)
}

// TestUploadOfAPebibyteIsRefused declares a 1 PiB upload, as a session and as a single
// request: both are refused at once with 413, naming the size, the maximum and its flag, and no
// session is left behind.
func TestUploadOfAPebibyteIsRefused(t *testing.T) {
	const pebibyte = 1 << 50
	for _, tt := range []struct {
		name string
		send func(t *testing.T) (answer, []byte)
	}{
		{"session", func(t *testing.T) (answer, []byte) {
			return do(t, adminToken, http.MethodPost, "/api/v1/uploads",
				strings.NewReader(`{"kind":"os-image","name":"pebibyte","version":"1","architecture":"amd64","size":`+strconv.Itoa(pebibyte)+`}`), nil)
		}},
		{"single request", func(t *testing.T) (answer, []byte) {
			return postDeclaring(t, query(restv1.KindOSImage, "pebibyte", "2"), pebibyte)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := tt.send(t)
			expect(t, resp, body, http.StatusRequestEntityTooLarge)
			e := decode[restv1.Error](t, body)
			for _, want := range []string{"upload of 1.0 PiB refused", "up to 64 GiB", "--max-artifact-size"} {
				if !strings.Contains(e.Message, want) {
					t.Errorf("message %q does not say %q", e.Message, want)
				}
			}
			if e.Field != "size" {
				t.Errorf("field %q, want size", e.Field)
			}
		})
	}
	n, err := database.Collection("uploads").CountDocuments(t.Context(), bson.D{{Key: "spec.name", Value: "pebibyte"}})
	if err != nil || n != 0 {
		t.Errorf("%d upload sessions of the refused uploads (%v), want none", n, err)
	}
}

// TestUploadOverFreeSpaceIsRefused gives the store's volume 1 MiB free above the reserve: an
// upload that fits with the open one's declared size is refused with 507 naming the sizes, and
// creates nothing; once the open one is aborted, the same upload goes through.
func TestUploadOverFreeSpaceIsRefused(t *testing.T) {
	srv, s := spaceServer(t, "space-refused", artifacts.DefaultSpaceReserve+1<<20)
	create := func(name string, size int) (answer, []byte) {
		return doAt(t, srv.URL, adminToken, http.MethodPost, "/api/v1/uploads",
			strings.NewReader(fmt.Sprintf(`{"kind":"os-image","name":%q,"version":"1","architecture":"amd64","size":%d}`, name, size)), nil)
	}
	// 600,000 bytes take 800,000 on disk: one fits in 1 MiB, two do not.
	resp, body := create("first", 600_000)
	expect(t, resp, body, http.StatusCreated)
	first := decode[restv1.Upload](t, body)

	resp, body = create("second", 600_000)
	expect(t, resp, body, http.StatusInsufficientStorage)
	e := decode[restv1.Error](t, body)
	for _, want := range []string{"upload of 586 KiB refused", "about 781 KiB", "has 2.0 GiB free", "keeping a 2.0 GiB reserve", "--artifact-space-reserve", "781 KiB for the open uploads"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}
	if e.Field != "size" {
		t.Errorf("field %q, want size", e.Field)
	}
	if ups := openUploads(t, s); len(ups) != 1 || ups[0].ID != first.ID {
		t.Fatalf("upload sessions after the refusal: %+v, want only the first", ups)
	}

	resp, body = doAt(t, srv.URL, adminToken, http.MethodDelete, "/api/v1/uploads/"+first.ID, nil, nil)
	expect(t, resp, body, http.StatusNoContent)
	data, digest := testutil.RandomContent(600_000, 90)
	resp, body = create("second", len(data))
	expect(t, resp, body, http.StatusCreated)
	second := decode[restv1.Upload](t, body)
	resp, body = doAt(t, srv.URL, adminToken, http.MethodPatch, "/api/v1/uploads/"+second.ID, bytes.NewReader(data), map[string]string{restv1.HeaderUploadOffset: "0"})
	expect(t, resp, body, http.StatusNoContent)
	resp, body = doAt(t, srv.URL, adminToken, http.MethodPost, "/api/v1/uploads/"+second.ID+"/finish", strings.NewReader(`{"sha256":"`+digest+`"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	if a := decode[restv1.Artifact](t, body); a.SHA256 != digest || a.Size != int64(len(data)) {
		t.Errorf("artifact = %+v", a)
	}
}

// recordingTransport sends the admin's token and records the method and path of each request.
type recordingTransport struct {
	mu   sync.Mutex
	sent []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.sent = append(r.sent, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return http.DefaultTransport.RoundTrip(req)
}

// TestClientShowsSpaceRefusal uploads, as the CLI does, a file that does not fit: the client
// fails with the server's message as it is, sends no byte of the file, and retries nothing.
func TestClientShowsSpaceRefusal(t *testing.T) {
	srv, s := spaceServer(t, "space-client", artifacts.DefaultSpaceReserve+100<<10)
	path := filepath.Join(t.TempDir(), "image.raw")
	data, _ := testutil.RandomContent(1<<20, 91)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := &recordingTransport{}
	cl := &artifactclient.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: rt}, Retries: 3, RetryDelay: time.Hour}
	_, err := cl.Upload(t.Context(), restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "too-big", Version: "1", Architecture: "amd64"}, path, nil)
	var apiErr *artifactclient.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInsufficientStorage {
		t.Fatalf("Upload = %v, want the server's 507", err)
	}
	if want := "507 Insufficient Storage: upload of 1.0 MiB refused: it takes about 1.3 MiB in the artifact store's database, whose volume has 2.0 GiB free"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not show the server's message %q", err, want)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.sent) != 1 || rt.sent[0] != "POST /api/v1/uploads" {
		t.Errorf("requests sent: %v, want only the session's creation", rt.sent)
	}
	if ups := openUploads(t, s); len(ups) != 0 {
		t.Errorf("upload sessions after the refusal: %+v, want none", ups)
	}
}

// TestClientRefusesHugeFileBeforeReadingIt uploads a sparse file of 1 TiB, over the maximum
// artifact size: the refusal comes at once, before the client reads (hashes) the file, which
// would take many minutes.
func TestClientRefusesHugeFileBeforeReadingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse file of 1 TiB on this file system: %v", err)
	}
	rt := &recordingTransport{}
	cl := &artifactclient.Client{BaseURL: server.URL, HTTP: &http.Client{Transport: rt}, Retries: 3, RetryDelay: time.Hour}
	done := make(chan error, 1)
	go func() {
		_, err := cl.Upload(t.Context(), restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "huge", Version: "1", Architecture: "amd64"}, path, nil)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the upload of a 1 TiB file was not refused within 20 s: the client reads the file before it asks the server")
	}
	var apiErr *artifactclient.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "upload of 1.0 TiB refused") {
		t.Fatalf("Upload = %v, want the server's 413", err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.sent) != 1 || rt.sent[0] != "POST /api/v1/uploads" {
		t.Errorf("requests sent: %v, want only the session's creation", rt.sent)
	}
}

// TestUndeclaredUploadStopsAtTheFreeSpace uploads without declaring a size into a store whose
// volume has 1 MiB free above the reserve, less what the uploads hold (a fake of the volume
// filling): the first 600,000 bytes go in; the next 600,000 are refused with 507 naming the
// offset to resume from, and nothing of them is kept; once there is room, the upload resumes
// from there and finishes.
func TestUndeclaredUploadStopsAtTheFreeSpace(t *testing.T) {
	var s *artifacts.Store
	var room atomic.Int64
	room.Store(1 << 20)
	fakeVolume := func() (int64, error) {
		held, err := s.UploadingBytes(context.Background())
		return artifacts.DefaultSpaceReserve + room.Load() - held*4/3, err
	}
	srv, s := spaceServerWith(t, "space-undeclared", artifacts.Options{FreeSpace: fakeVolume})
	data, digest := testutil.RandomContent(1_200_000, 92)
	resp, body := doAt(t, srv.URL, adminToken, http.MethodPost, "/api/v1/uploads",
		strings.NewReader(`{"kind":"os-image","name":"undeclared","version":"1","architecture":"amd64"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	up := decode[restv1.Upload](t, body)
	patch := func(offset int) (answer, []byte) {
		return doAt(t, srv.URL, adminToken, http.MethodPatch, "/api/v1/uploads/"+up.ID, bytes.NewReader(data[offset:offset+600_000]),
			map[string]string{restv1.HeaderUploadOffset: strconv.Itoa(offset)})
	}
	resp, body = patch(0)
	expect(t, resp, body, http.StatusNoContent)

	resp, body = patch(600_000)
	expect(t, resp, body, http.StatusInsufficientStorage)
	if got := resp.Header.Get(restv1.HeaderUploadOffset); got != "600000" {
		t.Errorf("%s: %q, want 600000, the offset to resume from", restv1.HeaderUploadOffset, got)
	}
	e := decode[restv1.Error](t, body)
	for _, want := range []string{"586 KiB more of an upload of undeclared size refused", "about 781 KiB", "--artifact-space-reserve", "send the rest from offset 600000"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}
	if e.Field != "body" {
		t.Errorf("field %q, want body", e.Field)
	}
	if ups := openUploads(t, s); len(ups) != 1 || ups[0].Offset != 600_000 {
		t.Fatalf("upload sessions after the refusal: %+v, want the one at offset 600000", ups)
	}

	room.Store(4 << 20)
	resp, body = patch(600_000)
	expect(t, resp, body, http.StatusNoContent)
	resp, body = doAt(t, srv.URL, adminToken, http.MethodPost, "/api/v1/uploads/"+up.ID+"/finish", strings.NewReader(`{"sha256":"`+digest+`"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	if a := decode[restv1.Artifact](t, body); a.SHA256 != digest || a.Size != int64(len(data)) {
		t.Errorf("artifact = %+v", a)
	}
}

// TestUndeclaredUploadStopsAtTheMaximumSize uploads 1.5 MiB without declaring a size into a
// store that takes artifacts of up to 1 MiB: 413 naming the maximum and its flag.
func TestUndeclaredUploadStopsAtTheMaximumSize(t *testing.T) {
	srv, _ := spaceServerWith(t, "size-undeclared", artifacts.Options{MaxArtifactSize: 1 << 20})
	resp, body := doAt(t, srv.URL, adminToken, http.MethodPost, "/api/v1/uploads",
		strings.NewReader(`{"kind":"os-image","name":"undeclared-big","version":"1","architecture":"amd64"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	up := decode[restv1.Upload](t, body)
	data, _ := testutil.RandomContent(3<<19, 93)
	resp, body = doAt(t, srv.URL, adminToken, http.MethodPatch, "/api/v1/uploads/"+up.ID, bytes.NewReader(data), map[string]string{restv1.HeaderUploadOffset: "0"})
	expect(t, resp, body, http.StatusRequestEntityTooLarge)
	e := decode[restv1.Error](t, body)
	for _, want := range []string{"it declared no size", "up to 1.0 MiB", "--max-artifact-size"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}
}
