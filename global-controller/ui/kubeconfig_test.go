package ui

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// fakeKubeconfigs stands in for kubeconfigapi.Server: it grants admin only and remembers what
// it was asked.
type fakeKubeconfigs struct {
	mu    sync.Mutex
	asked []string
}

func (f *fakeKubeconfigs) Issue(_ context.Context, u kubeauth.User, site types.NamespacedName, req restv1.KubeconfigRequest) (restv1.ClusterCredential, error) {
	f.mu.Lock()
	f.asked = append(f.asked, u.Name+" "+site.String())
	f.mu.Unlock()
	if u.Name != "admin" {
		return restv1.ClusterCredential{}, &problem.Problem{Status: http.StatusForbidden, Message: "user " + u.Name + " may not"}
	}
	if _, err := clustercred.PublicKey([]byte(req.CSR), clustercred.Identity{}); err != nil {
		return restv1.ClusterCredential{}, &problem.Problem{Status: http.StatusBadRequest, Field: "csr", Message: err.Error()}
	}
	return restv1.ClusterCredential{Cluster: site.Name, User: "edgefleet:" + u.Name, Certificate: "CERT"}, nil
}

// postJSON posts a JSON body with the token's cookie and the server's own Origin.
func (b *bed) postJSON(t *testing.T, path, token, origin string, body any) answer {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+path, strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
	if origin == "self" {
		origin = b.srv.URL
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out strings.Builder
	if _, err := io.Copy(&out, resp.Body); err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: out.String()}
}

func TestKubeconfigFromTheSitePage(t *testing.T) {
	b := newBed(t, Limits{})
	const url = "/ui/sites/fleet/store-1/kubeconfig"
	// Offered to who may create sites/kubeconfig (admin), not to a viewer.
	if a := b.do(t, "GET", "/ui/sites/fleet/store-1", "admin-token", "", nil); a.status != http.StatusOK || !strings.Contains(a.body, `data-kubeconfig="`+url+`"`) {
		t.Errorf("admin's site page: %d, no kubeconfig button", a.status)
	}
	if a := b.do(t, "GET", "/ui/sites/fleet/store-1", "viewer-token", "", nil); a.status != http.StatusOK || strings.Contains(a.body, "data-kubeconfig") {
		t.Errorf("viewer's site page: %d, kubeconfig button shown", a.status)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := clustercred.NewCSR(key)
	if err != nil {
		t.Fatal(err)
	}
	body := restv1.KubeconfigRequest{CSR: string(csr), TTLSeconds: 3600}
	// The script reads every answer as JSON: the refusals of the session and the origin too.
	if a := b.postJSON(t, url, "admin-token", "", body); a.status != http.StatusForbidden || !jsonError(a, "Origin") {
		t.Errorf("post without Origin: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	if a := b.postJSON(t, url, "", "self", body); a.status != http.StatusUnauthorized || !jsonError(a, "Sign in") {
		t.Errorf("post without a session: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	a := b.postJSON(t, url, "admin-token", "self", body)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"user":"edgefleet:admin"`) || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("admin's post: %d %s", a.status, a.body)
	}
	if a := b.postJSON(t, url, "viewer-token", "self", body); a.status != http.StatusForbidden {
		t.Errorf("viewer's post: %d %s", a.status, a.body)
	}
	if a := b.postJSON(t, url, "admin-token", "self", map[string]any{"csr": "x", "extra": 1}); a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"body"`) {
		t.Errorf("unknown field: %d %s", a.status, a.body)
	}
	if got := strings.Join(b.kubeconfigs.asked, ", "); got != "admin fleet/store-1, viewer fleet/store-1" {
		t.Errorf("asked %s", got)
	}
}

// TestKubeconfigScriptCSR runs the browser's CSR code (static/kubeconfig.js) in Node, whose
// WebCrypto is the browsers' API, and checks the request with the server's own checks.
func TestKubeconfigScriptCSR(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (make tools installs Debian's nodejs): %v", err)
	}
	script, err := filepath.Abs(filepath.Join("static", "kubeconfig.js"))
	if err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(t.TempDir(), "csr.js")
	if err := os.WriteFile(runner, []byte(`const { csr } = require(process.argv[2]);
(async () => {
  const subtle = (globalThis.crypto || require('node:crypto').webcrypto).subtle; // Node 18 (Debian 12) has no global crypto
  const keys = await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  process.stdout.write(await csr(subtle, keys));
})();
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), node, runner, script).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	id, err := clustercred.IdentityOf("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clustercred.PublicKey(out, id); err != nil {
		t.Errorf("the script's CSR %q: %v", out, err)
	}
}

func TestMyClusters(t *testing.T) {
	b := newBed(t, Limits{})
	a := b.do(t, "GET", "/ui/clusters?namespace=fleet", "admin-token", "", nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `data-kubeconfig="/ui/sites/fleet/store-1/kubeconfig"`) || !strings.Contains(a.body, "kubeconfig.js") {
		t.Errorf("admin's clusters: %d %s", a.status, a.body)
	}
	// The viewer may list sites, not get kubeconfigs.
	a = b.do(t, "GET", "/ui/clusters?namespace=fleet", "viewer-token", "", nil)
	if a.status != http.StatusOK || strings.Contains(a.body, "data-kubeconfig") || !strings.Contains(a.body, "no site here grants you kubeconfigs") {
		t.Errorf("viewer's clusters: %d %s", a.status, a.body)
	}
}

// jsonError says whether a is a restv1.Error JSON answer whose message has text.
func jsonError(a answer, text string) bool {
	var e restv1.Error
	return strings.HasPrefix(a.header.Get("Content-Type"), "application/json") && json.Unmarshal([]byte(a.body), &e) == nil && strings.Contains(e.Message, text)
}
