package setup_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiconditions "sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// The bed of these tests: a site control plane with the site, Cluster-API and Metal3 CRDs,
// Metal3's baremetal-operator in test mode watching every namespace, a second control plane
// standing for the application cluster (the node simulator registers nodes there), and the
// local controller's manager with all its controllers, in-process.
var (
	site, app *controlplane.ControlPlane
	m3        *metal3.Operator
	siteC     client.Client
	appC      client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if site, err = controlplane.Start(controlplane.Options{Name: "site", InstallSiteCRDs: true, ClusterAPICRDs: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop("site control plane", site.Stop)
	m3, err = metal3.Start(ctx, site, metal3.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop("Metal3", m3.Stop)
	scheme, err := setup.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if siteC, err = client.New(site.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if app, err = controlplane.Start(controlplane.Options{Name: "application-cluster"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop("application control plane", app.Stop)
	appC = app.Client
	// The site's namespaces, and the BMC credentials every test's hosts use, in the hosts'
	// namespace as the global controller pushes them.
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sitev1.InfoNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sitev1.HostsNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.HostsNamespace, Name: "bmc"}, Data: map[string][]byte{"username": []byte("admin"), "password": []byte(hex.EncodeToString(pw))}},
	} {
		if err := siteC.Create(ctx, o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	cacheDir, err := os.MkdirTemp("", "edgefleet-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cacheDir)
	opts := setup.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr, opts.Election.Enabled = "0", "0", false
	opts.NodeBootstrapper = sitesim.NewNodeSimulator
	opts.CacheDir, opts.CacheAddr, opts.CacheURL = cacheDir, "127.0.0.1:0", "http://127.0.0.1:1"
	mgr, stopCache, err := setup.NewManager(ctx, site.Config, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	stopCache()
	return code
}

// stop stops a part of the bed, saying so when that fails.
func stop(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "stop %s: %v\n", what, err)
	}
}

// zapLevel logs errors only, everything with EDGEFLEET_TEST_VERBOSE set.
func zapLevel() zapcore.Level {
	if os.Getenv("EDGEFLEET_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// bed creates, in a namespace of its own, the application cluster's kubeconfig Secret (in
// Cluster-API's format), as the BPA would. The cluster's BareMetalHosts go to the site's hosts
// namespace, shared by the tests (their hosts have names of their own).
func bed(t *testing.T, cluster string) string {
	t.Helper()
	ns := site.Namespace(t)
	kc, err := app.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := siteC.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": kc},
	}); err != nil {
		t.Fatal(err)
	}
	return ns
}

var macSeq byte

func host(name string, role sitev1.HostRole) sitev1.ClusterHost {
	macSeq++
	return sitev1.ClusterHost{
		Name: name, Role: role,
		BootMACAddress: fmt.Sprintf("52:54:00:aa:00:%02x", macSeq),
		BMC:            sitev1.BMC{Address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/" + name, CredentialsName: "bmc"},
	}
}

func cluster(ns, name, version string, hosts ...sitev1.ClusterHost) *sitev1.ApplicationCluster {
	return &sitev1.ApplicationCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sitev1.ApplicationClusterSpec{
			KubernetesVersion: version,
			OSImage: sitev1.OSImage{
				SHA256: "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592",
				URL:    "http://127.0.0.1:8180/sha256/5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592",
			},
			Hosts: hosts,
			Network: sitev1.ClusterNetwork{
				PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
			},
		},
	}
}

// waitFor waits until check passes on the cluster, failing when what check says stays the same
// for stall: the bed shares a busy machine, so a slow cluster that keeps changing is waited for
// (up to five times stall), a stuck one is not.
func waitFor(t *testing.T, ac *sitev1.ApplicationCluster, stall time.Duration, check func(*sitev1.ApplicationCluster) error) {
	t.Helper()
	testutil.WaitProgress(t, stall, 5*stall, "ApplicationCluster "+ac.Name, func() (bool, string) {
		if err := siteC.Get(t.Context(), client.ObjectKeyFromObject(ac), ac); err != nil {
			return false, err.Error()
		}
		err := check(ac)
		return err == nil, fmt.Sprint(err)
	})
}

// settled passes when the cluster is Provisioned with these many ready nodes per role, all of
// version.
func settled(cp, workers int32, version string) func(*sitev1.ApplicationCluster) error {
	return func(ac *sitev1.ApplicationCluster) error {
		st := ac.Status
		ready := apimeta.FindStatusCondition(st.Conditions, sitev1.ApplicationClusterReadyCondition)
		switch {
		case st.Phase != sitev1.ClusterProvisioned:
			return fmt.Errorf("phase %q, want Provisioned; conditions %+v", st.Phase, st.Conditions)
		case ready == nil || ready.Status != metav1.ConditionTrue:
			return fmt.Errorf("Ready is %+v", ready)
		case st.ControlPlane != sitev1.NodeCounts{Ready: cp, Total: cp} || st.Workers != sitev1.NodeCounts{Ready: workers, Total: workers}:
			return fmt.Errorf("control plane %+v and workers %+v, want %d and %d ready", st.ControlPlane, st.Workers, cp, workers)
		case st.KubernetesVersion != version:
			return fmt.Errorf("status version %q, want %s", st.KubernetesVersion, version)
		case st.ObservedGeneration != ac.Generation:
			return fmt.Errorf("observed generation %d, want %d", st.ObservedGeneration, ac.Generation)
		}
		return nil
	}
}

// nodes returns the application cluster's nodes of these hosts, by name.
func nodes(t *testing.T, hosts ...string) map[string]corev1.Node {
	t.Helper()
	list := &corev1.NodeList{}
	if err := appC.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Node{}
	for _, n := range list.Items {
		if slices.Contains(hosts, n.Name) {
			out[n.Name] = n
		}
	}
	return out
}

func TestProvisionsControlPlaneAndWorkersFromInventory(t *testing.T) {
	ns := bed(t, "edge")
	hosts := []sitev1.ClusterHost{
		host("p-cp-0", sitev1.RoleControlPlane), host("p-cp-1", sitev1.RoleControlPlane), host("p-cp-2", sitev1.RoleControlPlane),
		host("p-w-0", sitev1.RoleWorker), host("p-w-1", sitev1.RoleWorker),
	}
	ac := cluster(ns, "edge", "v1.36.3", hosts...)
	if err := siteC.Create(t.Context(), ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ac, 3*time.Minute, settled(3, 2, "v1.36.3"))

	var names []string
	for i, hs := range ac.Status.Hosts {
		h := hosts[i]
		names = append(names, h.Name)
		if hs.Name != h.Name || hs.Role != h.Role || hs.ProvisioningState != "provisioned" || !hs.Ready || hs.Version != "v1.36.3" || hs.Machine == "" {
			t.Errorf("status of host %s: %+v", h.Name, hs)
		}
		bmh := &metal3api.BareMetalHost{}
		if err := siteC.Get(t.Context(), client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: h.Name}, bmh); err != nil {
			t.Fatal(err)
		}
		if !strings.EqualFold(bmh.Spec.BootMACAddress, h.BootMACAddress) || bmh.Spec.ConsumerRef == nil || bmh.Spec.Image == nil ||
			bmh.Spec.Image.Checksum != ac.Spec.OSImage.SHA256 || bmh.Status.Provisioning.State != metal3api.StateProvisioned {
			t.Errorf("BareMetalHost %s: MAC %s, consumer %v, image %+v, state %s", h.Name, bmh.Spec.BootMACAddress, bmh.Spec.ConsumerRef, bmh.Spec.Image, bmh.Status.Provisioning.State)
		}
		// What the operator's inspection (the fixture's) found is in the host's status.
		if d := bmh.Status.HardwareDetails; d == nil || hs.Hardware == nil || hs.Hardware.MemoryMiB != int64(d.RAMMebibytes) || hs.Hardware.CPUs != int32(d.CPU.Count) ||
			hs.Hardware.CPUModel != d.CPU.Model || len(hs.Hardware.Disks) != len(d.Storage) || hs.Hardware.Disks[0].SizeBytes != int64(d.Storage[0].SizeBytes) {
			t.Errorf("host %s's hardware %+v, want what the operator's inspection found: %+v", h.Name, hs.Hardware, d)
		}
		m := &clusterv1.Machine{}
		if err := siteC.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: hs.Machine}, m); err != nil {
			t.Fatal(err)
		}
		want := "metal3://" + sitev1.HostsNamespace + "/" + h.Name
		if m.Spec.ProviderID != want || m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
			t.Errorf("Machine %s of host %s: providerID %q (want %s), phase %s", m.Name, h.Name, m.Spec.ProviderID, want, m.Status.Phase)
		}
		if !capiconditions.IsTrue(m, clusterv1.MachineReadyCondition) {
			t.Errorf("Machine %s is not Ready for Cluster-API: %+v", m.Name, m.Status.Conditions)
		}
		_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
		if isCP != (h.Role == sitev1.RoleControlPlane) {
			t.Errorf("Machine %s of %s host %s has control-plane label %v", m.Name, h.Role, h.Name, isCP)
		}
	}
	got := nodes(t, names...)
	if len(got) != len(hosts) {
		t.Fatalf("application cluster has nodes %v, want %v", slices.Collect(maps.Keys(got)), names)
	}
	for _, n := range got {
		if n.Status.NodeInfo.KubeletVersion != "v1.36.3" || !strings.HasPrefix(n.Spec.ProviderID, "metal3://"+sitev1.HostsNamespace+"/") {
			t.Errorf("node %s: version %s, providerID %s", n.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID)
		}
	}
	md := &clusterv1.MachineDeployment{}
	if err := siteC.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "edge-workers"}, md); err != nil {
		t.Fatal(err)
	}
	if s := md.Spec.Rollout.Strategy.RollingUpdate; s.MaxSurge == nil || s.MaxSurge.IntValue() != 0 || *md.Spec.Replicas != 2 {
		t.Errorf("worker MachineDeployment: replicas %d, maxSurge %v; want 2 and 0", *md.Spec.Replicas, s.MaxSurge)
	}
}

func TestScaleOutScaleInAndVersionRoll(t *testing.T) {
	ctx := t.Context()
	ns := bed(t, "roll")
	// Three control-plane hosts: the workers' roll waits for the whole control plane.
	cp0, cp1, cp2 := host("r-cp-0", sitev1.RoleControlPlane), host("r-cp-1", sitev1.RoleControlPlane), host("r-cp-2", sitev1.RoleControlPlane)
	w0, w1, w2 := host("r-w-0", sitev1.RoleWorker), host("r-w-1", sitev1.RoleWorker), host("r-w-2", sitev1.RoleWorker)
	ac := cluster(ns, "roll", "v1.36.3", cp0, cp1, cp2, w0, w1)
	if err := siteC.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ac, 3*time.Minute, settled(3, 2, "v1.36.3"))

	update := func(change func(*sitev1.ApplicationCluster)) {
		t.Helper()
		controlplane.Update(t, siteC, ac, change)
	}
	bmh := func(name string) (*metal3api.BareMetalHost, error) {
		b := &metal3api.BareMetalHost{}
		return b, siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: name}, b)
	}

	t.Log("scale out: a third worker")
	update(func(ac *sitev1.ApplicationCluster) { ac.Spec.Hosts = append(ac.Spec.Hosts, w2) })
	waitFor(t, ac, 3*time.Minute, settled(3, 3, "v1.36.3"))

	t.Log("scale in, deprovisioning: remove r-w-0")
	w0History := watchHost(t, w0.Name)
	update(func(ac *sitev1.ApplicationCluster) {
		ac.Spec.Hosts = slices.DeleteFunc(ac.Spec.Hosts, func(h sitev1.ClusterHost) bool { return h.Name == w0.Name })
	})
	waitFor(t, ac, 3*time.Minute, settled(3, 2, "v1.36.3"))
	testutil.Eventually(t, time.Minute, func() error {
		b, err := bmh(w0.Name)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("BareMetalHost %s of the removed host is still there (%s), want it deprovisioned and deleted", w0.Name, b.Status.Provisioning.State)
	})
	// From its release on, the wiped host was off; it went powered off.
	versions := w0History()
	released := slices.IndexFunc(versions, func(b metal3api.BareMetalHost) bool { return b.Spec.ConsumerRef == nil })
	switch {
	case len(versions) == 0 || versions[0].Spec.ConsumerRef == nil:
		t.Errorf("BareMetalHost %s was not seen claimed before the scale in (%d versions)", w0.Name, len(versions))
	case released < 0:
		t.Errorf("BareMetalHost %s was deleted without being released", w0.Name)
	default:
		for _, b := range versions[released:] {
			if b.Spec.Online || b.Spec.Image != nil {
				t.Errorf("BareMetalHost %s released with online %v, image %+v (resourceVersion %s); want wiped and off",
					w0.Name, b.Spec.Online, b.Spec.Image, b.ResourceVersion)
			}
		}
		if last := versions[len(versions)-1]; last.Status.PoweredOn {
			t.Errorf("BareMetalHost %s was deleted powered on (%s)", w0.Name, last.Status.Provisioning.State)
		}
	}

	t.Log("scale in, keeping the host: remove r-w-1")
	update(func(ac *sitev1.ApplicationCluster) {
		ac.Spec.HostRemovalPolicy = sitev1.RemovalKeep
		ac.Spec.Hosts = slices.DeleteFunc(ac.Spec.Hosts, func(h sitev1.ClusterHost) bool { return h.Name == w1.Name })
	})
	waitFor(t, ac, 3*time.Minute, settled(3, 1, "v1.36.3"))
	testutil.Eventually(t, time.Minute, func() error {
		b, err := bmh(w1.Name)
		switch {
		case err != nil:
			return err
		case b.Spec.ConsumerRef != nil || b.Labels[sitev1.ClusterNameLabel] != "":
			return fmt.Errorf("kept host %s still bound: consumer %v, labels %v", w1.Name, b.Spec.ConsumerRef, b.Labels)
		case b.Status.Provisioning.State != metal3api.StateProvisioned || !b.Spec.Online:
			return fmt.Errorf("kept host %s is %s, online %v; want still provisioned and online", w1.Name, b.Status.Provisioning.State, b.Spec.Online)
		}
		return nil
	})
	// Cluster-API deletes a removed machine's node last, after its infrastructure.
	testutil.Eventually(t, time.Minute, func() error {
		if n := nodes(t, w0.Name, w1.Name); len(n) != 0 {
			return fmt.Errorf("nodes of removed hosts still registered: %v", slices.Collect(maps.Keys(n)))
		}
		return nil
	})

	t.Log("version change: v1.36.3 -> v1.36.4, control plane first")
	machineEvents := watchMachines(t, ns)
	update(func(ac *sitev1.ApplicationCluster) { ac.Spec.KubernetesVersion = "v1.36.4" })
	waitFor(t, ac, 5*time.Minute, settled(3, 1, "v1.36.4"))
	machines := &clusterv1.MachineList{}
	if err := siteC.List(ctx, machines, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		if m.Spec.Version != "v1.36.4" {
			t.Errorf("Machine %s still runs %s", m.Name, m.Spec.Version)
		}
	}
	if len(machines.Items) != 4 {
		t.Errorf("after the roll: %d machines, want 4", len(machines.Items))
	}
	// Replayed in the order the site's API server wrote them: when the first worker Machine of
	// the new version appeared, all three control-plane Machines ran it and were ready.
	newWorker := func(ev watch.Event) bool {
		m := ev.Object.(*clusterv1.Machine)
		_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
		return ev.Type == watch.Added && !isCP && m.Spec.Version == "v1.36.4"
	}
	var evs []watch.Event
	testutil.Eventually(t, 30*time.Second, func() error {
		if evs = machineEvents(); !slices.ContainsFunc(evs, newWorker) {
			return errors.New("the watch has not seen a worker Machine of v1.36.4 yet")
		}
		return nil
	})
	latest := map[string]*clusterv1.Machine{}
	firstWorker := ""
	for _, ev := range evs {
		m := ev.Object.(*clusterv1.Machine)
		if ev.Type == watch.Deleted {
			delete(latest, m.Name)
			continue
		}
		if newWorker(ev) && firstWorker == "" {
			firstWorker = m.Name
			var cps []string
			for _, o := range latest {
				if _, cp := o.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
					continue
				}
				cps = append(cps, o.Name)
				// Ready as the site's controller counts it: a node, and NodeReady.
				if o.Spec.Version != "v1.36.4" || !o.Status.NodeRef.IsDefined() || !capiconditions.IsTrue(o, clusterv1.MachineNodeReadyCondition) {
					t.Errorf("control-plane Machine %s when worker %s came: version %s, node %v, NodeReady %v; want v1.36.4 and ready",
						o.Name, m.Name, o.Spec.Version, o.Status.NodeRef, capiconditions.IsTrue(o, clusterv1.MachineNodeReadyCondition))
				}
			}
			if len(cps) != 3 {
				t.Errorf("control-plane Machines when worker %s came: %v, want 3", m.Name, cps)
			}
		}
		latest[m.Name] = m
	}
	for name, n := range nodes(t, cp0.Name, cp1.Name, cp2.Name, w2.Name) {
		if n.Status.NodeInfo.KubeletVersion != "v1.36.4" {
			t.Errorf("node %s runs %s after the roll", name, n.Status.NodeInfo.KubeletVersion)
		}
	}
	// Wiped and provisioned again, the hosts are back on.
	for _, name := range []string{cp0.Name, cp1.Name, cp2.Name, w2.Name} {
		b, err := bmh(name)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Spec.Online || b.Spec.ConsumerRef == nil || b.Status.Provisioning.State != metal3api.StateProvisioned {
			t.Errorf("BareMetalHost %s after the roll: online %v, consumer %v, %s", name, b.Spec.Online, b.Spec.ConsumerRef, b.Status.Provisioning.State)
		}
	}
}

// watchMachines watches the Machines of namespace ns from now on, until the test ends; the
// first events are the Machines there now (Added). The returned function gives the events seen
// so far, failing the test on a watch error.
func watchMachines(t *testing.T, ns string) func() []watch.Event {
	t.Helper()
	wc, err := client.NewWithWatch(site.Config, client.Options{Scheme: siteC.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &clusterv1.MachineList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watch Machines of %s: %v", ns, err)
	}
	seen := testutil.RecordWatch(w)
	t.Cleanup(seen.Stop)
	return func() []watch.Event {
		t.Helper()
		events, err := seen.Events()
		if err != nil {
			t.Fatalf("the Machines of %s: %v", ns, err)
		}
		return events
	}
}

// watchHost watches BareMetalHost name, in the site's hosts namespace, from now on. The returned function waits until the
// host is deleted (or the test's deadline) and returns every version seen, the deleted one
// last.
func watchHost(t *testing.T, name string) func() []metal3api.BareMetalHost {
	t.Helper()
	wc, err := client.NewWithWatch(site.Config, client.Options{Scheme: siteC.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &metal3api.BareMetalHostList{}, client.InNamespace(sitev1.HostsNamespace), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatalf("watch BareMetalHost %s: %v", name, err)
	}
	t.Cleanup(w.Stop)
	return func() []metal3api.BareMetalHost {
		t.Helper()
		var seen []metal3api.BareMetalHost
		for ev := range w.ResultChan() {
			b, ok := ev.Object.(*metal3api.BareMetalHost)
			if !ok {
				t.Fatalf("watch of BareMetalHost %s: %s %T", name, ev.Type, ev.Object)
			}
			seen = append(seen, *b)
			if ev.Type == watch.Deleted {
				return seen
			}
		}
		t.Fatalf("watch of BareMetalHost %s ended before its deletion", name)
		return nil
	}
}

func TestFailedHostIsReportedAndDoesNotBlockTheOthers(t *testing.T) {
	ns := bed(t, "partial")
	// Credentials without a password: Metal3 refuses to register the host.
	if err := siteC.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.HostsNamespace, Name: "bmc-no-password"},
		Data: map[string][]byte{"username": []byte("admin")}}); err != nil {
		t.Fatal(err)
	}
	bad := host("f-w-bad", sitev1.RoleWorker)
	bad.BMC.CredentialsName = "bmc-no-password"
	ac := cluster(ns, "partial", "v1.36.3", host("f-cp-0", sitev1.RoleControlPlane), host("f-w-0", sitev1.RoleWorker), bad)
	if err := siteC.Create(t.Context(), ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ac, 3*time.Minute, func(ac *sitev1.ApplicationCluster) error {
		st := ac.Status
		hp := apimeta.FindStatusCondition(st.Conditions, sitev1.HostsProvisionedCondition)
		switch {
		case st.Phase != sitev1.ClusterDegraded:
			return fmt.Errorf("phase %q, want Degraded", st.Phase)
		case hp == nil || hp.Reason != sitev1.ReasonHostFailed || !strings.Contains(hp.Message, bad.Name):
			return fmt.Errorf("HostsProvisioned is %+v, want HostFailed naming %s", hp, bad.Name)
		case st.ControlPlane.Ready != 1 || st.Workers.Ready != 1:
			return fmt.Errorf("control plane %+v, workers %+v: the good hosts must still come up", st.ControlPlane, st.Workers)
		}
		return nil
	})
	var failed *sitev1.HostStatus
	for i := range ac.Status.Hosts {
		if ac.Status.Hosts[i].Name == bad.Name {
			failed = &ac.Status.Hosts[i]
		}
	}
	if failed == nil || failed.Message == "" || failed.Ready {
		t.Fatalf("status of the failed host: %+v", failed)
	}
	t.Logf("failed host reported as: %s", failed.Message)
}

func TestDeleteTakesTheClusterDown(t *testing.T) {
	ctx := t.Context()
	ns := bed(t, "gone")
	ac := cluster(ns, "gone", "v1.36.3", host("d-cp-0", sitev1.RoleControlPlane), host("d-w-0", sitev1.RoleWorker))
	if err := siteC.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ac, 3*time.Minute, settled(1, 1, "v1.36.3"))
	if err := siteC.Delete(ctx, ac); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range ac.Spec.Hosts {
				t.Logf("the Metal3 operator on host %s:\n%s", h.Name, m3.LogLines(`"`+h.Name+`"`, 40))
			}
		}
	})
	// Metal3's fixture provisioner shares one power state between the hosts; the bed nudges
	// each host so that the operator's backoff does not hold one back (metal3.NudgeAnnotation).
	testutil.WaitProgress(t, 3*time.Minute, 15*time.Minute, "the cluster's objects to go", func() (bool, string) {
		var left []string
		for _, list := range []client.ObjectList{&sitev1.ApplicationClusterList{}, &clusterv1.ClusterList{}, &clusterv1.MachineList{},
			&metal3api.BareMetalHostList{}, &sitev1.EdgeMachineList{}, &clusterv1.MachineDeploymentList{}} {
			in := []client.ListOption{client.InNamespace(ns)}
			if _, hosts := list.(*metal3api.BareMetalHostList); hosts {
				in = []client.ListOption{client.InNamespace(sitev1.HostsNamespace), client.MatchingLabels{sitev1.ClusterNamespaceLabel: ns}}
			}
			if err := siteC.List(ctx, list, in...); err != nil {
				return false, err.Error()
			}
			items, err := apimeta.ExtractList(list)
			if err != nil {
				return false, err.Error()
			}
			for _, o := range items {
				// The resource version moves with each step of the object's teardown; a
				// BareMetalHost's moves with each nudge too, so its state stands for it.
				at := fmt.Sprintf("%T %s@%s", o, o.(client.Object).GetName(), o.(client.Object).GetResourceVersion())
				if h, ok := o.(*metal3api.BareMetalHost); ok {
					at = fmt.Sprintf("%T %s(%s, online %t, powered on %t, error %q, finalizers %v)", o, h.Name,
						h.Status.Provisioning.State, h.Spec.Online, h.Status.PoweredOn, h.Status.ErrorMessage, h.Finalizers)
				}
				left = append(left, at)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there after the ApplicationCluster's deletion: %v", left)
	})
	// The application cluster's Node objects stay: Cluster-API does not delete nodes of a
	// cluster being deleted, whose hosts are wiped anyway.
}

// TestPendingFromFirstSight: an ApplicationCluster is Pending from its first reconcile on, also
// when that reconcile fails before it summarizes — here its ArtifactSet is already controlled
// by someone else — so that the global controller, which mirrors the phase, never reads none.
func TestPendingFromFirstSight(t *testing.T) {
	ctx := t.Context()
	ns := bed(t, "blocked")
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else"}}
	if err := siteC.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	ac := cluster(ns, "blocked", "v1.36.3", host("b-cp-0", sitev1.RoleControlPlane))
	ac.Spec.OSImage.URL = "" // from the site cache, through the ArtifactSet
	set := &sitev1.ArtifactSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ac.Name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}},
		Spec: sitev1.ArtifactSetSpec{Artifacts: []sitev1.ArtifactRef{{SHA256: ac.Spec.OSImage.SHA256}}},
	}
	if err := siteC.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := siteC.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ac, time.Minute, func(ac *sitev1.ApplicationCluster) error {
		if ac.Status.LastError == "" {
			return fmt.Errorf("no error reported yet (phase %q)", ac.Status.Phase)
		}
		return nil
	})
	if ac.Status.Phase != sitev1.ClusterPending || !strings.Contains(ac.Status.LastError, "ArtifactSet") {
		t.Errorf("phase %q, last error %q; want Pending and the ArtifactSet's error", ac.Status.Phase, ac.Status.LastError)
	}
}
