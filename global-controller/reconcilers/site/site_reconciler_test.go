package site_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const wait = 60 * time.Second

// startSite starts a control plane standing for a site, with its local controller's version
// published, and returns it with the least-privilege kubeconfig the global controller gets.
func startSite(t *testing.T, localVersion string) (*controlplane.ControlPlane, []byte) {
	t.Helper()
	return startSiteWith(t, controlplane.Options{Name: "site"}, localVersion)
}

func startSiteWith(t *testing.T, opts controlplane.Options, localVersion string) (*controlplane.ControlPlane, []byte) {
	t.Helper()
	cp := controlplane.StartT(t, opts)
	kc, err := cp.SiteKubeconfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.PublishLocalControllerVersion(t.Context(), localVersion); err != nil {
		t.Fatal(err)
	}
	return cp, kc
}

// register creates the kubeconfig Secret and the Site on the global cluster; edits change the
// Site before it is created.
func register(t *testing.T, ns, name string, kubeconfig []byte, edits ...func(*fleetv1.Site)) (*fleetv1.Site, *corev1.Secret) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if err := global.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: secret.Name}},
	}
	for _, edit := range edits {
		edit(site)
	}
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	return site, secret
}

// waitFor waits until the site's condition has this status and reason, and returns the site.
func waitFor(t *testing.T, key types.NamespacedName, condType string, status metav1.ConditionStatus, reason string) *fleetv1.Site {
	t.Helper()
	site := &fleetv1.Site{}
	testutil.Eventually(t, wait, func() error {
		if err := global.Client.Get(t.Context(), key, site); err != nil {
			return err
		}
		c := meta.FindStatusCondition(site.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("site %s: %s is %+v, want status %s reason %s", key, condType, c, status, reason)
		}
		return nil
	})
	return site
}

func waitForHosts(t *testing.T, key types.NamespacedName, want fleetv1.HostCounts) {
	t.Helper()
	testutil.Eventually(t, wait, func() error {
		s := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), key, s); err != nil {
			return err
		}
		if s.Status.Hosts != want {
			return fmt.Errorf("status.hosts = %+v, want %+v", s.Status.Hosts, want)
		}
		return nil
	})
}

// TestSiteWithOnlyAControlPlaneHost counts a site whose worker count never left zero.
func TestSiteWithOnlyAControlPlaneHost(t *testing.T) {
	_, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)
	site, _ := register(t, ns, "tiny", kc)
	key := client.ObjectKeyFromObject(site)
	waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
	createHost(t, ns, "tiny-cp-0", site.Name, fleetv1.RoleControlPlane, "52:54:00:00:02:01")
	waitForHosts(t, key, fleetv1.HostCounts{Total: 1, ControlPlane: 1})
}

func createHost(t *testing.T, ns, name, site string, role fleetv1.HostRole, mac string) {
	t.Helper()
	host := &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1.HostSpec{
			SiteRef: fleetv1.SiteReference{Name: site}, Role: role, BootMACAddress: mac,
			BMC: fleetv1.BMCDetails{Address: "ipmi://192.0.2.1", CredentialsSecretRef: &fleetv1.SecretReference{Name: name + "-bmc"}},
		},
	}
	if err := global.Client.Create(t.Context(), host); err != nil {
		t.Fatal(err)
	}
}

func serverVersion(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	v, err := discovery.NewDiscoveryClientForConfigOrDie(cp.Config).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

func TestReachableSiteBecomesReady(t *testing.T) {
	siteCP, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)
	site, _ := register(t, ns, "store-1", kc)
	createHost(t, ns, "cp-0", site.Name, fleetv1.RoleControlPlane, "52:54:00:00:01:01")
	createHost(t, ns, "w-0", site.Name, fleetv1.RoleWorker, "52:54:00:00:01:02")
	createHost(t, ns, "w-1", site.Name, fleetv1.RoleWorker, "52:54:00:00:01:03")

	key := client.ObjectKeyFromObject(site)
	got := waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
	if want := serverVersion(t, siteCP); got.Status.KubernetesVersion != want || want == "" {
		t.Errorf("status.kubernetesVersion = %q, want the site's %q", got.Status.KubernetesVersion, want)
	}
	if got.Status.LocalControllerVersion != "v0.1.0-test" {
		t.Errorf("status.localControllerVersion = %q, want v0.1.0-test", got.Status.LocalControllerVersion)
	}
	if got.Status.LastHeartbeatTime == nil {
		t.Error("status.lastHeartbeatTime is not set")
	}
	for _, c := range []string{fleetv1.SiteKubeconfigValidCondition, fleetv1.SiteReachableCondition} {
		if !meta.IsStatusConditionTrue(got.Status.Conditions, c) {
			t.Errorf("%s is not True: %+v", c, meta.FindStatusCondition(got.Status.Conditions, c))
		}
	}
	if !controllerutil.ContainsFinalizer(got, fleetv1.SiteFinalizer) {
		t.Errorf("finalizer %s missing: %v", fleetv1.SiteFinalizer, got.Finalizers)
	}
	waitForHosts(t, key, fleetv1.HostCounts{Total: 3, ControlPlane: 1, Worker: 2})
	testutil.Eventually(t, wait, func() error { return hasEvent(t, ns, site.Name, fleetv1.ReasonSiteReady) })

	// Counts follow hosts going away, down to zero workers.
	for _, name := range []string{"w-0", "w-1"} {
		if err := global.Client.Delete(t.Context(), &fleetv1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	waitForHosts(t, key, fleetv1.HostCounts{Total: 1, ControlPlane: 1})

	// The heartbeat moves on while the site stays reachable.
	first := got.Status.LastHeartbeatTime.Time
	testutil.Eventually(t, wait, func() error {
		s := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), key, s); err != nil {
			return err
		}
		if !s.Status.LastHeartbeatTime.After(first) {
			return fmt.Errorf("heartbeat still %s", s.Status.LastHeartbeatTime)
		}
		return nil
	})

	// Deleting the site goes through the finalizer and removes it.
	if err := global.Client.Delete(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		err := global.Client.Get(t.Context(), key, &fleetv1.Site{})
		if err == nil {
			return fmt.Errorf("site %s still exists", key)
		}
		return client.IgnoreNotFound(err)
	})
}

// watchSite watches the Site (stopped at the test's end); the first event is its current state.
func watchSite(t *testing.T, key types.NamespacedName) watch.Interface {
	t.Helper()
	wc, err := client.NewWithWatch(global.Config, client.Options{Scheme: global.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &fleetv1.SiteList{}, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatalf("watch Site %s: %v", key, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// TestQuietProbesAreNotWritten: a site that stays as it is is probed every heartbeat, but its
// Site is written only every statusReport, with the times of the probe that wrote it.
func TestQuietProbesAreNotWritten(t *testing.T) {
	t.Parallel()
	_, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)
	site, _ := register(t, ns, "quiet", kc)
	key := client.ObjectKeyFromObject(site)
	waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)

	w := watchSite(t, key)
	var (
		mu      sync.Mutex
		written []fleetv1.SiteStatus
	)
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*fleetv1.Site); ok {
				mu.Lock()
				written = append(written, s.Status)
				mu.Unlock()
			}
		}
	}()
	probes := 2*int(statusReport/heartbeat) + 1
	heartbeats(t, key, probes)
	w.Stop()

	mu.Lock()
	defer mu.Unlock()
	// The first state is the one the watch started from; a write comes at least every
	// statusReport, so the probes saw at least one more.
	if len(written) < 2 || len(written) > probes {
		t.Fatalf("%d probes wrote the Site %d times, want at least once (every %s) and fewer times than probed", probes, len(written)-1, statusReport)
	}
	for i, s := range written {
		if s.LastCheckTime == nil || s.LastHeartbeatTime == nil || !s.LastHeartbeatTime.Equal(s.LastCheckTime) {
			t.Errorf("write %d: lastCheckTime %v, lastHeartbeatTime %v, want the same time (the site answered every probe)", i, s.LastCheckTime, s.LastHeartbeatTime)
			continue
		}
		if i > 0 && written[i-1].LastCheckTime != nil {
			if d := s.LastCheckTime.Sub(written[i-1].LastCheckTime.Time); d < statusReport {
				t.Errorf("write %d came %s after the one before, want at least %s (nothing changed but the probe time)", i, d, statusReport)
			}
		}
	}
}

func TestStoppedSiteBecomesUnreachableAndRecovers(t *testing.T) {
	siteCP, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)
	site, _ := register(t, ns, "store-2", kc)
	key := client.ObjectKeyFromObject(site)
	waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)

	if err := siteCP.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, key, fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable)
	msg := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReachableCondition).Message
	if !strings.Contains(msg, "did not answer") || !strings.Contains(msg, "connection refused") {
		t.Errorf("Reachable message does not say what happened: %q", msg)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReadyCondition)
	if ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "Reachable is False") {
		t.Errorf("Ready = %+v, want False naming Reachable", ready)
	}
	// The kubeconfig itself is still fine.
	if !meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1.SiteKubeconfigValidCondition) {
		t.Errorf("KubeconfigValid went False for an unreachable site: %+v", got.Status.Conditions)
	}
	testutil.Eventually(t, wait, func() error { return hasEvent(t, ns, site.Name, fleetv1.ReasonAPIServerUnreachable) })

	if err := siteCP.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, fleetv1.SiteReachableCondition, metav1.ConditionTrue, fleetv1.ReasonAPIServerReachable)
	waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
}

const execKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/touch
      args: ["/tmp/edgefleet-pwned"]
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// TestBadKubeconfigIsReported registers sites whose kubeconfig cannot be used next to a good
// one: each bad one gets KubeconfigValid=False with its own reason, the Secrets are left as they
// were, the good site stays Ready, and fixing the Secret makes the site Ready.
func TestBadKubeconfigIsReported(t *testing.T) {
	_, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)
	good, _ := register(t, ns, "good", kc)
	goodKey := client.ObjectKeyFromObject(good)
	readySince := meta.FindStatusCondition(
		waitFor(t, goodKey, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady).Status.Conditions,
		fleetv1.SiteReadyCondition).LastTransitionTime

	tests := []struct {
		name       string
		kubeconfig []byte
		reason     string
		inMessage  string
	}{
		{"garbage", []byte("\x00\x01 this is not a kubeconfig {{{"), fleetv1.ReasonKubeconfigInvalid, "kubeconfig is invalid"},
		{"empty", []byte{}, fleetv1.ReasonKubeconfigInvalid, "empty"},
		{"exec-plugin", []byte(execKubeconfig), fleetv1.ReasonKubeconfigUnsafe, `users["u"].exec would run a command`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site, secret := register(t, ns, tt.name, tt.kubeconfig)
			got := waitFor(t, client.ObjectKeyFromObject(site), fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, tt.reason)
			if msg := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteKubeconfigValidCondition).Message; !strings.Contains(msg, tt.inMessage) {
				t.Errorf("KubeconfigValid message %q does not contain %q", msg, tt.inMessage)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReachableCondition); c == nil || c.Status != metav1.ConditionUnknown {
				t.Errorf("Reachable = %+v, want Unknown (not checked)", c)
			}
			if !meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1.SiteReadyCondition) {
				t.Errorf("Ready is not False: %+v", got.Status.Conditions)
			}
			after := &corev1.Secret{}
			if err := global.Client.Get(t.Context(), client.ObjectKeyFromObject(secret), after); err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != secret.ResourceVersion {
				t.Errorf("the controller changed Secret %s", secret.Name)
			}

			// Fixing the Secret rebuilds the site's client.
			after.Data["kubeconfig"] = kc
			if err := global.Client.Update(t.Context(), after); err != nil {
				t.Fatal(err)
			}
			waitFor(t, client.ObjectKeyFromObject(site), fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
		})
	}
	if _, err := os.Stat("/tmp/edgefleet-pwned"); err == nil {
		t.Error("the exec plugin of a site kubeconfig ran on the global controller")
	}
	got := waitFor(t, goodKey, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteReadyCondition); !c.LastTransitionTime.Equal(&readySince) {
		t.Errorf("the good site's Ready changed at %s while the bad ones were reconciled", c.LastTransitionTime)
	}
}

// TestMissingSecretOrKey covers a Secret that does not exist (yet) and one without the key.
func TestMissingSecretOrKey(t *testing.T) {
	_, kc := startSite(t, "v0.1.0-test")
	ns := global.Namespace(t)

	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec:       fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "late-kubeconfig", Key: "config"}},
	}
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(site)
	got := waitFor(t, key, fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, fleetv1.ReasonSecretNotFound)
	if msg := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteKubeconfigValidCondition).Message; !strings.Contains(msg, `"late-kubeconfig"`) {
		t.Errorf("message does not name the Secret: %q", msg)
	}

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kc},
	}
	if err := global.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, key, fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, fleetv1.ReasonSecretKeyMissing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, fleetv1.SiteKubeconfigValidCondition).Message; !strings.Contains(msg, `"config"`) {
		t.Errorf("message does not name the key: %q", msg)
	}

	secret.Data = map[string][]byte{"config": kc}
	if err := global.Client.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady)
}

func hasEvent(t *testing.T, ns, site, reason string) error {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := global.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == site && e.Regarding.Kind == "Site" && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no event with reason %s for site %s among %d events", reason, site, len(list.Items))
}
