package artifactapi_test

import (
	"net/http"
	"strings"
	"testing"
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
