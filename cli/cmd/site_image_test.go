package cmd

import (
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
)

// TestSiteImageRefusesMalformedRequests checks that each malformed `edgefleet site image` is
// refused with its reason before a token is asked for: the artifact API given is a recorder (a
// fake that answers nothing but counts requests), which must see none. The command's success
// against the real global controller is tested in global-controller/enrollment.
func TestSiteImageRefusesMalformedRequests(t *testing.T) {
	var requests atomic.Int32
	recorder := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "the recorder answers nothing", http.StatusTeapot)
	}))
	t.Cleanup(recorder.Close)

	dir := t.TempDir()
	base := siteimagetest.Base(t)
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, siteimagetest.CA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	notCA := filepath.Join(dir, "not-ca.crt")
	if err := os.WriteFile(notCA, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "exists.iso")
	if err := os.WriteFile(existing, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "site-a.iso")
	// A user with a bearer token over https (clientcmd sends tokens to https servers only) (the artifact API's kind of credentials), made up here: only the
	// recorder sees it.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %q
users:
- name: u
  user:
    token: %q
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
`, recorder.URL, rand.Text())
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--api-server", recorder.URL, "-n", "fleet"}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no site", []string{"-o", out, "--base", base, "--url", "https://g.example", "--ca-file", caFile}, "accepts 1 arg(s), received 0"},
		{"bad site name", []string{"Site_A", "-o", out, "--base", base, "--url", "https://g.example", "--ca-file", caFile}, `site name "Site_A"`},
		{"bad release name", []string{"site-a", "-o", out, "--base", base, "--url", "https://g.example", "--ca-file", caFile, "--with-release", "Edge 1"}, `--with-release "Edge 1"`},
		{"no output", []string{"site-a", "--base", base, "--url", "https://g.example", "--ca-file", caFile}, "no output: give -o SITE.iso"},
		{"output exists", []string{"site-a", "-o", existing, "--base", base, "--url", "https://g.example", "--ca-file", caFile}, "exists.iso exists: choose another output or replace it (--force)"},
		{"output directory missing", []string{"site-a", "-o", filepath.Join(dir, "none", "a.iso"), "--base", base, "--url", "https://g.example", "--ca-file", caFile}, "directory " + filepath.Join(dir, "none") + " does not exist"},
		{"no base", []string{"site-a", "-o", out, "--url", "https://g.example", "--ca-file", caFile}, "no base image: give --base"},
		{"base not an edgefleet image", []string{"site-a", "-o", out, "--base", caFile, "--url", "https://g.example", "--ca-file", caFile}, "is not an edgefleet bootstrap image"},
		{"URL not https", []string{"site-a", "-o", out, "--base", base, "--url", "http://g.example", "--ca-file", caFile}, "must be https://HOST[:PORT]"},
		{"no CA", []string{"site-a", "-o", out, "--base", base, "--url", "https://g.example"}, "no CA to pin: give --ca-file"},
		{"CA not a certificate", []string{"site-a", "-o", out, "--base", base, "--url", "https://g.example", "--ca-file", notCA}, "the CA to pin is not PEM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := runAs(t, kubeconfig, append(append([]string{"site", "image"}, common...), c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("site image %v = %v\n%s\nwant an error containing %q", c.args, err, got, c.want)
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("%d requests reached the API: a token was asked for a malformed request", n)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s written despite the refusal (%v)", out, err)
			}
			if b, _ := os.ReadFile(existing); string(b) != "keep" {
				t.Error("the existing output changed")
			}
		})
	}

	// A well-formed request reaches the API (here the recorder, which refuses it): the checks
	// above are what kept the others away.
	recorderCA := filepath.Join(dir, "recorder-ca.crt")
	if err := os.WriteFile(recorderCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: recorder.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := runAs(t, kubeconfig, append(append([]string{"site", "image", "--api-ca-file", recorderCA}, common...), "site-a", "-o", out, "--base", base, "--url", "https://g.example", "--ca-file", caFile)...)
	if err == nil || requests.Load() == 0 {
		t.Fatalf("well-formed request: %v, %d requests\n%s", err, requests.Load(), got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s written without a token (%v)", out, err)
	}

	// The API's CA may come from EDGEFLEET_API_CA_FILE instead of --api-ca-file; with neither,
	// the recorder's certificate is not trusted and no request reaches it.
	request := append(append([]string{"site", "image"}, common...), "site-a", "-o", out, "--base", base, "--url", "https://g.example", "--ca-file", caFile)
	before := requests.Load()
	if got, err := runAs(t, kubeconfig, request...); err == nil || !strings.Contains(err.Error(), "certificate") || requests.Load() != before {
		t.Fatalf("without the API's CA: %v, %d requests\n%s; want a certificate error and none", err, requests.Load()-before, got)
	}
	t.Setenv("EDGEFLEET_API_CA_FILE", recorderCA)
	got, err = runAs(t, kubeconfig, request...)
	if err == nil || requests.Load() == before {
		t.Fatalf("with EDGEFLEET_API_CA_FILE: %v, %d requests\n%s; want the request to reach the API", err, requests.Load()-before, got)
	}
}
