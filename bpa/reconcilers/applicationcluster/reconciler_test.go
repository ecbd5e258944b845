package applicationcluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install/fixture"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/applicationcluster"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/secrets/secretsfake"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var (
	site  *controlplane.ControlPlane
	hosts = fixture.New()
	cache = &siteCache{archives: map[string][]byte{}}
	// nodes is the application cluster as the reconciler's client of it sees it: a fake.
	nodes = kubefake.NewClientset()
	// releases are the charts the reconciler installs into it: recorded.
	releases = &chartRecorder{}
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunWithManager(m, controlplane.Options{Name: "site", InstallSiteCRDs: true, ClusterAPICRDs: true},
		func(_ context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			site = cp
			srv := httptest.NewServer(cache)
			r := &applicationcluster.Reconciler{
				Client:        mgr.GetClient(),
				APIReader:     mgr.GetAPIReader(),
				Installer:     hosts,
				Secrets:       &secretsfake.Store{},
				Charts:        func(*rest.Config) (applicationcluster.ChartInstaller, error) { return releases, nil },
				ClusterClient: func(*rest.Config) (kubernetes.Interface, error) { return nodes, nil },
				HTTP:          srv.Client(),
				Recorder:      mgr.GetEventRecorder("bpa"),
				Retry:         200 * time.Millisecond,
				Resync:        time.Hour,
				// The BPA's default: no test here rolls CAs over.
				ClientCertificateMaxTTL: clustercred.DefaultMaxTTL,
			}
			cache.url = srv.URL
			return r.SetupWithManager(mgr, controller.Options{})
		}))
}

// siteCache serves package archives by digest, as the site cache does.
type siteCache struct {
	mu       sync.Mutex
	url      string
	archives map[string][]byte
}

func (c *siteCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	b, ok := c.archives[strings.TrimPrefix(r.URL.Path, "/")]
	c.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(b)
}

// add builds a package (a health check and the join and leave hooks its manifest names,
// nothing else) and serves it; it returns its digest.
func (c *siteCache) add(t *testing.T, m packages.Manifest) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	m.Architecture, m.Hooks.HealthCheck = "amd64", "health-check"
	for _, hook := range []string{m.Hooks.HealthCheck, m.Hooks.Join, m.Hooks.Leave} {
		if hook == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "hooks", hook), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := packages.Build(&b, m, dir); err != nil {
		t.Fatal(err)
	}
	return c.addBytes(b.Bytes())
}

// addBytes serves b and returns its digest.
func (c *siteCache) addBytes(b []byte) string {
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	c.mu.Lock()
	c.archives[digest] = b
	c.mu.Unlock()
	return digest
}

// chartRecorder is the application cluster's chart installer: it records what it is asked to
// apply and reports each release deployed, its one pod ready.
type chartRecorder struct {
	mu       sync.Mutex
	releases []charts.Release
}

func (c *chartRecorder) Apply(_ context.Context, r charts.Release) (charts.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases = append(c.releases, r)
	meta, err := charts.Describe(r.Chart)
	if err != nil {
		return charts.Status{}, err
	}
	return charts.Status{Chart: meta.Name, Version: meta.Version, Revision: 1, State: charts.StateDeployed, Pods: charts.Pods{Ready: 1, Desired: 1}}, nil
}

// last is the last release applied, false when none was.
func (c *chartRecorder) last() (charts.Release, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.releases) == 0 {
		return charts.Release{}, false
	}
	return c.releases[len(c.releases)-1], true
}

// cached writes the ArtifactSet of cluster ac with every package, image and chart of its spec
// cached.
func (c *siteCache) cached(t *testing.T, ac *sitev1.ApplicationCluster) {
	t.Helper()
	ctx := t.Context()
	set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: ac.Name}}
	if err := site.Client.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
		set.Spec.Artifacts = ac.Spec.Packages
		if err := site.Client.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	set.Spec.Artifacts = slices.Concat(ac.Spec.Packages, ac.Spec.Images, ac.Spec.Charts)
	if err := site.Client.Update(ctx, set); err != nil {
		t.Fatal(err)
	}
	set.Status.Artifacts = nil
	for _, p := range set.Spec.Artifacts {
		set.Status.Artifacts = append(set.Status.Artifacts, sitev1.CachedArtifact{SHA256: p.SHA256, Phase: sitev1.ArtifactCached, URL: c.url + "/" + p.SHA256})
	}
	if err := site.Client.Status().Update(ctx, set); err != nil {
		t.Fatal(err)
	}
}

// waitBootstrap waits for the cluster's status.bootstrap to pass check at the spec's generation,
// and returns it.
func waitBootstrap(t *testing.T, ac *sitev1.ApplicationCluster, what string, check func(*sitev1.BootstrapStatus) bool) *sitev1.BootstrapStatus {
	t.Helper()
	var last *sitev1.BootstrapStatus
	testutil.WaitFor(t, 30*time.Second, "status.bootstrap showing "+what, func() (bool, string) {
		cur := &sitev1.ApplicationCluster{}
		if err := site.Client.Get(t.Context(), client.ObjectKeyFromObject(ac), cur); err != nil {
			t.Fatal(err)
		}
		last = cur.Status.Bootstrap
		return last != nil && last.ObservedGeneration == cur.Generation && check(last), fmt.Sprintf("%+v", last)
	})
	return last
}

// TestReconcilerPhases takes one cluster through the BPA's phases on fake hosts: Waiting for its
// control-plane host, Installing to Installed, a patch that fails its health check (Failed, not
// retried), a new version that patches (Installed), and packages that cannot go together
// (Failed, naming them).
func TestReconcilerPhases(t *testing.T) {
	ctx := t.Context()
	ns := site.Namespace(t)
	// db is a group like etcd: a host joins it, and leaves it through a host that stays.
	db := cache.add(t, packages.Manifest{Name: "db", Version: "1", Hosts: packages.HostsControlPlane, Hooks: packages.Hooks{Join: "join", Leave: "leave"}})
	agent := func(v string) string {
		return cache.add(t, packages.Manifest{Name: "agent", Version: v, After: []string{"db"},
			Config: []packages.ConfigFile{{Path: "/etc/agent/env", Template: "NODE={{.Node.Name}}"}}})
	}
	agent1, agent2, agent3 := agent("1"), agent("2"), agent("3")
	var setSpec func(*testing.T, func(*sitev1.ApplicationClusterSpec))
	ac := &sitev1.ApplicationCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: sitev1.ApplicationClusterSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: strings.Repeat("0", 64)},
			Packages:          []sitev1.ArtifactRef{{SHA256: db, Name: "db"}, {SHA256: agent1, Name: "agent"}},
			Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
		},
	}
	for i, h := range []struct {
		name string
		role sitev1.HostRole
	}{{"cp-0", sitev1.RoleControlPlane}, {"w-0", sitev1.RoleWorker}} {
		ac.Spec.Hosts = append(ac.Spec.Hosts, sitev1.ClusterHost{
			Name: h.name, Role: h.role, BootMACAddress: fmt.Sprintf("52:54:00:00:00:%02x", i), Address: fmt.Sprintf("10.0.0.%d", 10+i),
			BMC: sitev1.BMC{Address: "redfish+https://192.0.2.1/redfish/v1/Systems/" + h.name, CredentialsName: h.name + "-bmc"},
		})
	}
	if err := site.Client.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	cache.cached(t, ac)
	if err := site.Client.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "site.edgefleet.io", Kind: "EdgeCluster", Name: "app"}},
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("waiting for the control-plane host", func(t *testing.T) {
		st := waitBootstrap(t, ac, "Waiting", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapWaiting })
		if !strings.Contains(st.Message, "waiting for control-plane hosts to be provisioned: cp-0") {
			t.Errorf("message %q", st.Message)
		}
		if len(hosts.Log()) != 0 {
			t.Errorf("ran %v before any host was provisioned", hosts.Log())
		}
	})

	provision := func(t *testing.T, h sitev1.ClusterHost) {
		t.Helper()
		labels := map[string]string{clusterv1.ClusterNameLabel: "app"}
		if h.Role == sitev1.RoleControlPlane {
			labels[clusterv1.MachineControlPlaneLabel] = "" // as the local controller labels them
		}
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-" + h.Name, Labels: labels},
			Spec: clusterv1.MachineSpec{
				ClusterName: "app", ProviderID: "metal3://" + ns + "/" + h.Name,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr("app-" + h.Name)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "site.edgefleet.io", Kind: "EdgeMachine", Name: "app-" + h.Name},
			},
		}
		// The Node first: a real host's is registered by its kubelet during the install,
		// before the BPA labels it.
		if _, err := nodes.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.Name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := site.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("waiting for a provisioned host to answer over SSH", func(t *testing.T) {
		// The host has not booted yet: the BPA's check that every host answers cannot connect.
		hosts.FailStep("app-cp-0", "", fixture.StepReachable, 1, &sshexec.UnreachableError{Host: "app-cp-0", Addr: "10.0.0.10:22", Err: errors.New("connection refused")})
		provision(t, ac.Spec.Hosts[0])
		st := waitBootstrap(t, ac, "Waiting for SSH", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapWaiting && st.Message != "waiting for control-plane hosts to be provisioned: cp-0"
		})
		if want := "waiting for host app-cp-0 to answer over SSH at 10.0.0.10:22 (connection refused): a host just provisioned may still be booting"; !strings.HasPrefix(st.Message, want) {
			t.Errorf("message %q, want it to start with %q", st.Message, want)
		}
	})

	t.Run("installed on the control plane, saying which workers it waits for", func(t *testing.T) {
		st := waitBootstrap(t, ac, "Installed", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapInstalled })
		if want := "1 of 2 nodes run db 1, agent 1; waiting for worker hosts to be provisioned: w-0"; st.Message != want || st.Nodes != 1 {
			t.Errorf("status %+v, want message %q", st, want)
		}
	})

	t.Run("a provisioned worker that does not answer yet is left out, and the status says so", func(t *testing.T) {
		hosts.FailStep("app-w-0", "", fixture.StepReachable, math.MaxInt, &sshexec.UnreachableError{Host: "app-w-0", Addr: "10.0.0.11:22", Err: errors.New("connection refused")})
		provision(t, ac.Spec.Hosts[1])
		st := waitBootstrap(t, ac, "w-0 left out", func(st *sitev1.BootstrapStatus) bool { return strings.Contains(st.Message, "not installed yet") })
		if want := "1 of 2 nodes run db 1, agent 1; worker host w-0 not installed yet, it does not answer (host app-w-0: connect to 10.0.0.11:22: connection refused): if this stays, check the host's network and sshd"; st.Message != want || st.Nodes != 1 || st.Phase != sitev1.BootstrapInstalled {
			t.Errorf("status %+v, want message %q", st, want)
		}
	})

	t.Run("installed once the hosts are provisioned and answer", func(t *testing.T) {
		hosts.StopFailing("app-w-0", fixture.StepReachable)
		st := waitBootstrap(t, ac, "2 nodes", func(st *sitev1.BootstrapStatus) bool { return st.Nodes == 2 })
		if st.Phase != sitev1.BootstrapInstalled || st.Message != "2 nodes run db 1, agent 1" {
			t.Errorf("status %+v", st)
		}
		// Hosts are reached under their Machines' names: host keys are pinned per machine.
		if got := activations(hosts.Log()); !slices.Equal(got, []string{"app-cp-0 db", "app-cp-0 agent", "app-w-0 agent"}) {
			t.Errorf("activated %v, want db and agent on cp-0, then agent on w-0", got)
		}
		// Each Node has its role label, as kubeadm gives it.
		for name, label := range map[string]string{"cp-0": "node-role.kubernetes.io/control-plane", "w-0": "node-role.kubernetes.io/worker"} {
			n, err := nodes.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if _, ok := n.Labels[label]; err != nil || !ok {
				t.Errorf("node %s: labels %v (%v), want %s", name, n.Labels, err, label)
			}
		}
		// Every cluster user may read what the ClusterRole view allows.
		crb, err := nodes.RbacV1().ClusterRoleBindings().Get(ctx, clustercred.UsersBindingName, metav1.GetOptions{})
		if err != nil || crb.RoleRef.Name != "view" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != clustercred.UsersGroup {
			t.Errorf("ClusterRoleBinding %s: %+v (%v), want group %s bound to view", clustercred.UsersBindingName, crb, err, clustercred.UsersGroup)
		}
		if f, ok := hosts.File("app-w-0", "/etc/agent/env"); !ok || string(f.Data) != "NODE=w-0" {
			t.Errorf("w-0's /etc/agent/env %q (%v)", f.Data, ok)
		}
		secret := &corev1.Secret{}
		if err := site.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-kubeconfig"}, secret); err != nil || len(secret.Data["value"]) == 0 {
			t.Errorf("Cluster-API's kubeconfig Secret: %v", err)
		}
	})

	setPackages := func(t *testing.T, refs ...sitev1.ArtifactRef) {
		t.Helper()
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) { s.Packages = refs })
	}
	setSpec = func(t *testing.T, change func(*sitev1.ApplicationClusterSpec)) {
		t.Helper()
		cur := &sitev1.ApplicationCluster{}
		if err := site.Client.Get(ctx, client.ObjectKeyFromObject(ac), cur); err != nil {
			t.Fatal(err)
		}
		base := cur.DeepCopy()
		change(&cur.Spec)
		cache.cached(t, cur)
		if err := site.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a patch failing its health check fails the cluster and is not retried", func(t *testing.T) {
		hosts.FailHealth("app-w-0", "agent", "2", 1)
		setPackages(t, sitev1.ArtifactRef{SHA256: db, Name: "db"}, sitev1.ArtifactRef{SHA256: agent2, Name: "agent"})
		st := waitBootstrap(t, ac, "Failed", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapFailed })
		if st.FailedPackage != agent2 || !strings.Contains(st.Message, "patch failed and was rolled back") || !strings.Contains(st.Message, "stopped at host w-0") || !strings.Contains(st.Message, "package agent 2 failed its health check") {
			t.Errorf("status %+v", st)
		}
		// Where it stopped: the second of the two nodes, at its install.
		if s := st.Step; s == nil || s.Package != "agent" || s.Version != "2" || s.Node != "w-0" || s.Index != 2 || s.Of != 2 || s.Step != cluster.StepInstall || s.Since.IsZero() {
			t.Errorf("step %+v, want agent 2 at w-0 (2 of 2) installing, with its start", s)
		}
		// Anything that brings the cluster back (here its ArtifactSet changing) finds it failed.
		before := len(hosts.Log())
		set := &sitev1.ArtifactSet{}
		if err := site.Client.Get(ctx, client.ObjectKeyFromObject(ac), set); err != nil {
			t.Fatal(err)
		}
		if err := site.Client.Patch(ctx, set, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"poke":"1"}}}`))); err != nil {
			t.Fatal(err)
		}
		testutil.Consistently(t, time.Second, func() error { // a few retry intervals
			if ran := hosts.Log()[before:]; len(ran) != 0 {
				return fmt.Errorf("a failed patch was tried again: %v", ran)
			}
			if s := hosts.State("app-w-0", "agent"); s.Current != "1" {
				return fmt.Errorf("w-0's agent %+v, want rolled back to 1", s)
			}
			return nil
		})
	})

	t.Run("a new version patches, and the cluster is Installed again", func(t *testing.T) {
		setPackages(t, sitev1.ArtifactRef{SHA256: db, Name: "db"}, sitev1.ArtifactRef{SHA256: agent3, Name: "agent"})
		st := waitBootstrap(t, ac, "Installed at agent 3", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapInstalled && st.Message == "2 nodes run db 1, agent 3"
		})
		if st.FailedPackage != "" || st.Step != nil || !slices.ContainsFunc(st.Packages, func(p sitev1.InstalledPackage) bool { return p.Name == "agent" && p.Version == "3" }) {
			t.Errorf("status %+v", st)
		}
		for _, h := range []string{"app-cp-0", "app-w-0"} {
			if s := hosts.State(h, "agent"); s.Current != "3" || s.Active != "3" {
				t.Errorf("%s's agent %+v, want 3", h, s)
			}
		}
	})

	var runtime string // the package that imports images, from here on
	t.Run("images go through the package that imports them", func(t *testing.T) {
		runtime = cache.add(t, packages.Manifest{Name: "runtime", Version: "1", After: []string{"db"}, Hooks: packages.Hooks{ImportImage: "health-check"}})
		pause := cache.addBytes([]byte("an image archive"))
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) {
			s.Packages = []sitev1.ArtifactRef{{SHA256: db, Name: "db"}, {SHA256: agent3, Name: "agent"}, {SHA256: runtime, Name: "runtime"}}
			s.Images = []sitev1.ArtifactRef{{SHA256: pause, Name: "pause"}}
		})
		waitBootstrap(t, ac, "Installed with the runtime", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapInstalled && strings.Contains(st.Message, "runtime 1")
		})
		for _, h := range []string{"app-cp-0", "app-w-0"} {
			if got := hosts.Images(h, "runtime"); !slices.Equal(got, []string{pause}) {
				t.Errorf("%s imported %v, want the pause image", h, got)
			}
		}
	})

	t.Run("a package whose requirement the cluster does not meet is left out, and not reported installed", func(t *testing.T) {
		plugin := cache.add(t, packages.Manifest{Name: "plugin", Version: "1", Hosts: packages.HostsControlPlane, Requires: packages.RequiresKMS})
		before := len(hosts.Log())
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) {
			s.Packages = []sitev1.ArtifactRef{{SHA256: db, Name: "db"}, {SHA256: agent3, Name: "agent"}, {SHA256: runtime, Name: "runtime"}, {SHA256: plugin, Name: "plugin"}}
		})
		st := waitBootstrap(t, ac, "Installed with the package's spec", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapInstalled })
		if slices.ContainsFunc(st.Packages, func(p sitev1.InstalledPackage) bool { return p.Name == "plugin" }) || len(st.Packages) != 3 || strings.Contains(st.Message, "plugin") {
			t.Errorf("installed packages %+v (%q), want db, agent and runtime: the cluster has no KMS", st.Packages, st.Message)
		}
		for _, l := range hosts.Log()[before:] {
			if strings.Contains(l, "plugin") {
				t.Errorf("ran %q for a package left out", l)
			}
		}
	})

	t.Run("charts get the cluster's facts as global values, over the site's", func(t *testing.T) {
		hello := builders.BuildChart(t, "hello", "", nil)
		cache.addBytes(hello.Archive)
		siteValues := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: applicationcluster.ValuesConfigMap("app")},
			Data:       map[string]string{"hello": "greeting: hi\nglobal:\n  registry: r.example\n  edgefleet:\n    cluster:\n      dnsServiceIP: 10.0.0.53\n"},
		}
		if err := site.Client.Create(ctx, siteValues); err != nil {
			t.Fatal(err)
		}
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) {
			s.Charts = []sitev1.ArtifactRef{{SHA256: hello.Digest, Name: "hello"}}
		})
		st := waitBootstrap(t, ac, "Installed with the chart", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapInstalled && len(st.Charts) == 1
		})
		if c := st.Charts[0]; c.Name != "hello" || c.Namespace != "hello" || c.State != "deployed" || c.PodsReady != 1 || !strings.HasSuffix(st.Message, "; 1 charts deployed, their pods 1/1 ready") {
			t.Errorf("status %+v, chart %+v", st, c)
		}
		r, ok := releases.last()
		if !ok {
			t.Fatal("no chart applied")
		}
		want := map[string]any{
			"greeting": "hi",
			"global": map[string]any{
				"registry": "r.example",
				"edgefleet": map[string]any{"cluster": map[string]any{
					"name": "app", "kubernetesVersion": "v1.36.3", "apiServer": "https://10.0.0.10:6443",
					"serviceCIDR": "10.96.0.0/12", "podCIDR": "10.244.0.0/16", "dnsServiceIP": "10.96.0.10", "dnsDomain": "cluster.local",
				}},
			},
		}
		if r.Name != "hello" || r.Namespace != "hello" || !reflect.DeepEqual(r.Values, want) {
			t.Errorf("applied release %s in %s with values %v, want hello in hello with %v", r.Name, r.Namespace, r.Values, want)
		}
	})

	t.Run("packages that cannot go together fail the cluster, naming them", func(t *testing.T) {
		lonely := cache.add(t, packages.Manifest{Name: "lonely", Version: "1", After: []string{"nowhere"}})
		before := len(hosts.Log())
		setPackages(t, sitev1.ArtifactRef{SHA256: db, Name: "db"}, sitev1.ArtifactRef{SHA256: agent3, Name: "agent"}, sitev1.ArtifactRef{SHA256: lonely, Name: "lonely"})
		st := waitBootstrap(t, ac, "Failed", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapFailed })
		if !strings.Contains(st.Message, "lonely comes after nowhere, which is not among the packages") {
			t.Errorf("message %q", st.Message)
		}
		if ran := hosts.Log()[before:]; len(ran) != 0 {
			t.Errorf("ran %v for a spec it refuses", ran)
		}
	})

	// Cluster-API's side of the leave contract is played by the test: a finalizer keeps a
	// deleted Machine, and status.deletion.waitForPreTerminateHookStartTime says its node is
	// drained and the hooks are waited for.
	machine := func(t *testing.T, name string) *clusterv1.Machine {
		t.Helper()
		m := &clusterv1.Machine{}
		if err := site.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// deleting is Cluster-API deleting a Machine and draining its node; drained, the node
	// drained and the pre-terminate hooks waited for.
	deleting := func(t *testing.T, name string) {
		t.Helper()
		m := machine(t, name)
		base := m.DeepCopy()
		m.Finalizers = append(m.Finalizers, "test.edgefleet.io/cluster-api")
		if err := site.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		if err := site.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	drained := func(t *testing.T, name string) {
		t.Helper()
		m := machine(t, name)
		base := m.DeepCopy()
		m.Status.Deletion = &clusterv1.MachineDeletionStatus{WaitForPreTerminateHookStartTime: metav1.Now()}
		if err := site.Client.Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	deleteDrained := func(t *testing.T, name string) {
		t.Helper()
		deleting(t, name)
		drained(t, name)
	}
	// addHost adds a host to the cluster's spec, and returns it.
	addHost := func(t *testing.T, name string, role sitev1.HostRole, addr string) sitev1.ClusterHost {
		t.Helper()
		h := sitev1.ClusterHost{
			Name: name, Role: role, BootMACAddress: "52:54:00:00:01:" + addr[len(addr)-2:], Address: addr,
			BMC: sitev1.BMC{Address: "redfish+https://192.0.2.1/redfish/v1/Systems/" + name, CredentialsName: name + "-bmc"},
		}
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) { s.Hosts = append(s.Hosts, h) })
		return h
	}
	removeHost := func(t *testing.T, name string) {
		t.Helper()
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) {
			s.Hosts = slices.DeleteFunc(s.Hosts, func(h sitev1.ClusterHost) bool { return h.Name == name })
		})
	}
	// since are the log's lines from before on that mention host.
	since := func(before int, host string) []string {
		var out []string
		for _, l := range hosts.Log()[before:] {
			if strings.HasPrefix(l, host+" ") || strings.HasSuffix(l, " "+host) {
				out = append(out, l)
			}
		}
		return out
	}

	t.Run("every installed host's Machine holds the BPA's leave hook and the host's address", func(t *testing.T) {
		setPackages(t, sitev1.ArtifactRef{SHA256: db, Name: "db"}, sitev1.ArtifactRef{SHA256: agent3, Name: "agent"}, sitev1.ArtifactRef{SHA256: runtime, Name: "runtime"})
		waitBootstrap(t, ac, "Installed again", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapInstalled })
		for name, addr := range map[string]string{"app-cp-0": "10.0.0.10", "app-w-0": "10.0.0.11"} {
			if a := machine(t, name).Annotations; a[applicationcluster.LeaveHookAnnotation] != "edgefleet-bpa" || a[applicationcluster.AddressAnnotation] != addr {
				t.Errorf("machine %s: annotations %v, want the leave hook and address %s", name, a, addr)
			}
		}
	})

	t.Run("a worker's Machine deleted and drained: its packages stop, then the Machine may go", func(t *testing.T) {
		// As the local controller does, the host leaves the spec first, then its Machine is
		// deleted. The spec also gains a package for worker hosts, which the cluster then has
		// none of: it fails, naming the package, but only after the host has left.
		hello := cache.add(t, packages.Manifest{Name: "hello", Version: "1", Hosts: packages.HostsWorker})
		before := len(hosts.Log())
		setSpec(t, func(s *sitev1.ApplicationClusterSpec) {
			s.Hosts = slices.DeleteFunc(s.Hosts, func(h sitev1.ClusterHost) bool { return h.Name == "w-0" })
			s.Packages = append(s.Packages, sitev1.ArtifactRef{SHA256: hello, Name: "hello"})
		})
		st := waitBootstrap(t, ac, "Failed", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapFailed })
		if want := "spec.packages: hello run on worker hosts only (their manifests' hosts), and the cluster has no worker host"; !strings.HasPrefix(st.Message, want) {
			t.Errorf("message %q, want it to start with %q", st.Message, want)
		}
		deleteDrained(t, "app-w-0")
		testutil.WaitFor(t, 30*time.Second, "the BPA to release app-w-0", func() (bool, string) {
			a := machine(t, "app-w-0").Annotations
			return a[applicationcluster.LeaveHookAnnotation] == "", fmt.Sprint(a)
		})
		if got := slices.Collect(func(yield func(string) bool) {
			for _, l := range hosts.Log()[before:] {
				if strings.HasSuffix(l, ": "+fixture.StepDeactivate) && !yield(l) {
					return
				}
			}
		}); !slices.Equal(got, []string{"app-w-0 agent: " + fixture.StepDeactivate, "app-w-0 runtime: " + fixture.StepDeactivate}) {
			t.Errorf("deactivated %v, want w-0's packages in the reverse of the install order", got)
		}
		if st := hosts.State("app-w-0", "agent"); st.Active != "" {
			t.Errorf("w-0's agent %+v, want nothing active", st)
		}
		setPackages(t, sitev1.ArtifactRef{SHA256: db, Name: "db"}, sitev1.ArtifactRef{SHA256: agent3, Name: "agent"}, sitev1.ArtifactRef{SHA256: runtime, Name: "runtime"})
		waitBootstrap(t, ac, "Installed without hello", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapInstalled })
	})

	t.Run("a second control-plane host joins the running group", func(t *testing.T) {
		before := len(hosts.Log())
		provision(t, addHost(t, "cp-1", sitev1.RoleControlPlane, "10.0.0.12"))
		st := waitBootstrap(t, ac, "2 control-plane nodes", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapInstalled && st.Nodes == 2
		})
		if got := since(before, "app-cp-1"); !slices.Contains(got, "app-cp-1 db: join running=cp-0=10.0.0.10") {
			t.Errorf("cp-1 ran %v, want db's join hook with cp-0 running (status %+v)", got, st)
		}
		if a := machine(t, "app-cp-1").Annotations; a[applicationcluster.LeaveHookAnnotation] != "edgefleet-bpa" || a[applicationcluster.AddressAnnotation] != "10.0.0.12" {
			t.Errorf("machine app-cp-1: annotations %v", a)
		}
	})

	t.Run("a control-plane host replaced: the new one waits until the old one has left its groups", func(t *testing.T) {
		before := len(hosts.Log())
		// The local controller deletes the old host's Machine and makes the new host's at once;
		// Cluster-API drains the old node meanwhile.
		deleting(t, "app-cp-1")
		removeHost(t, "cp-1")
		provision(t, addHost(t, "cp-2", sitev1.RoleControlPlane, "10.0.0.13"))
		st := waitBootstrap(t, ac, "cp-2 held back", func(st *sitev1.BootstrapStatus) bool {
			return strings.Contains(st.Message, "control-plane hosts cp-2 join once host cp-1 has left (etcd removes a member before it adds one)")
		})
		if st.Phase != sitev1.BootstrapInstalled || st.Nodes != 1 {
			t.Errorf("status %+v, want Installed on cp-0 alone while cp-2 waits", st)
		}
		if got := since(before, "app-cp-2"); len(got) != 0 {
			t.Errorf("cp-2 ran %v before cp-1 left", got)
		}
		drained(t, "app-cp-1")
		testutil.WaitFor(t, 30*time.Second, "the BPA to release app-cp-1", func() (bool, string) {
			a := machine(t, "app-cp-1").Annotations
			return a[applicationcluster.LeaveHookAnnotation] == "", fmt.Sprint(a)
		})
		waitBootstrap(t, ac, "cp-2 joined", func(st *sitev1.BootstrapStatus) bool {
			return st.Phase == sitev1.BootstrapInstalled && st.Nodes == 2 && !strings.Contains(st.Message, "join once")
		})
		log := hosts.Log()[before:]
		left, deactivated, joined := slices.Index(log, "app-cp-0 db: leave cp-1"), slices.Index(log, "app-cp-1 db: "+fixture.StepDeactivate), slices.Index(log, "app-cp-2 db: join running=cp-0=10.0.0.10")
		if left < 0 || deactivated < 0 || joined < 0 || left > deactivated || deactivated > joined {
			t.Errorf("log %v: want cp-1 taken out of db's group on cp-0, then its db stopped, then cp-2 joining with cp-0 running", log)
		}
		if st := hosts.State("app-cp-1", "db"); st.Active != "" {
			t.Errorf("cp-1's db %+v, want nothing active", st)
		}
	})

	t.Run("the control-plane host the API endpoint names does not leave", func(t *testing.T) {
		deleteDrained(t, "app-cp-0")
		st := waitBootstrap(t, ac, "cp-0 waiting", func(st *sitev1.BootstrapStatus) bool {
			return strings.Contains(st.Message, "control-plane host cp-0 cannot leave the cluster: it is the cluster's API endpoint (spec.network.controlPlaneEndpoint.host 10.0.0.10)")
		})
		if a := machine(t, "app-cp-0").Annotations; a[applicationcluster.LeaveHookAnnotation] == "" {
			t.Errorf("the hook of app-cp-0 was removed (status %+v)", st)
		}
		if st.Phase != sitev1.BootstrapWaiting {
			t.Errorf("phase %s, want Waiting", st.Phase)
		}
		if st := hosts.State("app-cp-0", "db"); st.Active == "" {
			t.Error("cp-0's db was stopped")
		}
	})

	t.Run("the cluster deleted: every hook goes", func(t *testing.T) {
		if err := site.Client.Delete(ctx, ac); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 30*time.Second, "the BPA to release app-cp-0", func() (bool, string) {
			m := &clusterv1.Machine{}
			err := site.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-cp-0"}, m)
			return err == nil && m.Annotations[applicationcluster.LeaveHookAnnotation] == "", fmt.Sprint(m.Annotations, err)
		})
		for _, name := range []string{"app-cp-0", "app-w-0", "app-cp-1"} {
			m := machine(t, name)
			base := m.DeepCopy()
			m.Finalizers = nil
			if err := site.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSpecsNoHostCanRunFailTheCluster: a cluster of one control-plane host fails at once
// (Failed, at the spec's generation, naming the package and the fix), before any host is
// provisioned or touched, instead of waiting, when its packages include one for worker hosts,
// or content that is no valid package (served whole: its digest matches).
func TestSpecsNoHostCanRunFailTheCluster(t *testing.T) {
	db := cache.add(t, packages.Manifest{Name: "db", Version: "1", Hosts: packages.HostsControlPlane})
	hello := cache.add(t, packages.Manifest{Name: "hello", Version: "1", Hosts: packages.HostsWorker, After: []string{"db"}})
	junk := cache.addBytes([]byte("not a package"))
	for _, tc := range []struct {
		name, pkg, want string
	}{
		{"for-workers", hello, "spec.packages: hello run on worker hosts only (their manifests' hosts), and the cluster has no worker host: add a worker Host to the site, or roll out a Release without them"},
		{"not-a-package", junk, "spec.packages: sha256:" + junk + " is not a valid package (docs/packages.md): package: not gzip-compressed: gzip: invalid header; upload a valid one and roll out a Release naming it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := site.Namespace(t)
			ac := &sitev1.ApplicationCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				Spec: sitev1.ApplicationClusterSpec{
					KubernetesVersion: "v1.36.3",
					OSImage:           sitev1.OSImage{SHA256: strings.Repeat("0", 64)},
					Packages:          []sitev1.ArtifactRef{{SHA256: db, Name: "db"}, {SHA256: tc.pkg, Name: "hello"}},
					Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
						ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.1.10", Port: 6443}},
					Hosts: []sitev1.ClusterHost{{Name: tc.name + "-cp-0", Role: sitev1.RoleControlPlane, BootMACAddress: "52:54:00:00:01:00", Address: "10.0.1.10",
						BMC: sitev1.BMC{Address: "redfish+https://192.0.2.1/redfish/v1/Systems/" + tc.name + "-cp-0", CredentialsName: tc.name + "-cp-0-bmc"}}},
				},
			}
			if err := site.Client.Create(t.Context(), ac); err != nil {
				t.Fatal(err)
			}
			cache.cached(t, ac)
			st := waitBootstrap(t, ac, "Failed", func(st *sitev1.BootstrapStatus) bool { return st.Phase == sitev1.BootstrapFailed })
			if st.Message != tc.want {
				t.Errorf("message %q, want %q", st.Message, tc.want)
			}
			for _, l := range hosts.Log() {
				if strings.Contains(l, tc.name) {
					t.Errorf("ran %q for a spec it refuses", l)
				}
			}
		})
	}
}

// activations are the "<host> <package>" of the log's activate steps, in order.
func activations(log []string) []string {
	var out []string
	for _, l := range log {
		if h, ok := strings.CutSuffix(l, ": activate"); ok {
			out = append(out, h)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
