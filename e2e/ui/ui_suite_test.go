package ui_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	uberzap "go.uber.org/zap"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// The test bed, one for the suite: a global control plane; site control plane sim, where a
// ClusterSimulator answers for the stores, and far, with one site of its own that the
// unreachable spec cuts off; the real bin/global-controller serving the UI over HTTPS; Debian's
// chromium.
var (
	fleet   *testfleet.Fleet
	browser context.Context
	// base is the UI's origin (https://127.0.0.1:PORT).
	base string
	// adminToken and viewerToken belong to ServiceAccounts bound to edgefleet-fleet-admin and
	// edgefleet-fleet-viewer.
	adminToken, viewerToken string
	// stores are the simulated sites behind sim, far the one behind far.
	stores []string
	far    string
	// simLog is the log of sim's local controller, whose lines the Logs panel shows: a real
	// sitelogs.Responder answers from the ring it is teed into (the ClusterSimulator stands in
	// for the rest of the local controller).
	simLog *uberzap.Logger
)

const (
	ns = "fleet"
	// failing is the store whose patch fails (never the canary, the first store).
	failing = "store-00007"
	// workTime is how long each simulated site takes for an operation: long enough for a
	// browser to see a campaign move, and a step of the BPA's on a site's page.
	workTime = 4 * time.Second
)

// controllerArgs make the controller notice changes of a dozen sites within seconds.
var controllerArgs = []string{"--site-heartbeat-interval=2s", "--site-operation-poll-interval=500ms", "--site-min-retry-interval=500ms",
	"--site-timeout=2s", "--campaign-resync-interval=2s"}

func TestUI(t *testing.T) {
	RegisterFailHandler(Fail)
	testutil.RunSpecs(t, "edgefleet web UI in headless Chromium")
}

var _ = BeforeSuite(func(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	fleet, err = testfleet.StartFleet(ctx, testfleet.FleetOptions{Sites: []string{"sim", "far"}, ControllerArgs: controllerArgs, TLS: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(fleet.Stop()).To(Succeed()) })
	base = fleet.APIURL
	adminToken, err = fleet.Token(ctx, "edgefleet-system", "ui-admin", "edgefleet-fleet-admin")
	Expect(err).NotTo(HaveOccurred())
	viewerToken, err = fleet.Token(ctx, "edgefleet-system", "ui-viewer", "edgefleet-fleet-viewer")
	Expect(err).NotTo(HaveOccurred())

	By("simulating the sites' local controllers and BPAs")
	simCtx, stopSims := context.WithCancel(context.WithoutCancel(ctx))
	DeferCleanup(stopSims)
	for _, name := range []string{"sim", "far"} {
		sim := &sitesim.ClusterSimulator{WorkTime: workTime, Bootstrap: true, Fail: func(site, op string) bool { return site == failing && op != "" }}
		Expect(sim.Start(simCtx, fleet.Sites[name].Config)).To(Succeed())
	}

	By("answering sim's LogRequests as its local controller would, from a ring the test logs into")
	ring := sitelogs.NewRing(sitelogs.DefaultRingLines, sitelogs.DefaultRingBytes)
	simLog = uberzap.NewNop().WithOptions(ring.Tee()).Named("sim")
	simMgr, err := ctrl.NewManager(fleet.Sites["sim"].Config, ctrl.Options{Scheme: controlplane.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	Expect(err).NotTo(HaveOccurred())
	responder := &sitelogs.Responder{Client: simMgr.GetClient(), Component: sitev1.LogComponentLocalController, Ring: ring,
		Instance: sitelogs.Instance(time.Now()), Clock: clock.RealClock{}}
	Expect(responder.SetupWithManager(simMgr)).To(Succeed())
	go func() { defer GinkgoRecover(); Expect(simMgr.Start(simCtx)).To(Succeed()) }()

	By("uploading a release's artifacts and creating releases r0 (installed) and r1 (the patch)")
	Expect(fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(fleet.CreateSimulatedReleases(ctx, ns, map[string]string{"r0": "v1.36.2", "r1": "v1.36.3"})).To(Succeed())

	By("registering twelve stores behind sim and one site behind far, all at r0")
	stores, err = fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "store", 12, "r0", map[string]string{"chain": "stores"})
	Expect(err).NotTo(HaveOccurred())
	farSites, err := fleet.RegisterSimulatedSites(ctx, fleet.Sites["far"], ns, "far", 1, "r0", map[string]string{"chain": "remote"})
	Expect(err).NotTo(HaveOccurred())
	far = farSites[0]
	Eventually(func(g Gomega) {
		list := &fleetv1.SiteList{}
		g.Expect(fleet.Global.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(13))
		for _, s := range list.Items {
			g.Expect(apimeta.IsStatusConditionTrue(s.Status.Conditions, fleetv1.SiteClusterReadyCondition)).To(BeTrue(), "site %s: cluster not Ready: %+v", s.Name, s.Status)
			g.Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil(), "site %s: no BPA report", s.Name)
		}
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	browser = startBrowser(fleet.APICAFile)
})

// Dump the controller's log when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && fleet != nil {
		AddReportEntry("global controller", fleet.ControllerState(60))
	}
})

// campaign reads a campaign from the global cluster.
func campaign(ctx context.Context, name string) *fleetv1.Campaign {
	GinkgoHelper()
	c := &fleetv1.Campaign{}
	Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

// siteOperatorToken makes ServiceAccount edgefleet-system/name a site operator of the given
// sites of namespace ns, as docs/security.md says to narrow the role (a Role with the
// edgefleet-site-operator's rules on sites, sites/enrollment and sites/log, resourceNames set,
// hosts namespace-wide), and
// returns a token of it.
func siteOperatorToken(ctx context.Context, name string, sites []string) string {
	GinkgoHelper()
	c := fleet.Global.Client
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites", "sites/status"}, Verbs: []string{"get", "watch"}, ResourceNames: sites},
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites/enrollment"}, Verbs: []string{"get", "create", "delete"}, ResourceNames: sites},
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites/log"}, Verbs: []string{"get"}, ResourceNames: sites},
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"hosts", "hosts/status"}, Verbs: []string{"get", "list", "watch"}},
	}}
	Expect(c.Create(ctx, role)).To(Succeed())
	Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "edgefleet-system", Name: name}})).To(Succeed())
	Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "edgefleet-system", Name: name}}})).To(Succeed())
	cs, err := kubernetes.NewForConfig(fleet.Global.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts("edgefleet-system").CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// startUpload opens an upload session of size bytes on the artifact API as the admin and
// returns its id.
func startUpload(ctx context.Context, size int64) string {
	GinkgoHelper()
	body, err := json.Marshal(restv1.CreateUpload{Size: &size, ArtifactSpec: restv1.ArtifactSpec{
		Kind: restv1.KindBinaryPackage, Name: "ui-upload", Version: "1.0.0", Architecture: "amd64"}})
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/uploads", bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := httpsClient().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	var up restv1.Upload
	Expect(json.NewDecoder(resp.Body).Decode(&up)).To(Succeed())
	return up.ID
}

// appendUpload sends n random bytes to the upload session from offset.
func appendUpload(ctx context.Context, id string, offset, n int64) {
	GinkgoHelper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, base+"/api/v1/uploads/"+id, bytes.NewReader(data))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set(restv1.HeaderUploadOffset, strconv.FormatInt(offset, 10))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := httpsClient().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(BeNumerically("<", 300), "append to upload %s", id)
}
