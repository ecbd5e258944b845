package artifactapi_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// FuzzUploadHandlers throws arbitrary session JSON, offsets and bodies at the upload handlers:
// whatever comes in, the answer is never a 5xx (a panic is answered with 500 by the recovery
// middleware, so it fails here too).
func FuzzUploadHandlers(f *testing.F) {
	f.Add(`{"kind":"os-image","name":"fz","version":"1","architecture":"amd64"}`, "0", []byte("hello"), `{}`)
	f.Add(`{"kind":"os-image","name":"fz","version":"2","architecture":"amd64","size":3}`, "0", []byte("toolong"), `{"sha256":"`+strings.Repeat("0", 64)+`"}`)
	f.Add(`{"kind":"helm-chart","name":"fz","version":"3","architecture":"noarch","labels":{"a/b":"c"}}`, "-1", []byte{}, `not json`)
	f.Add(`{"kind":`, "99999999999999999999", []byte{0, 1, 2}, ``)
	f.Add(`{"kind":"os-image","name":"fz","version":"4","architecture":"amd64","size":-5}`, "5", []byte("x"), `{"sha256":"ab"}`)
	f.Fuzz(func(t *testing.T, create, offset string, chunk []byte, finish string) {
		if strings.ContainsFunc(offset, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Skip("not a header value a client can send")
		}
		resp, body := do(t, adminToken, http.MethodPost, "/api/v1/uploads", strings.NewReader(create), nil)
		if resp.StatusCode >= 500 {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		id := "no-such-upload"
		if resp.StatusCode == http.StatusCreated {
			id = decode[struct{ ID string }](t, body).ID
		}
		for _, step := range []struct {
			method, path, body string
			header             map[string]string
		}{
			{http.MethodPatch, "/api/v1/uploads/" + id, string(chunk), map[string]string{"Upload-Offset": offset}},
			{http.MethodHead, "/api/v1/uploads/" + id, "", nil},
			{http.MethodPost, "/api/v1/uploads/" + id + "/finish", finish, nil},
			{http.MethodDelete, "/api/v1/uploads/" + id, "", nil},
		} {
			resp, body := do(t, adminToken, step.method, step.path, strings.NewReader(step.body), step.header)
			if resp.StatusCode >= 500 {
				t.Fatalf("%s %s: %d %s", step.method, step.path, resp.StatusCode, body)
			}
		}
	})
}

// FuzzDownloadRange throws arbitrary Range, If-Range and If-None-Match headers at a download
// of a blob of three chunks (the last one partial): never a 5xx; a 206 has a Content-Range
// (top-level, or one per part of a multipart/byteranges answer) with first <= last < size and
// exactly those bytes of the content; a 416 has Content-Range: bytes */size; a 200 has the
// whole content.
func FuzzDownloadRange(f *testing.F) {
	data, digest := testutil.RandomContent(2*(128<<10)+5000, 40)
	etag := `"sha256:` + digest + `"`
	for _, seed := range [][3]string{
		{"bytes=-0", "", ""},
		{"bytes=-0", etag, ""},
		{"bytes=-0,-0", "", `"other"`},
		{"bytes=0-0", "", ""},
		{"bytes=-1", "", ""},
		{"bytes=131071-131072", etag, ""},
		{"bytes=0-,-10", "", ""},
		{"bytes=5-3", "", ""},
		{"bytes=999999999-", "", ""},
		{"bytes=0-99999999999999999999", "", ""},
		{"bytes=", "", ""},
		{"bytes=,", "", ""},
		{"bytes=+1-2", "", ""},
		{"BYTES=1-2", "", ""},
		{"items=0-1", "", ""},
		{"bytes=0-1", `"other"`, ""},
		{"bytes=0-1", "", etag},
		{"bytes=-0", "", "W/" + etag},
		{"bytes=1-2,3-4,-5", "", "*"},
		{"", etag, ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	resp, body := do(f, adminToken, http.MethodPost, query(restv1.KindOSImage, "fuzz-range", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		f.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	size := int64(len(data))
	f.Fuzz(func(t *testing.T, rng, ifRange, ifNoneMatch string) {
		header := map[string]string{}
		for k, v := range map[string]string{"Range": rng, "If-Range": ifRange, "If-None-Match": ifNoneMatch} {
			if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r >= 0x7f }) || strings.TrimSpace(v) != v {
				t.Skip("not a header value a client can send")
			}
			if v != "" {
				header[k] = v
			}
		}
		resp, body := do(t, viewerToken, http.MethodGet, "/api/v1/blobs/sha256:"+digest, nil, header)
		switch resp.StatusCode {
		case http.StatusOK:
			if !bytes.Equal(body, data) {
				t.Fatalf("200 with %d bytes that are not the content", len(body))
			}
		case http.StatusPartialContent:
			checkPartial(t, resp, body, data)
		case http.StatusRequestedRangeNotSatisfiable:
			if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", size) {
				t.Fatalf("416 with Content-Range %q, want bytes */%d: %s", cr, size, body)
			}
		case http.StatusNotModified:
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	})
}

// checkPartial checks a 206: its one range, or every part of a multipart/byteranges answer.
func checkPartial(t *testing.T, resp answer, body, data []byte) {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/byteranges" {
		checkRangePart(t, resp.Header.Get("Content-Range"), body, data)
		return
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	parts := 0
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("206 multipart answer: part %d: %v", parts, err)
		}
		got, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("206 multipart answer: part %d: %v", parts, err)
		}
		checkRangePart(t, p.Header.Get("Content-Range"), got, data)
		parts++
	}
	if parts == 0 {
		t.Fatal("206 multipart answer without parts")
	}
}

// checkRangePart checks that got is the range of data that contentRange ("bytes first-last/size") says.
func checkRangePart(t *testing.T, contentRange string, got, data []byte) {
	t.Helper()
	var first, last, size int64
	if n, err := fmt.Sscanf(contentRange, "bytes %d-%d/%d", &first, &last, &size); err != nil || n != 3 || fmt.Sprintf("bytes %d-%d/%d", first, last, size) != contentRange {
		t.Fatalf("206 with Content-Range %q, want bytes first-last/size", contentRange)
	}
	if size != int64(len(data)) || first < 0 || first > last || last >= size {
		t.Fatalf("206 with Content-Range %q for content of %d bytes", contentRange, len(data))
	}
	if !bytes.Equal(got, data[first:last+1]) {
		t.Fatalf("206 with Content-Range %q and %d bytes that are not those of the content", contentRange, len(got))
	}
}
