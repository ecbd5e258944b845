package artifactset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// TestExplainFetchError: a fetch that could not reach the artifact API at all (refused, a name
// that does not resolve, a connection closed before an answer) says what to do; an answer of the
// API (an error status), a certificate the site does not trust or a digest mismatch does not get
// that hint.
func TestExplainFetchError(t *testing.T) {
	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { closing.Close() })
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()

	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(untrusted.Close)

	download := func(base string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := &artifactclient.Client{BaseURL: base, HTTP: &http.Client{}}
		return c.Download(ctx, strings.Repeat("a", 64), filepath.Join(t.TempDir(), "x"), nil)
	}
	for _, c := range []struct {
		name string
		err  error
		hint bool
	}{
		{"connection refused", download("http://" + refusedAddr), true},
		{"connection closed", download("http://" + closing.Addr().String()), true},
		{"name does not resolve", download("http://artifacts.invalid"), true},
		// what net/http says when the server's close races the request (seen in CI)
		{"an idle connection closed", &url.Error{Op: "Get", URL: "http://" + closing.Addr().String(), Err: errors.New("http: server closed idle connection")}, true},
		{"a certificate the site does not trust", download(untrusted.URL), false},
		{"the API answered 404", &artifactclient.APIError{Status: http.StatusNotFound}, false},
		{"digest mismatch", errors.New("downloaded content has sha256 b, want a"), false},
		{"a transfer cut midway", fmt.Errorf("download sha256:a: %w", io.ErrUnexpectedEOF), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("no error to explain")
			}
			got := explainFetchError(c.err)
			if !strings.HasPrefix(got, c.err.Error()) {
				t.Errorf("%q does not start with the error %q", got, c.err)
			}
			if strings.Contains(got, unreachableHint) != c.hint {
				t.Errorf("%q: hint %v, want %v", got, !c.hint, c.hint)
			}
		})
	}
}

// TestSummarizeSaysTheHintOnce: the Ready condition of a set whose artifacts could not be
// fetched for want of an uplink names each artifact and says what to do once.
func TestSummarizeSaysTheHintOnce(t *testing.T) {
	refused := explainFetchError(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	set := &sitev1.ArtifactSet{Spec: sitev1.ArtifactSetSpec{Artifacts: []sitev1.ArtifactRef{{SHA256: "a"}, {SHA256: "b"}}}}
	set.Status.Artifacts = []sitev1.CachedArtifact{
		{SHA256: "a", Phase: sitev1.ArtifactFailed, Message: refused},
		{SHA256: "b", Phase: sitev1.ArtifactFailed, Message: refused},
	}
	summarize(set)
	c := meta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
	if c == nil || c.Reason != sitev1.ReasonFetchFailed {
		t.Fatalf("Ready condition %+v, want FetchFailed", c)
	}
	if n := strings.Count(c.Message, unreachableHint); n != 1 {
		t.Errorf("the hint is said %d times in %q, want once", n, c.Message)
	}
	if !strings.Contains(c.Message, "sha256:a: dial tcp: connection refused; sha256:b: dial tcp: connection refused; the site cannot reach") {
		t.Errorf("message %q does not name each artifact's error, then the hint", c.Message)
	}
}
