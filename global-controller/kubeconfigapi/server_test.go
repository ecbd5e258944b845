package kubeconfigapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/kubeconfigapi"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// The suite runs the endpoint over real components: a global control plane answering
// TokenReview and SubjectAccessReview with the ClusterRoles shipped in deploy/, and a site
// control plane reached as the user the shipped site Role binds (deploy/rbac/site). The BPA,
// another component, is stood in for by answer, which signs requests with a CA of the test
// (the BPA's own reconciler is tested in bpa/reconcilers/clustercredential).
var (
	global, site *controlplane.ControlPlane
	globalCS     kubernetes.Interface
	// server serves the endpoint; impatientServer too, waiting only 2 s for the BPA.
	server, impatientServer *httptest.Server
)

const ns = "fleet-a"

// sites reaches the site control plane for site-a and site-silent (whose BPA never answers),
// as the global controller's user edgefleet-global; any other Site is unreachable.
type sites struct{ c client.Client }

func (s sites) Client(key types.NamespacedName) (client.Client, error) {
	if key.Name != "site-a" && key.Name != "site-silent" {
		return nil, fmt.Errorf("site %s has no client: its kubeconfig was not loaded", key)
	}
	return s.c, nil
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	var err error
	if global, err = controlplane.Start(controlplane.Options{Name: "global", InstallCRDs: true}); err != nil {
		return fail(err)
	}
	defer func() { _ = global.Stop() }()
	if site, err = controlplane.Start(controlplane.Options{Name: "site", InstallSiteCRDs: true}); err != nil {
		return fail(err)
	}
	defer func() { _ = site.Stop() }()
	if globalCS, err = kubernetes.NewForConfig(global.Config); err != nil {
		return fail(err)
	}
	if err := global.ApplyManifest(ctx, "deploy/rbac/global-controller/roles.yaml"); err != nil {
		return fail(err)
	}
	if err := global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fail(err)
	}
	for _, name := range []string{"site-a", "site-gone", "site-silent"} {
		s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: name + "-kubeconfig"},
			Cluster: &fleetv1.SiteCluster{Release: "r1", Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}}},
		}}
		if err := global.Client.Create(ctx, s); err != nil {
			return fail(fmt.Errorf("create Site %s: %w", name, err))
		}
	}
	// The site: the global controller's Role (and its namespaces), an installed cluster.
	if err := site.ApplyManifest(ctx, controlplane.SiteAccessManifest); err != nil {
		return fail(err)
	}
	asGlobal := rest.CopyConfig(site.Config)
	asGlobal.Impersonate = rest.ImpersonationConfig{UserName: "edgefleet-global", Groups: []string{"system:authenticated"}}
	siteClient, err := client.New(asGlobal, client.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		return fail(err)
	}
	// The BPA, stood in for.
	go answer(ctx)
	// The global controller's side.
	globalMgr, err := ctrl.NewManager(global.Config, ctrl.Options{Scheme: controlplane.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return fail(err)
	}
	go func() { _ = globalMgr.Start(ctx) }()
	api := &kubeconfigapi.Server{
		Auth:     kubeauth.NewReviewer(kubeauth.Config{Client: globalCS, Group: "fleet.edgefleet.io", Resource: "artifacts"}),
		Reader:   global.Client,
		Sites:    sites{siteClient},
		Recorder: globalMgr.GetEventRecorder("kubeconfig-api"),
		Clock:    clock.RealClock{},
		MaxTTL:   2 * time.Hour,
	}
	impatient := *api
	impatient.Wait = 2 * time.Second
	mux := http.NewServeMux()
	mux.Handle(kubeconfigapi.Path, api.Handler())
	server = httptest.NewServer(mux)
	defer server.Close()
	// The same, waiting 2 s for the BPA: post sends site-silent's requests there.
	impatientMux := http.NewServeMux()
	impatientMux.Handle(kubeconfigapi.Path, impatient.Handler())
	impatientServer = httptest.NewServer(impatientMux)
	defer impatientServer.Close()
	return m.Run()
}

// answer stands in for the site's BPA: it signs every unanswered ClusterCredentialRequest's
// key for the spec's identity and expiry with a CA of its own, until ctx ends.
func answer(ctx context.Context) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "site-a"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	for serial := int64(2); ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		list := &sitev1.ClusterCredentialRequestList{}
		if err := site.Client.List(ctx, list); err != nil {
			continue
		}
		for _, r := range list.Items {
			if r.Answered() || r.Spec.Cluster == "site-silent" {
				continue
			}
			id := clustercred.Identity{User: r.Spec.User, Groups: r.Spec.Groups}
			pub, err := clustercred.PublicKey([]byte(r.Spec.CSR), id)
			if err != nil {
				r.Status = sitev1.ClusterCredentialRequestStatus{Reason: sitev1.CredentialReasonInvalidRequest, Message: err.Error()}
			} else {
				serial++
				tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: id.User, Organization: id.Groups},
					NotBefore: time.Now(), NotAfter: r.Spec.ExpirationTime.Time, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
				der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
				if err != nil {
					panic(err)
				}
				r.Status = sitev1.ClusterCredentialRequestStatus{
					Certificate:          string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
					CertificateAuthority: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
					Server:               "https://10.0.0.10:6443",
				}
			}
			_ = site.Client.Status().Update(ctx, &r)
		}
	}
}

// user creates a ServiceAccount, bound to edgefleet-cluster-user in ns when granted, and
// returns its token and the binding's name.
func user(t *testing.T, name string, granted bool) string {
	t.Helper()
	ctx := t.Context()
	if _, err := globalCS.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if granted {
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cluster-user"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-cluster-user"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}
		if _, err := globalCS.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := globalCS.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// post asks for a kubeconfig of site as the token's user.
func post(t *testing.T, token, site string, body any) (int, restv1.ClusterCredential, restv1.Error) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	srv := server
	if site == "site-silent" {
		srv = impatientServer
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/api/v1/namespaces/"+ns+"/sites/"+site+"/kubeconfig", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cred restv1.ClusterCredential
	var e restv1.Error
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&cred)
	} else {
		err = json.NewDecoder(resp.Body).Decode(&e)
	}
	if err != nil {
		t.Fatalf("answer %d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, cred, e
}

func newCSR(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := clustercred.NewCSR(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(csr)
}

// requestsLeft lists the ClusterCredentialRequests on the site.
func requestsLeft(t *testing.T) int {
	t.Helper()
	list := &sitev1.ClusterCredentialRequestList{}
	if err := site.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestKubeconfig(t *testing.T) {
	alice := user(t, "alice", true)
	bob := user(t, "bob", false)
	const aliceName = "system:serviceaccount:" + ns + ":alice"

	t.Run("a granted user gets a certificate for their own identity, recorded on the Site", func(t *testing.T) {
		status, cred, e := post(t, alice, "site-a", restv1.KubeconfigRequest{CSR: newCSR(t), TTLSeconds: 3600})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, e.Message)
		}
		if cred.User != "edgefleet:"+aliceName || cred.Server != "https://10.0.0.10:6443" || cred.Cluster != "site-a" ||
			!strings.Contains(cred.Certificate, "BEGIN CERTIFICATE") || !strings.Contains(cred.CertificateAuthority, "BEGIN CERTIFICATE") {
			t.Errorf("credential %+v", cred)
		}
		for _, g := range cred.Groups {
			if !strings.HasPrefix(g, "edgefleet:") {
				t.Errorf("group %q is not under edgefleet:", g)
			}
		}
		if left := time.Until(cred.ExpirationTime); left > time.Hour || left < 58*time.Minute {
			t.Errorf("expires in %s, want 1h", left)
		}
		if n := requestsLeft(t); n != 0 {
			t.Errorf("%d ClusterCredentialRequests left on the site", n)
		}
		waitFor(t, "the Site's event", func() error {
			list, err := globalCS.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, ev := range list.Items {
				if isIssue(ev, aliceName) {
					if strings.Contains(ev.Note, "BEGIN") {
						t.Errorf("event carries the certificate: %s", ev.Note)
					}
					return nil
				}
			}
			return fmt.Errorf("no KubeconfigIssued event naming %s among %d", aliceName, len(list.Items))
		})
	})

	t.Run("the lifetime is capped", func(t *testing.T) {
		status, cred, e := post(t, alice, "site-a", restv1.KubeconfigRequest{CSR: newCSR(t), TTLSeconds: 100 * 3600})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, e.Message)
		}
		if left := time.Until(cred.ExpirationTime); left > 2*time.Hour {
			t.Errorf("expires in %s, more than the maximum 2h", left)
		}
	})

	t.Run("an ungranted user is forbidden", func(t *testing.T) {
		status, _, e := post(t, bob, "site-a", restv1.KubeconfigRequest{CSR: newCSR(t)})
		if status != http.StatusForbidden || !strings.Contains(e.Message, "sites/kubeconfig") {
			t.Errorf("status %d: %s; want 403 naming sites/kubeconfig", status, e.Message)
		}
	})

	t.Run("a bad CSR is refused naming the field, and nothing reaches the site", func(t *testing.T) {
		status, _, e := post(t, alice, "site-a", restv1.KubeconfigRequest{CSR: "not a csr"})
		if status != http.StatusBadRequest || e.Field != "csr" {
			t.Errorf("status %d, field %q: %s", status, e.Field, e.Message)
		}
		if n := requestsLeft(t); n != 0 {
			t.Errorf("%d ClusterCredentialRequests on the site", n)
		}
	})

	t.Run("an unreachable site is 503, with nothing left behind", func(t *testing.T) {
		// alice's grant covers every Site of the namespace.
		status, _, e := post(t, alice, "site-gone", restv1.KubeconfigRequest{CSR: newCSR(t)})
		if status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "cannot be reached") {
			t.Errorf("status %d: %s; want 503", status, e.Message)
		}
	})

	t.Run("a BPA that does not answer is 504, with nothing left behind", func(t *testing.T) {
		status, _, e := post(t, alice, "site-silent", restv1.KubeconfigRequest{CSR: newCSR(t)})
		if status != http.StatusGatewayTimeout || !strings.Contains(e.Message, "did not answer within 2s") {
			t.Errorf("status %d: %s; want 504", status, e.Message)
		}
		if n := requestsLeft(t); n != 0 {
			t.Errorf("%d ClusterCredentialRequests left on the site", n)
		}
	})

	t.Run("revoking the grant stops the next issue", func(t *testing.T) {
		// Cached by the reviewer's usual cache, the grant would live on for its TTL (10 s).
		if err := globalCS.RbacV1().RoleBindings(ns).Delete(t.Context(), "alice-cluster-user", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// 2 s: the API server's RBAC informer, not a cache of ours.
		testutil.WaitFor(t, 2*time.Second, "the next issue forbidden once the binding was deleted", func() (bool, string) {
			status, _, e := post(t, alice, "site-a", restv1.KubeconfigRequest{CSR: newCSR(t)})
			return status == http.StatusForbidden, fmt.Sprintf("%d %s", status, e.Message)
		})
	})
}

func isIssue(ev eventsv1.Event, user string) bool {
	return ev.Reason == "KubeconfigIssued" && ev.Regarding.Name == "site-a" &&
		strings.Contains(ev.Note, user) && strings.Contains(ev.Note, "cluster site-a") && strings.Contains(ev.Note, "valid until")
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, what, func() (bool, string) {
		err := check()
		return err == nil, fmt.Sprint(err)
	})
}
