package artifactapi_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// answer is what the server answered; the body is read and closed.
type answer struct {
	StatusCode    int
	Header        http.Header
	ContentLength int64
	what          string
}

func answerOf(resp *http.Response) (answer, []byte) {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{StatusCode: resp.StatusCode, Header: resp.Header, ContentLength: resp.ContentLength,
		what: resp.Request.Method + " " + resp.Request.URL.Path}, b
}

// do sends a request as the holder of token and returns the answer with its body read.
func do(t testing.TB, token, method, path string, body io.Reader, header map[string]string) (answer, []byte) {
	t.Helper()
	return doAt(t, server.URL, token, method, path, body, header)
}

// doAt is do with the server at base.
func doAt(t testing.TB, base, token, method, path string, body io.Reader, header map[string]string) (answer, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return answerOf(resp)
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, b)
	}
	return v
}

func expect(t *testing.T, resp answer, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s = %d, want %d: %s", resp.what, resp.StatusCode, status, body)
	}
}

func query(kind restv1.ArtifactKind, name, version string, labels ...string) string {
	q := url.Values{"kind": {string(kind)}, "name": {name}, "version": {version}, "architecture": {"amd64"}}
	for _, l := range labels {
		q.Add("label", l)
	}
	return "/api/v1/artifacts?" + q.Encode()
}

// uploadWithTrailer sends content in one request with its sha256 as a trailer, computed while
// sending, the way a streaming client does.
func uploadWithTrailer(t *testing.T, path string, data []byte, digest string) (answer, []byte) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Trailer = http.Header{restv1.HeaderSHA256: nil}
	go func() {
		for off := 0; off < len(data); off += 1 << 20 {
			if _, err := pw.Write(data[off:min(off+1<<20, len(data))]); err != nil {
				return
			}
		}
		req.Trailer.Set(restv1.HeaderSHA256, digest)
		pw.Close()
	}()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return answerOf(resp)
}

func TestLargeRoundTripWithTrailerDigest(t *testing.T) {
	data, digest := testutil.RandomContent(24<<20+123, 1)
	resp, body := uploadWithTrailer(t, query(restv1.KindOSImage, "debian-bookworm", "12.8"), data, digest)
	expect(t, resp, body, http.StatusCreated)
	a := decode[restv1.Artifact](t, body)
	if a.SHA256 != digest || a.Size != int64(len(data)) || a.Creator != "system:serviceaccount:default:admin" {
		t.Fatalf("artifact = %+v", a)
	}
	resp, got := do(t, viewerToken, http.MethodGet, "/api/v1/artifacts/"+a.ID+"/content", nil, nil)
	expect(t, resp, got, http.StatusOK)
	if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != digest {
		t.Fatal("downloaded content has another sha256")
	}
	if etag := resp.Header.Get("ETag"); etag != `"sha256:`+digest+`"` {
		t.Errorf("ETag = %q", etag)
	}
	resp, _ = do(t, viewerToken, http.MethodHead, "/api/v1/blobs/sha256:"+digest, nil, nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(data)) {
		t.Errorf("HEAD blob = %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestRangeAndConditionalDownload(t *testing.T) {
	data, digest := testutil.RandomContent(1<<20, 2)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "range", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)
	for _, r := range []struct {
		header     string
		start, end int
	}{{"bytes=0-0", 0, 0}, {"bytes=131000-131100", 131000, 131100}, {"bytes=-10", len(data) - 10, len(data) - 1}, {"bytes=1048000-", 1048000, len(data) - 1}} {
		resp, got := do(t, viewerToken, http.MethodGet, "/api/v1/blobs/"+digest, nil, map[string]string{"Range": r.header})
		expect(t, resp, got, http.StatusPartialContent)
		if !bytes.Equal(got, data[r.start:r.end+1]) {
			t.Errorf("Range %s: wrong bytes", r.header)
		}
		if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes %d-%d/%d", r.start, r.end, len(data)) {
			t.Errorf("Range %s: Content-Range %q", r.header, cr)
		}
	}
	resp, got := do(t, viewerToken, http.MethodGet, "/api/v1/blobs/"+digest, nil, map[string]string{"Range": "bytes=2000000-"})
	expect(t, resp, got, http.StatusRequestedRangeNotSatisfiable)
	// RFC 9110 14.1.1: a suffix-length of 0 selects nothing.
	resp, got = do(t, viewerToken, http.MethodGet, "/api/v1/blobs/"+digest, nil, map[string]string{"Range": "bytes=-0"})
	expect(t, resp, got, http.StatusRequestedRangeNotSatisfiable)
	if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", len(data)) {
		t.Errorf("Range bytes=-0: Content-Range %q", cr)
	}
	// The refusal is JSON, as its Content-Type says, and no attachment of the content.
	if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); !strings.HasPrefix(ct, "application/json") || cd != "" {
		t.Errorf("Range bytes=-0: Content-Type %q, Content-Disposition %q; want JSON, none", ct, cd)
	}
	if e := decode[restv1.Error](t, got); e.Field != "Range" {
		t.Errorf("Range bytes=-0: answer %+v, want one naming the Range", e)
	}
	resp, got = do(t, viewerToken, http.MethodGet, "/api/v1/blobs/"+digest, nil, map[string]string{"If-None-Match": `"sha256:` + digest + `"`})
	expect(t, resp, got, http.StatusNotModified)
}

// cutUpload sends a PATCH whose body stops half way: the connection closes after n bytes of
// the announced length, like a client killed mid-transfer.
func cutUpload(t *testing.T, id string, offset int64, data []byte, n int) {
	t.Helper()
	u, _ := url.Parse(server.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PATCH /api/v1/uploads/%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s: %d\r\nContent-Length: %d\r\n\r\n",
		id, u.Host, adminToken, restv1.HeaderUploadOffset, offset, len(data))
	if _, err := conn.Write(data[:n]); err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestResumableUploadSurvivesACut(t *testing.T) {
	data, digest := testutil.RandomContent(9<<20+77, 3)
	resp, body := do(t, adminToken, http.MethodPost, "/api/v1/uploads",
		strings.NewReader(`{"kind":"helm-chart","name":"cilium","version":"1.18.0","architecture":"noarch","labels":{"edgefleet.io/layer":"cni"}}`), nil)
	expect(t, resp, body, http.StatusCreated)
	up := decode[restv1.Upload](t, body)

	cutUpload(t, up.ID, 0, data, 5<<20+1000)
	// The server keeps what arrived; ask where to continue.
	var offset int64
	testutil.Eventually(t, 30*time.Second, func() error { // the server saves after the client is gone
		resp, _ = do(t, adminToken, http.MethodHead, "/api/v1/uploads/"+up.ID, nil, nil)
		offset, _ = strconv.ParseInt(resp.Header.Get(restv1.HeaderUploadOffset), 10, 64)
		if offset != 5<<20+1000 {
			return fmt.Errorf("after the cut the upload is at offset %d, want the %d bytes sent", offset, 5<<20+1000)
		}
		return nil
	})
	// A chunk at the wrong offset is refused with the right one.
	resp, body = do(t, adminToken, http.MethodPatch, "/api/v1/uploads/"+up.ID, bytes.NewReader(data[:10]), map[string]string{restv1.HeaderUploadOffset: "0"})
	expect(t, resp, body, http.StatusConflict)
	if e := decode[restv1.Error](t, body); e.ExpectedOffset == nil || *e.ExpectedOffset != offset || resp.Header.Get(restv1.HeaderUploadOffset) != strconv.FormatInt(offset, 10) {
		t.Errorf("409 does not give the right offset: %s", body)
	}
	resp, body = do(t, adminToken, http.MethodPatch, "/api/v1/uploads/"+up.ID, bytes.NewReader(data[offset:]), map[string]string{restv1.HeaderUploadOffset: strconv.FormatInt(offset, 10)})
	expect(t, resp, body, http.StatusNoContent)
	resp, body = do(t, adminToken, http.MethodPost, "/api/v1/uploads/"+up.ID+"/finish", strings.NewReader(`{"sha256":"`+digest+`"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	if a := decode[restv1.Artifact](t, body); a.SHA256 != digest || a.Labels["edgefleet.io/layer"] != "cni" {
		t.Fatalf("artifact = %+v", a)
	}
}

func TestWrongDigestStoresNothing(t *testing.T) {
	data, digest := testutil.RandomContent(300_000, 4)
	_, wrong := testutil.RandomContent(1, 5)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "wrong-digest", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: wrong})
	expect(t, resp, body, http.StatusBadRequest)
	e := decode[restv1.Error](t, body)
	if e.ExpectedSHA256 != wrong || e.ActualSHA256 != digest || e.Field != "sha256" {
		t.Errorf("error does not give both digests: %s", body)
	}
	resp, body = do(t, adminToken, http.MethodGet, "/api/v1/artifacts?name=wrong-digest", nil, nil)
	expect(t, resp, body, http.StatusOK)
	if l := decode[restv1.ArtifactList](t, body); len(l.Items) != 0 {
		t.Errorf("an artifact was stored: %+v", l.Items)
	}
	resp, body = do(t, adminToken, http.MethodHead, "/api/v1/blobs/"+digest, nil, nil)
	expect(t, resp, body, http.StatusNotFound)
}

func TestConcurrentSameBytesShareOneBlob(t *testing.T) {
	data, digest := testutil.RandomContent(2<<20, 6)
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			resp, body := uploadWithTrailer(t, query(restv1.KindOSImage, "twin", strconv.Itoa(i)), data, digest)
			if resp.StatusCode == http.StatusCreated {
				ids[i] = decode[restv1.Artifact](t, body).ID
			} else {
				t.Errorf("upload %d: %d %s", i, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	n, err := blobCount(t, digest)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || ids[0] == ids[1] {
		t.Errorf("%d blobs for one content (artifacts %v), want 1", n, ids)
	}
}

func TestAuthentication(t *testing.T) {
	for _, tt := range []struct {
		name, header, inMessage string
	}{
		{"no token", "", "Authorization"},
		{"not bearer", "Basic YWRtaW46cGFzcw==", "Bearer"},
		{"bad token", "Bearer not-a-token", "rejected"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.header != "" {
				h["Authorization"] = tt.header
			}
			resp, body := do(t, "", http.MethodGet, "/api/v1/artifacts", nil, h)
			expect(t, resp, body, http.StatusUnauthorized)
			if e := decode[restv1.Error](t, body); !strings.Contains(e.Message, tt.inMessage) {
				t.Errorf("401 message %q does not mention %q", e.Message, tt.inMessage)
			}
		})
	}
	resp, body := do(t, "", http.MethodGet, "/api/v1/openapi.yaml", nil, nil)
	expect(t, resp, body, http.StatusOK)
	if !strings.Contains(string(body), "openapi: 3.0.3") {
		t.Error("openapi.yaml is not served")
	}
	// Every value is given: a plain scalar in a flow mapping ends at its first ", ", so a
	// description with a comma, unquoted, becomes keys without values.
	var doc any
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var nulls func(v any, path string)
	nulls = func(v any, path string) {
		switch v := v.(type) {
		case nil:
			t.Errorf("openapi.yaml: %s has no value (quote a text with a comma in it)", path)
		case map[string]any:
			for k, e := range v {
				nulls(e, path+"/"+k)
			}
		case []any:
			for i, e := range v {
				nulls(e, fmt.Sprintf("%s/%d", path, i))
			}
		}
	}
	nulls(doc, "")
}

func TestAuthorization(t *testing.T) {
	for _, tt := range []struct {
		name   string
		token  string
		method string
		path   string
		body   string
		status int
	}{
		{"viewer lists", viewerToken, http.MethodGet, "/api/v1/artifacts", "", http.StatusOK},
		{"viewer may not upload", viewerToken, http.MethodPost, "/api/v1/uploads", `{}`, http.StatusForbidden},
		{"viewer may not delete", viewerToken, http.MethodDelete, "/api/v1/artifacts/x", "", http.StatusForbidden},
		{"nobody may not list", nobodyToken, http.MethodGet, "/api/v1/artifacts", "", http.StatusForbidden},
		{"nobody may not download", nobodyToken, http.MethodGet, "/api/v1/blobs/sha256:" + strings.Repeat("0", 64), "", http.StatusForbidden},
		{"admin gets 404 for a missing artifact", adminToken, http.MethodDelete, "/api/v1/artifacts/missing", "", http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.token, tt.method, tt.path, strings.NewReader(tt.body), nil)
			expect(t, resp, body, tt.status)
			if tt.status == http.StatusForbidden && !strings.Contains(decode[restv1.Error](t, body).Message, "may not") {
				t.Errorf("403 does not say what is not allowed: %s", body)
			}
		})
	}
}

func TestBadRequestsNameTheField(t *testing.T) {
	for _, tt := range []struct {
		name, method, path, body string
		header                   map[string]string
		field                    string
	}{
		{"unknown kind", http.MethodPost, "/api/v1/uploads", `{"kind":"rpm","name":"a","version":"1","architecture":"amd64"}`, nil, "kind"},
		{"unknown JSON field", http.MethodPost, "/api/v1/uploads", `{"kind":"os-image","title":"a"}`, nil, "body"},
		{"bad sha256", http.MethodPost, "/api/v1/uploads", `{"kind":"os-image","name":"a","version":"1","architecture":"amd64","sha256":"xyz"}`, nil, "sha256"},
		{"no digest on single upload", http.MethodPost, query(restv1.KindOSImage, "nodigest", "1"), "abc", nil, restv1.HeaderSHA256},
		{"bad label", http.MethodPost, query(restv1.KindOSImage, "badlabel", "1", "novalue"), "abc", map[string]string{restv1.HeaderSHA256: strings.Repeat("a", 64)}, "label"},
		{"bad selector", http.MethodGet, "/api/v1/artifacts?labelSelector=a%20in%20b", "", nil, "labelSelector"},
		{"bad limit", http.MethodGet, "/api/v1/artifacts?limit=0", "", nil, "limit"},
		{"bad digest", http.MethodGet, "/api/v1/blobs/sha256:xyz", "", nil, "digest"},
		{"missing offset", http.MethodPatch, "/api/v1/uploads/x", "abc", nil, restv1.HeaderUploadOffset},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, adminToken, tt.method, tt.path, strings.NewReader(tt.body), tt.header)
			expect(t, resp, body, http.StatusBadRequest)
			if e := decode[restv1.Error](t, body); e.Field != tt.field || !strings.Contains(e.Message, strings.Split(tt.field, "-")[0]) {
				t.Errorf("error %+v does not name %s", e, tt.field)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	data, digest := testutil.RandomContent(1000, 7)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "to-delete", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)
	id := decode[restv1.Artifact](t, body).ID
	resp, body = do(t, adminToken, http.MethodDelete, "/api/v1/artifacts/"+id, nil, nil)
	expect(t, resp, body, http.StatusNoContent)
	resp, body = do(t, adminToken, http.MethodGet, "/api/v1/artifacts/"+id, nil, nil)
	expect(t, resp, body, http.StatusNotFound)
	resp, body = do(t, adminToken, http.MethodGet, "/api/v1/blobs/"+digest, nil, nil)
	expect(t, resp, body, http.StatusNotFound)
}

// TestDeleteReferencedArtifactConflicts checks that an artifact a Release names cannot be
// deleted (409 naming the release), even just after the Release was made, until the release is
// gone.
func TestDeleteReferencedArtifactConflicts(t *testing.T) {
	data, digest := testutil.RandomContent(1000, 8)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "referenced", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)
	id := decode[restv1.Artifact](t, body).ID
	ns := global.Namespace(t)
	rel := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-1.36.3"},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: digest}},
	}
	if err := global.Client.Create(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
	// At once: the store asks the API server, not a cache that may not have the Release yet.
	resp, body = do(t, adminToken, http.MethodDelete, "/api/v1/artifacts/"+id, nil, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "Release/"+ns+"/edge-1.36.3") {
		t.Fatalf("delete just after the Release was made answered %d %s, want 409 naming the release", resp.StatusCode, body)
	}
	if err := global.Client.Delete(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, body := do(t, adminToken, http.MethodDelete, "/api/v1/artifacts/"+id, nil, nil)
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("delete answered %d %s, want 204 once the release is gone", resp.StatusCode, body)
		}
		return nil
	})
}

// TestBinaryPackageContentChecked: a binary-package whose bytes are not a package, or a package
// of another name, is refused with a 400 naming the content, and nothing is stored; a valid
// package is taken.
func TestBinaryPackageContentChecked(t *testing.T) {
	junk, junkDigest := testutil.RandomContent(200_000, 41)
	other, otherDigest, err := builders.StandInPackage("someone-else", "1", "amd64", 1000, 42)
	if err != nil {
		t.Fatal(err)
	}
	// A manifest no BPA could place: a host role clusters do not have (packages.Build refuses
	// to write one, so the archive is made by hand).
	gpu, gpuDigest := manifestOnlyPackage(t, "apiVersion: "+packages.APIVersion+"\nname: gpu-only\nversion: \"1\"\narchitecture: amd64\nhosts: gpu\n")
	for _, tt := range []struct {
		name, digest, want string
		data               []byte
	}{
		{"not-a-package", junkDigest, "content: not a binary package", junk},
		{"renamed", otherDigest, `the package's manifest names package "someone-else", the artifact "renamed"`, other},
		{"gpu-only", gpuDigest, `manifest: hosts "gpu": want "all", "control-plane" or "worker"`, gpu},
	} {
		resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindBinaryPackage, tt.name, "1"), bytes.NewReader(tt.data), map[string]string{restv1.HeaderSHA256: tt.digest})
		expect(t, resp, body, http.StatusBadRequest)
		if e := decode[restv1.Error](t, body); e.Field != "content" || !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: error %s, want field content saying %q", tt.name, body, tt.want)
		}
		resp, body = do(t, adminToken, http.MethodGet, "/api/v1/artifacts?name="+tt.name, nil, nil)
		expect(t, resp, body, http.StatusOK)
		if l := decode[restv1.ArtifactList](t, body); len(l.Items) != 0 {
			t.Errorf("%s: an artifact was stored: %+v", tt.name, l.Items)
		}
		resp, body = do(t, adminToken, http.MethodHead, "/api/v1/blobs/"+tt.digest, nil, nil)
		expect(t, resp, body, http.StatusNotFound)
	}
	good, goodDigest, err := builders.StandInPackage("good", "1", "amd64", 1000, 43)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindBinaryPackage, "good", "1"), bytes.NewReader(good), map[string]string{restv1.HeaderSHA256: goodDigest})
	expect(t, resp, body, http.StatusCreated)
}

// manifestOnlyPackage is a package archive (gzip, tar) holding only manifest, and its sha256.
func manifestOnlyPackage(t *testing.T, manifest string) ([]byte, string) {
	t.Helper()
	var out bytes.Buffer
	gz := gzip.NewWriter(&out)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: packages.ManifestFile, Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, manifest); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(out.Bytes())
	return out.Bytes(), hex.EncodeToString(sum[:])
}
