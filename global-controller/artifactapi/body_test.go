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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// partialRequest sends a request announcing Content-Length len(data) but only the first n
// bytes of data, then, when hangUp, closes its sending side (the body ends early) or else
// sends nothing more (a stalled client), and returns the answer. The client waits for it for
// a minute at most, so that a server that never answers fails the test rather than hanging it.
func partialRequest(t *testing.T, base, method, path string, header map[string]string, data []byte, n int, hangUp bool) (answer, []byte) {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n", method, path, u.Host, adminToken, len(data))
	for k, v := range header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n")
	req.Write(data[:n])
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	if hangUp {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method, URL: &url.URL{Path: path}})
	if err != nil {
		t.Fatalf("%s %s with %d of %d bytes: no answer: %v", method, path, n, len(data), err)
	}
	return answerOf(resp)
}

func createUpload(t *testing.T, name string) restv1.Upload {
	t.Helper()
	resp, body := do(t, adminToken, http.MethodPost, "/api/v1/uploads",
		strings.NewReader(`{"kind":"os-image","name":"`+name+`","version":"1","architecture":"amd64"}`), nil)
	expect(t, resp, body, http.StatusCreated)
	return decode[restv1.Upload](t, body)
}

// resume checks that the session is at offset, sends the rest and finishes it.
func resume(t *testing.T, id string, offset int64, data []byte, digest string) {
	t.Helper()
	resp, body := do(t, adminToken, http.MethodHead, "/api/v1/uploads/"+id, nil, nil)
	expect(t, resp, body, http.StatusOK)
	if got := resp.Header.Get(restv1.HeaderUploadOffset); got != strconv.FormatInt(offset, 10) {
		t.Fatalf("HEAD says offset %s, want %d", got, offset)
	}
	resp, body = do(t, adminToken, http.MethodPatch, "/api/v1/uploads/"+id, bytes.NewReader(data[offset:]), map[string]string{restv1.HeaderUploadOffset: strconv.FormatInt(offset, 10)})
	expect(t, resp, body, http.StatusNoContent)
	resp, body = do(t, adminToken, http.MethodPost, "/api/v1/uploads/"+id+"/finish", strings.NewReader(`{"sha256":"`+digest+`"}`), nil)
	expect(t, resp, body, http.StatusCreated)
}

// checkBodyAnswer checks a 4xx for a body that broke off: the status, the message, and the
// offset in the header and the body.
func checkBodyAnswer(t *testing.T, resp answer, body []byte, status int, message string, offset int64) {
	t.Helper()
	expect(t, resp, body, status)
	e := decode[restv1.Error](t, body)
	if !strings.Contains(e.Message, message) || e.Field != "body" {
		t.Errorf("answer %q (field %q), want one saying %q about the body", e.Message, e.Field, message)
	}
	if e.ExpectedOffset == nil || *e.ExpectedOffset != offset || resp.Header.Get(restv1.HeaderUploadOffset) != strconv.FormatInt(offset, 10) {
		t.Errorf("answer does not give offset %d: header %q, body %s", offset, resp.Header.Get(restv1.HeaderUploadOffset), body)
	}
}

// A PATCH whose body ends before its Content-Length is a 400 saying so, not a 500; one whose
// client stalls is cut after the read timeout with a 408. What arrived is kept either way, and
// the upload resumes from there.
func TestBrokenUploadBodyKeepsWhatArrived(t *testing.T) {
	api := &artifactapi.Server{Store: store, Auth: auth, Log: logr.Discard(), BodyReadTimeout: time.Second}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	for i, tt := range []struct {
		name    string
		size    int
		sent    int
		hangUp  bool
		status  int
		message string
	}{
		{"short", 3<<20 + 500, 2<<20 + 1000, true, http.StatusBadRequest, "request body ended after %d of %d bytes"},
		{"stalled", 1<<20 + 300, 1 << 19, false, http.StatusRequestTimeout, "request body sent nothing for 1s after %d of %d bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, digest := testutil.RandomContent(tt.size, uint64(50+i))
			up := createUpload(t, tt.name+"-body")
			resp, body := partialRequest(t, srv.URL, http.MethodPatch, "/api/v1/uploads/"+up.ID, map[string]string{restv1.HeaderUploadOffset: "0"}, data, tt.sent, tt.hangUp)
			checkBodyAnswer(t, resp, body, tt.status, fmt.Sprintf(tt.message, tt.sent, len(data)), int64(tt.sent))
			resume(t, up.ID, int64(tt.sent), data, digest)
		})
	}
}

// A single-request upload whose body ends early, or stalls, is a 4xx saying what to do, and
// stores nothing.
func TestBrokenSingleRequestUploadStoresNothing(t *testing.T) {
	api := &artifactapi.Server{Store: store, Auth: auth, Log: logr.Discard(), BodyReadTimeout: time.Second}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	data, digest := testutil.RandomContent(1<<20, 52)
	for _, tt := range []struct {
		name    string
		hangUp  bool
		status  int
		message string
	}{
		{"short", true, http.StatusBadRequest, fmt.Sprintf("request body ended after 1000 of %d bytes; nothing was stored", len(data))},
		{"stalled", false, http.StatusRequestTimeout, fmt.Sprintf("request body sent nothing for 1s after 1000 of %d bytes; nothing was stored", len(data))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := partialRequest(t, srv.URL, http.MethodPost, query(restv1.KindOSImage, "broken-whole", tt.name), map[string]string{restv1.HeaderSHA256: digest}, data, 1000, tt.hangUp)
			expect(t, resp, body, tt.status)
			if e := decode[restv1.Error](t, body); !strings.Contains(e.Message, tt.message) {
				t.Errorf("answer %q, want one saying %q", e.Message, tt.message)
			}
			resp, body = do(t, adminToken, http.MethodGet, "/api/v1/artifacts?name=broken-whole", nil, nil)
			expect(t, resp, body, http.StatusOK)
			if l := decode[restv1.ArtifactList](t, body); len(l.Items) != 0 {
				t.Errorf("an artifact was stored: %+v", l.Items)
			}
		})
	}
}

// unanswered is a fake Auth whose permission checks fail, as when the API server does not
// answer the SubjectAccessReview; it authenticates as auth does.
type unanswered struct{ artifactapi.Auth }

func (unanswered) Authorize(context.Context, kubeauth.User, string, string) (bool, string, error) {
	return false, "", errors.New("fake: the API server did not answer")
}

// A permission that cannot be checked now is a 503 to try again (Retry-After), not a 500; a
// JSON body over its bound is a 413, not a 400. Both are restv1.Error JSON.
func TestRefusalStatuses(t *testing.T) {
	srv := httptest.NewServer((&artifactapi.Server{Store: store, Auth: unanswered{auth}, Log: logr.Discard()}).Handler())
	defer srv.Close()
	resp, body := doAt(t, srv.URL, viewerToken, http.MethodGet, "/api/v1/artifacts", nil, nil)
	expect(t, resp, body, http.StatusServiceUnavailable)
	if e := decode[restv1.Error](t, body); resp.Header.Get("Retry-After") == "" || !strings.Contains(e.Message, "try again") {
		t.Errorf("unchecked permission: Retry-After %q, answer %+v; want a time and a message to try again", resp.Header.Get("Retry-After"), e)
	}

	resp, body = do(t, adminToken, http.MethodPost, "/api/v1/uploads", strings.NewReader(`{"name":"`+strings.Repeat("x", 2<<20)+`"}`), nil)
	expect(t, resp, body, http.StatusRequestEntityTooLarge)
	if e := decode[restv1.Error](t, body); e.Field != "body" || !strings.Contains(e.Message, "at most") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("oversized body: %s, answer %+v; want JSON naming the body and its bound", resp.Header.Get("Content-Type"), e)
	}
}
