package enrollment_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr/testr"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/enrollment"
	"github.com/edgefleet/edgefleet/pkg/enroll"
	"github.com/edgefleet/edgefleet/pkg/siteimage"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const ns = "fleet"

// bed is the fleet of the enrollment test: the real global controller (bin/global-controller,
// HTTPS) on a real global control plane, and two real site control planes.
type bed struct {
	t        *testing.T
	f        *testfleet.Fleet
	http     *http.Client
	admin    string // token of a fleet admin
	viewer   string // token of a fleet viewer
	ca       []byte // the API's CA, pinned by the sites
	manifest []byte // deploy/rbac/site/global-access.yaml
	issued   []string
	// enrollLog is what bin/local-controller enroll wrote.
	enrollLog string
}

func TestEnrollment(t *testing.T) {
	ctx := t.Context()
	// site-b keeps its kubeconfig in the global controller's Vault, site-a in a Secret.
	f, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{Sites: []string{"site-a", "site-b"}, TLS: true, Vault: true,
		ControllerArgs: []string{"--site-heartbeat-interval", "2s", "--zap-log-level", "debug"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	b := &bed{t: t, f: f}
	if b.ca, err = os.ReadFile(f.APICAFile); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.ca)
	b.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if b.admin, err = f.Token(ctx, "edgefleet-system", "enroller", "edgefleet-fleet-admin"); err != nil {
		t.Fatal(err)
	}
	if b.viewer, err = f.Token(ctx, "edgefleet-system", "watcher", "edgefleet-fleet-viewer"); err != nil {
		t.Fatal(err)
	}
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if b.manifest, err = os.ReadFile(root + "/" + controlplane.SiteAccessManifest); err != nil {
		t.Fatal(err)
	}
	if err := f.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, site := range []*fleetv1.Site{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-a"}, Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "site-a-kubeconfig"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-b"}, Spec: fleetv1.SiteSpec{KubeconfigVaultRef: &fleetv1.VaultKeyReference{Path: "sites/site-b"}}},
	} {
		if err := f.Global.Client.Create(ctx, site); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("issuing needs RBAC and a Site", func(t *testing.T) {
		status, e := b.request(http.MethodPost, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens", b.viewer, `{}`, nil)
		if status != http.StatusForbidden || !strings.Contains(e.Message, `may not create sites/enrollment.fleet.edgefleet.io "site-a"`) {
			t.Errorf("viewer: %d %q", status, e.Message)
		}
		status, e = b.request(http.MethodPost, "/api/v1/namespaces/fleet/sites/nowhere/enrollment-tokens", b.admin, `{}`, nil)
		if status != http.StatusNotFound || e.Reason != enrollment.ReasonSiteNotFound {
			t.Errorf("no site: %d %+v", status, e)
		}
		status, e = b.request(http.MethodPost, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens", b.admin, `{"ttl":"9999h"}`, nil)
		if status != http.StatusBadRequest || e.Field != "ttl" {
			t.Errorf("ttl too long: %d %+v", status, e)
		}
	})

	t.Run("a method a path does not answer is a 405 naming the ones it does", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{http.MethodGet, enrollment.EnrollPath, "POST"},
			{http.MethodPut, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens", "GET, POST"},
			{http.MethodGet, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens/0123456789abcdef", "DELETE"},
			{http.MethodGet, "/api/v1/namespaces/fleet/sites/site-a/kubeconfig", "POST"},
			{http.MethodPost, "/api/v1/namespaces/fleet/sites/site-a/log", "GET, HEAD"},
		} {
			req, err := http.NewRequestWithContext(ctx, tc.method, b.f.APIURL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+b.admin)
			resp, err := b.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			var e restv1.Error
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(raw, &e) != nil || !strings.Contains(e.Message, "answers "+strings.ReplaceAll(tc.allow, ", ", " and ")+" only") {
				t.Errorf("%s %s: %d, Allow %q, %s: %s; want 405, Allow %q, restv1.Error JSON naming them", tc.method, tc.path, resp.StatusCode,
					resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), raw, tc.allow)
			}
		}
	})

	// Every refusal below leaves the global cluster as it was: no Secret created or changed,
	// no event, the Site still without a kubeconfig.
	good := b.issue("site-a", "")
	unchanged := b.snapshot()

	t.Run("refusals", func(t *testing.T) {
		expired := b.issue("site-a", "")
		b.editRecord(expired, func(s *corev1.Secret) {
			s.Data["expires"] = []byte(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
		})
		revoked := b.issue("site-a", "")
		id, _, _ := strings.Cut(revoked, ".")
		if status, e := b.request(http.MethodDelete, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens/"+id, b.viewer, "", nil); status != http.StatusForbidden {
			t.Errorf("viewer revoked a token: %d %+v", status, e)
		}
		var rt restv1.EnrollmentToken
		if status, e := b.request(http.MethodDelete, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens/"+id, b.admin, "", &rt); status != http.StatusOK || rt.State != restv1.TokenRevoked {
			t.Fatalf("revoke: %d %+v %+v", status, e, rt)
		}
		forB := b.issue("site-b", "")
		unchanged = b.snapshot()

		siteA := b.f.Sites["site-a"]
		adminKC, err := siteA.AdminKubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		leastKC := b.siteCredential("site-a")
		nobodyKC, err := siteA.Kubeconfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		unsafeKC := strings.Replace(string(leastKC), "token: ", "tokenFile: /etc/shadow\n    token: ", 1)
		body := func(site, kc string) string {
			d, _ := json.Marshal(restv1.Enroll{Namespace: ns, Site: site, Machine: "edge-a", Kubeconfig: kc})
			return string(d)
		}
		cases := []struct {
			name, token, body string
			status            int
			reason, text      string
		}{
			{"expired token", expired, body("site-a", string(leastKC)), 401, enrollment.ReasonExpired, "expired at"},
			{"revoked token", revoked, body("site-a", string(leastKC)), 401, enrollment.ReasonRevoked, "was revoked"},
			{"token for another site", forB, body("site-a", string(leastKC)), 403, enrollment.ReasonOtherSite, "issued for site fleet/site-b, not fleet/site-a"},
			{"unknown token", strings.Repeat("0", 16) + good[16:], body("site-a", string(leastKC)), 401, enrollment.ReasonUnknownToken, "not one issued"},
			{"wrong secret", good[:17] + strings.Repeat("A", len(good)-17), body("site-a", string(leastKC)), 401, enrollment.ReasonUnknownToken, "not one issued"},
			{"malformed token", "abc", body("site-a", string(leastKC)), 401, enrollment.ReasonMalformed, "malformed"},
			{"no token", "", body("site-a", string(leastKC)), 401, enrollment.ReasonMalformed, "Authorization"},
			{"malformed body", good, `{"site": "site-a", "kubeconfig": 3}`, 400, enrollment.ReasonMalformed, "not the expected JSON"},
			{"unknown field", good, `{"site": "site-a", "token": "x"}`, 400, enrollment.ReasonMalformed, "unknown field"},
			{"bad site name", good, body("Site_A", string(leastKC)), 400, enrollment.ReasonMalformed, "site:"},
			{"garbage kubeconfig", good, body("site-a", "{{{"), 400, enrollment.ReasonMalformed, "kubeconfig: kubeconfig is invalid"},
			{"unsafe kubeconfig", good, body("site-a", unsafeKC), 400, enrollment.ReasonUnsafe, "tokenFile is a file path"},
			{"admin credential", good, body("site-a", string(adminKC)), 400, enrollment.ReasonTooPrivileged, "never send an admin credential"},
			{"credential lacking access", good, body("site-a", string(nobodyKC)), 400, enrollment.ReasonLacksAccess, `may not get configmaps "edgefleet-local-controller"`},
			{"oversized body", good, body("site-a", strings.Repeat("x", 300<<10)), 413, enrollment.ReasonMalformed, "request body too large"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, e := b.request(http.MethodPost, enrollment.EnrollPath, tc.token, tc.body, nil)
				if status != tc.status || e.Reason != tc.reason || !strings.Contains(e.Message, tc.text) {
					t.Errorf("got %d %+v; want %d %s with %q", status, e, tc.status, tc.reason, tc.text)
				}
				b.assertUnchanged(unchanged)
			})
		}

		t.Run("wrong CA on the site side", func(t *testing.T) {
			other, _, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = enroll.Enroll(ctx, siteA.Config, b.options("site-a", good, other))
			var perm *enroll.PermanentError
			if !errors.As(err, &perm) || perm.Reason != "UntrustedServer" || !strings.Contains(err.Error(), "pinned CA") {
				t.Fatalf("err = %v, want a refusal of the untrusted server", err)
			}
			b.assertUnchanged(unchanged)
		})
	})

	t.Run("enrollment makes the Site Ready with no hand-written Secret", func(t *testing.T) {
		// As the site's first boot runs it: bin/local-controller enroll, the token in a file.
		b.enrollLog = b.runEnroll("site-a", good)
		if !strings.Contains(b.enrollLog, `"msg":"Enrolled"`) || !strings.Contains(b.enrollLog, `"secret":"site-a-kubeconfig"`) {
			t.Errorf("local-controller enroll said:\n%s", b.enrollLog)
		}
		b.waitReady("site-a")
		secret := &corev1.Secret{}
		if err := b.f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-a-kubeconfig"}, secret); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(secret.Data["kubeconfig"]), "token: ") || strings.Contains(string(secret.Data["kubeconfig"]), "client-key-data") {
			t.Errorf("stored kubeconfig is not a ServiceAccount token's")
		}
		evs := b.events()
		if !strings.Contains(evs, `machine \"edge-a\"`) { // JSON-quoted
			t.Errorf("no Enrolled event naming the machine in %s", evs)
		}
		var list restv1.EnrollmentTokenList
		if status, e := b.request(http.MethodGet, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens", b.admin, "", &list); status != http.StatusOK {
			t.Fatalf("list: %d %+v", status, e)
		}
		states := map[restv1.EnrollmentTokenState]int{}
		for _, it := range list.Items {
			states[it.State]++
			if it.Token != "" {
				t.Errorf("listing shows a token: %+v", it)
			}
		}
		if states[restv1.TokenUsed] != 1 || states[restv1.TokenRevoked] != 1 || states[restv1.TokenExpired] != 1 {
			t.Errorf("token states: %v", states)
		}
	})

	t.Run("retries of the same machine finish, another machine is refused", func(t *testing.T) {
		siteA := b.f.Sites["site-a"]
		// A reboot after success: the state on the site says done, nothing is asked.
		if _, err := enroll.Enroll(ctx, siteA.Config, b.options("site-a", good, b.ca)); err != nil {
			t.Fatal(err)
		}
		// A crash after the token was bound but before the Secret was written (or the answer
		// got lost): no state on the site, no Secret on the global side. The retry finishes.
		if err := siteA.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: enroll.StateConfigMap}}); err != nil {
			t.Fatal(err)
		}
		if err := b.f.Global.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-a-kubeconfig"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := enroll.Enroll(ctx, siteA.Config, b.options("site-a", good, b.ca)); err != nil {
			t.Fatalf("retry of the same machine: %v", err)
		}
		b.waitReady("site-a")
		// Another machine (site-b's cluster) with site-a's used token.
		before := b.snapshot()
		_, err := enroll.Enroll(ctx, b.f.Sites["site-b"].Config, b.options("site-a", good, b.ca))
		var perm *enroll.PermanentError
		if !errors.As(err, &perm) || perm.Reason != enrollment.ReasonUsed || !strings.Contains(perm.Message, `already used by machine "edge-a"`) {
			t.Fatalf("second machine: %v", err)
		}
		b.assertUnchanged(before)
	})

	t.Run("two machines racing with one token: one wins, the other is refused", func(t *testing.T) {
		race := b.issue("site-b", "")
		type result struct {
			machine string
			err     error
		}
		results := make(chan result, 2)
		for _, m := range []string{"site-a", "site-b"} {
			go func() {
				opts := b.options("site-b", race, b.ca)
				opts.Machine = "racer-" + m
				_, err := enroll.Enroll(ctx, b.f.Sites[m].Config, opts)
				results <- result{opts.Machine, err}
			}()
		}
		var won, lost []string
		for range 2 {
			r := <-results
			var perm *enroll.PermanentError
			switch {
			case r.err == nil:
				won = append(won, r.machine)
			case errors.As(r.err, &perm) && perm.Reason == enrollment.ReasonUsed:
				lost = append(lost, r.machine)
			default:
				t.Errorf("%s: %v", r.machine, r.err)
			}
		}
		if len(won) != 1 || len(lost) != 1 {
			t.Fatalf("won %v, lost %v; want one each", won, lost)
		}
		var list restv1.EnrollmentTokenList
		if status, e := b.request(http.MethodGet, "/api/v1/namespaces/fleet/sites/site-b/enrollment-tokens", b.admin, "", &list); status != http.StatusOK {
			t.Fatalf("list: %d %+v", status, e)
		}
		for _, it := range list.Items {
			if strings.HasPrefix(race, it.ID+".") && (it.State != restv1.TokenUsed || it.Machine != won[0]) {
				t.Errorf("the raced token: %+v, want Used by %s", it, won[0])
			}
		}
		b.waitReady("site-b")
		// site-b's credential went to its Vault entry, with who enrolled; no Secret holds it.
		entries, err := b.f.VaultEntries()
		if err != nil {
			t.Fatal(err)
		}
		entry, err := entries.Read(ctx, ns, "sites/site-b")
		if err != nil {
			t.Fatal(err)
		}
		kc, id, machine := entry.Data["kubeconfig"], entry.Data[enrollment.EnrolledLabel], entry.Data[enrollment.MachineAnnotation]
		if !strings.Contains(kc, "token: ") || machine != won[0] || id == "" || !strings.HasPrefix(race, id+".") {
			t.Errorf("Vault entry sites/site-b: machine %q, token %q, a kubeconfig with a token: %v", machine, id, strings.Contains(kc, "token: "))
		}
		if err := b.f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-b-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Secret site-b-kubeconfig on the global cluster: %v", err)
		}
	})

	t.Run("the stored identity can do on the site only what the global controller needs", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(b.f.Sites["site-a"].Config)
		if err != nil {
			t.Fatal(err)
		}
		user := "system:serviceaccount:edgefleet-system:" + enroll.ServiceAccount
		site := "site.edgefleet.io"
		cases := []struct {
			attrs authzv1.ResourceAttributes
			want  bool
		}{
			{authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "edgefleet-system", Name: "edgefleet-local-controller"}, true},
			{authzv1.ResourceAttributes{Verb: "create", Group: site, Resource: "applicationclusters", Namespace: "edgefleet-system"}, true},
			{authzv1.ResourceAttributes{Verb: "patch", Group: site, Resource: "artifactsets", Namespace: "edgefleet-system"}, true},
			{authzv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "edgefleet-hosts"}, true},
			{authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "edgefleet-hosts"}, true},
			// Not the Secrets beside the cluster: the application cluster's admin kubeconfig, the
			// BPA's keys, the site's artifact token.
			{authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "edgefleet-system", Name: "site-a-kubeconfig"}, false},
			{authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "edgefleet-system", Name: "site-a-admin-kubeconfig"}, false},
			{authzv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "edgefleet-system"}, false},
			{authzv1.ResourceAttributes{Verb: "watch", Resource: "secrets", Namespace: "edgefleet-system"}, false},
			{authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "edgefleet-system"}, false},
			{authzv1.ResourceAttributes{Verb: "get", Group: "metal3.io", Resource: "baremetalhosts", Namespace: "edgefleet-hosts"}, false},
			{authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "edgefleet-system", Name: "other"}, false},
			{authzv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, false},
			{authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
			{authzv1.ResourceAttributes{Verb: "create", Group: site, Resource: "applicationclusters", Namespace: "default"}, false},
			{authzv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: "edgefleet-system"}, false},
			{authzv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts/token", Namespace: "edgefleet-system", Name: enroll.ServiceAccount}, false},
			{authzv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, false},
		}
		for _, tc := range cases {
			attrs := tc.attrs
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:edgefleet-system", "system:authenticated"}, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Allowed != tc.want {
				t.Errorf("%s may %s %s/%s in %q (%s): %v, want %v", user, attrs.Verb, attrs.Group, attrs.Resource, attrs.Namespace, attrs.Name, r.Status.Allowed, tc.want)
			}
		}
	})

	t.Run("the CLI issues, lists and revokes tokens", func(t *testing.T) {
		out, err := b.f.Edgefleet(ctx, "site", "token", "create", "site-b", "-n", ns, "--ttl", "2h")
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(out))
		id, _, err := enrollment.ParseToken(token)
		if err != nil {
			t.Fatalf("create printed %q: %v", out, err)
		}
		b.issued = append(b.issued, token)
		if out, err = b.f.Edgefleet(ctx, "site", "token", "list", "site-b", "-n", ns); err != nil || !regexp.MustCompile(id+`\s+Valid\s+in 1(19|20)m`).Match(out) {
			t.Errorf("list: %v\n%s", err, out)
		}
		if bytes.Contains(out, []byte(token)) {
			t.Errorf("list shows the token")
		}
		if out, err = b.f.Edgefleet(ctx, "site", "token", "revoke", "site-b", id, "-n", ns); err != nil || !regexp.MustCompile(id+`\s+Revoked`).Match(out) {
			t.Errorf("revoke: %v\n%s", err, out)
		}
		if out, err = b.f.Edgefleet(ctx, "site", "token", "revoke", "site-a", id, "-n", ns); err == nil || !strings.Contains(string(out), `site fleet/site-a has no enrollment token "`+id+`"`) {
			t.Errorf("revoke through another site: %v\n%s", err, out)
		}
	})

	t.Run("the CLI writes a site's image holding a new token, for those who may issue one", func(t *testing.T) {
		base := siteimagetest.Base(t)
		dir := t.TempDir()
		image := filepath.Join(dir, "site-b.iso")
		if out, err := b.f.Edgefleet(ctx, "site", "image", "site-b", "-n", ns, "-o", image, "--base", base, "--ttl", "2h"); err != nil {
			t.Fatalf("site image: %v\n%s", err, out)
		}
		if st, err := os.Stat(image); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("image: %v, mode %v, want 0600", err, st.Mode().Perm())
		}
		id, err := siteimage.Read(image)
		if err != nil {
			t.Fatal(err)
		}
		b.issued = append(b.issued, id.Token)
		if id.URL != b.f.APIURL {
			t.Errorf("identity URL %q, want %q", id.URL, b.f.APIURL)
		}
		if id.Site != ns+"/site-b" {
			t.Errorf("identity site %q, want %s/site-b (the enroll request names it)", id.Site, ns)
		}
		if !bytes.Equal(bytes.TrimSpace(id.CA), bytes.TrimSpace(b.ca)) {
			t.Error("the identity's CA is not the API's")
		}
		tokenID, _, err := enrollment.ParseToken(id.Token)
		if err != nil {
			t.Fatalf("the image's token %v", err)
		}
		if out, err := b.f.Edgefleet(ctx, "site", "token", "list", "site-b", "-n", ns); err != nil || !regexp.MustCompile(tokenID+`\s+Valid`).Match(out) {
			t.Errorf("the image's token %s is not a valid token of site-b: %v\n%s", tokenID, err, out)
		}

		// A fleet viewer may not issue tokens: refused, no image.
		kubeconfig := filepath.Join(dir, "viewer.kubeconfig")
		kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: g\n  cluster:\n    server: %q\n    certificate-authority: %q\n"+
			"users:\n- name: v\n  user:\n    token: %q\ncontexts:\n- name: g\n  context:\n    cluster: g\n    user: v\ncurrent-context: g\n", b.f.APIURL, b.f.APICAFile, b.viewer)
		if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		root, err := testutil.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		viewerImage := filepath.Join(dir, "viewer.iso")
		out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "edgefleet"), "--kubeconfig", kubeconfig, "--api-server", b.f.APIURL,
			"--api-ca-file", b.f.APICAFile, "site", "image", "site-b", "-n", ns, "-o", viewerImage, "--base", base).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "may not create sites/enrollment") {
			t.Errorf("viewer's site image: %v\n%s", err, out)
		}
		if _, err := os.Stat(viewerImage); !os.IsNotExist(err) {
			t.Errorf("viewer's image written (%v)", err)
		}
	})

	t.Run("with --with-release the image carries the release's artifacts, verified", func(t *testing.T) {
		if err := b.f.CreateSimulatedReleases(ctx, ns, map[string]string{"edge-1": "v1.36.3"}); err != nil {
			t.Fatal(err)
		}
		rel := &fleetv1.Release{}
		if err := b.f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-1"}, rel); err != nil {
			t.Fatal(err)
		}
		base := siteimagetest.Base(t)
		dir := t.TempDir()
		records := func() int {
			var list corev1.SecretList
			if err := b.f.Global.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{enrollment.SiteLabel}); err != nil {
				t.Fatal(err)
			}
			return len(list.Items)
		}
		before := records()
		missing := filepath.Join(dir, "missing.iso")
		if out, err := b.f.Edgefleet(ctx, "site", "image", "site-b", "-n", ns, "-o", missing, "--base", base, "--with-release", "edge-9"); err == nil || !strings.Contains(string(out), `release fleet/edge-9 for the site pack`) {
			t.Errorf("a release that does not exist: %v\n%s", err, out)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Errorf("image written for a missing release (%v)", err)
		}
		if n := records(); n != before {
			t.Errorf("%d enrollment tokens issued for a refused request", n-before)
		}

		image := filepath.Join(dir, "site-b.iso")
		out, err := b.f.Edgefleet(ctx, "site", "image", "site-b", "-n", ns, "-o", image, "--base", base, "--with-release", "edge-1")
		if err != nil {
			t.Fatalf("site image --with-release: %v\n%s", err, out)
		}
		id, err := siteimage.Read(image)
		if err != nil {
			t.Fatal(err)
		}
		b.issued = append(b.issued, id.Token)
		p, err := siteimage.OpenPack(image)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if p.Manifest.Release != ns+"/edge-1" || p.Manifest.KubernetesVersion != "v1.36.3" {
			t.Errorf("pack of %q at %q, want %s/edge-1 at v1.36.3", p.Manifest.Release, p.Manifest.KubernetesVersion, ns)
		}
		var packed []string
		for _, a := range p.Manifest.Artifacts {
			packed = append(packed, a.SHA256)
			if err := p.Download(ctx, a.SHA256, filepath.Join(dir, a.SHA256), nil); err != nil {
				t.Errorf("%s from the pack: %v", a.Name, err)
			}
		}
		var want []string
		for _, a := range rel.Spec.Artifacts() {
			want = append(want, a.SHA256)
		}
		if strings.Join(packed, ",") != strings.Join(want, ",") || len(want) != 4 {
			t.Errorf("pack holds %v, want the release's %d artifacts %v", packed, len(want), want)
		}
	})

	t.Run("no token is found in etcd, logs or events", func(t *testing.T) {
		if err := b.f.StopController(); err != nil { // flush its log
			t.Fatal(err)
		}
		logData, err := os.ReadFile(b.f.ControllerLog())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(logData, []byte("Enrolled a site")) || !bytes.Contains(logData, []byte("Refused an enrollment")) {
			t.Fatalf("the controller's log lacks the enrollment lines: the search below would prove nothing")
		}
		evs := b.allEvents()
		for _, token := range b.issued {
			_, secret, _ := strings.Cut(token, ".")
			for _, needle := range []string{token, secret} {
				for name, cp := range map[string]*controlplane.ControlPlane{"global": b.f.Global, "site-a": b.f.Sites["site-a"], "site-b": b.f.Sites["site-b"]} {
					files, err := cp.EtcdFilesContaining([]byte(needle))
					if err != nil {
						t.Fatal(err)
					}
					if len(files) > 0 {
						t.Errorf("a token's secret is in %s's etcd files %v", name, files)
					}
				}
				if bytes.Contains(logData, []byte(needle)) {
					t.Errorf("a token's secret is in the global controller's log")
				}
				if strings.Contains(b.enrollLog, needle) {
					t.Errorf("a token's secret is in local-controller enroll's log")
				}
				if strings.Contains(evs, needle) {
					t.Errorf("a token's secret is in an event")
				}
			}
		}
		t.Logf("searched %d tokens in 3 etcd data directories, %d bytes of log and the events", len(b.issued), len(logData))
	})

	t.Run("the janitor deletes the records of tokens expired longer than the retention", func(t *testing.T) {
		expired, _, _ := strings.Cut(b.issued[1], ".") // edited to have expired a minute ago
		if err := b.f.StartController(ctx, "--enrollment-token-retention", "30s", "--janitor-interval", "1s"); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, time.Minute, "the expired token's record pruned", func() (bool, string) {
			err := b.f.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: enrollment.SecretName(expired)}, &corev1.Secret{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		var list corev1.SecretList
		if err := b.f.Global.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{enrollment.SiteLabel}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(b.issued)-1 {
			t.Errorf("%d token records left of %d, want all but the expired one", len(list.Items), len(b.issued))
		}
	})
}

// issue creates a token of site as the fleet admin.
func (b *bed) issue(site, ttl string) string {
	b.t.Helper()
	var got restv1.EnrollmentToken
	status, e := b.request(http.MethodPost, "/api/v1/namespaces/fleet/sites/"+site+"/enrollment-tokens", b.admin, fmt.Sprintf(`{"ttl":%q}`, ttl), &got)
	if status != http.StatusCreated || got.Token == "" || got.State != restv1.TokenValid {
		b.t.Fatalf("issue a token of %s: %d %+v %+v", site, status, e, got)
	}
	b.issued = append(b.issued, got.Token)
	return got.Token
}

// request sends a request to the global controller's API and decodes the answer into out (on
// 2xx) or an Error.
func (b *bed) request(method, path, token, body string, out any) (int, restv1.Error) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.f.APIURL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	// Token records, tokens and enrollments: no answer is kept by a cache.
	if resp.StatusCode < 300 && (resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "no-store") {
		b.t.Errorf("%s %s: %d with Content-Type %q, Cache-Control %q; want application/json, no-store", method, path, resp.StatusCode,
			resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
	}
	var e restv1.Error
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	} else {
		_ = json.Unmarshal(data, &e)
	}
	return resp.StatusCode, e
}

// runEnroll runs bin/local-controller enroll on site's admin kubeconfig with token in a 0600
// file and returns its output.
func (b *bed) runEnroll(site, token string) string {
	b.t.Helper()
	out, err := b.f.RunEnroll(b.t.Context(), ns, site, "edge-a", token, "--credential-ttl", "24h")
	if err != nil {
		b.t.Fatal(err)
	}
	return string(out)
}

// options are the site side's options of an enrollment of site with token, pinning ca.
func (b *bed) options(site, token string, ca []byte) enroll.Options {
	return enroll.Options{GlobalURL: b.f.APIURL, CA: ca, Token: token, Namespace: ns, Site: site, Machine: "edge-a",
		AccessManifest: b.manifest, CredentialTTL: 24 * time.Hour,
		RequestTimeout: 30 * time.Second, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second, Log: testr.New(b.t)}
}

// siteCredential applies the site access manifest on site and returns a kubeconfig of its
// least-privilege identity, as the site side would send it.
func (b *bed) siteCredential(site string) []byte {
	b.t.Helper()
	cp := b.f.Sites[site]
	if _, err := cp.SiteKubeconfig(b.t.Context()); err != nil { // applies the manifest
		b.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	secs := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("edgefleet-system").CreateToken(b.t.Context(), enroll.ServiceAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	kc, err := enroll.Kubeconfig(cp.Config.Host, cp.Config.CAData, tr.Status.Token)
	if err != nil {
		b.t.Fatal(err)
	}
	return kc
}

// editRecord changes a token's record as an admin of the global cluster could.
func (b *bed) editRecord(token string, edit func(*corev1.Secret)) {
	b.t.Helper()
	id, _, _ := strings.Cut(token, ".")
	s := &corev1.Secret{}
	if err := b.f.Global.Client.Get(b.t.Context(), client.ObjectKey{Namespace: ns, Name: enrollment.SecretName(id)}, s); err != nil {
		b.t.Fatal(err)
	}
	edit(s)
	if err := b.f.Global.Client.Update(b.t.Context(), s); err != nil {
		b.t.Fatal(err)
	}
}

// state is what a refused enrollment must leave alone on the global cluster.
type state struct {
	secrets map[string]string // name → resourceVersion (a token's record: its data but the count of failed attempts)
	events  string
}

func (b *bed) snapshot() state {
	b.t.Helper()
	var list corev1.SecretList
	if err := b.f.Global.Client.List(b.t.Context(), &list, client.InNamespace(ns)); err != nil {
		b.t.Fatal(err)
	}
	s := state{secrets: map[string]string{}, events: b.events()}
	for _, it := range list.Items {
		s.secrets[it.Name] = it.ResourceVersion
		if it.Type == enrollment.SecretType {
			// A refusal counts against its token, if the token proved its secret; nothing
			// else of the token's record changes.
			delete(it.Data, "failedAttempts")
			s.secrets[it.Name] = fmt.Sprint(it.Data)
		}
	}
	return s
}

func (b *bed) assertUnchanged(before state) {
	b.t.Helper()
	after := b.snapshot()
	if fmt.Sprint(after.secrets) != fmt.Sprint(before.secrets) {
		b.t.Errorf("Secrets changed: before %v, after %v", before.secrets, after.secrets)
	}
	if after.events != before.events {
		b.t.Errorf("events changed: before %s, after %s", before.events, after.events)
	}
}

// events are the Enrolled events of namespace fleet, as JSON.
func (b *bed) events() string {
	b.t.Helper()
	var list eventsv1.EventList
	if err := b.f.Global.Client.List(b.t.Context(), &list, client.InNamespace(ns)); err != nil {
		b.t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range list.Items {
		if e.Reason == "Enrolled" {
			d, _ := json.Marshal(e)
			sb.Write(d)
		}
	}
	return sb.String()
}

// allEvents are every event of the global cluster (core and events.k8s.io), as JSON.
func (b *bed) allEvents() string {
	b.t.Helper()
	var list eventsv1.EventList
	if err := b.f.Global.Client.List(b.t.Context(), &list); err != nil {
		b.t.Fatal(err)
	}
	var core corev1.EventList
	if err := b.f.Global.Client.List(b.t.Context(), &core); err != nil {
		b.t.Fatal(err)
	}
	d1, _ := json.Marshal(list)
	d2, _ := json.Marshal(core)
	if !bytes.Contains(d1, []byte("Enrolled")) {
		b.t.Fatalf("no Enrolled event among the events: the search would prove nothing")
	}
	return string(d1) + string(d2)
}

func (b *bed) waitReady(site string) {
	b.t.Helper()
	testutil.WaitFor(b.t, time.Minute, site+" Ready", func() (bool, string) {
		s := &fleetv1.Site{}
		err := b.f.Global.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: site}, s)
		if apierrors.IsNotFound(err) || err != nil {
			return false, fmt.Sprint(err)
		}
		c := meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteReadyCondition)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message
	})
}
