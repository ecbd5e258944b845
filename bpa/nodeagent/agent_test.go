package nodeagent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/nodeagent"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// cp is the application cluster's control plane: a real kube-apiserver + etcd.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Name: "nodeagent"}, func(_ context.Context, c *testenv.ControlPlane) error {
		cp = c
		return nil
	}))
}

const waitFor = 30 * time.Second

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// options are agent options with short intervals, for a node of the test's own; the Node and its
// Lease are deleted when the test ends (after its agents stop), so that tests can run again.
func options(t *testing.T, name string) nodeagent.Options {
	t.Helper()
	t.Cleanup(func() {
		cs := clientset(t, cp.Config)
		ctx := context.Background()
		if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
		if err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete lease %s: %v", name, err)
		}
	})
	return nodeagent.Options{
		NodeName:          name,
		KubeletVersion:    "v1.36.3",
		HeartbeatInterval: 200 * time.Millisecond,
		StatusInterval:    500 * time.Millisecond,
	}
}

// start runs the agent until stop is called (or the test ends); stop cancels its context and
// returns what Run returned.
func start(t *testing.T, cs kubernetes.Interface, opts nodeagent.Options) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cs, opts) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(waitFor):
			return errors.New("Run did not return after its context was cancelled")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop agent of %s: %v", opts.NodeName, err)
		}
	})
	return stop
}

func getNode(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// waitReady waits until the Node reports Ready=True with kubelet version version.
func waitReady(t *testing.T, cs kubernetes.Interface, name, version string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	testenv.Eventually(t, waitFor, func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("node %s not Ready: %v", name, c)
		}
		if got := n.Status.NodeInfo.KubeletVersion; got != version {
			return fmt.Errorf("node %s reports kubelet %q, want %q", name, got, version)
		}
		node = n
		return nil
	})
	return node
}

func getLease(cs kubernetes.Interface, name string) (*coordinationv1.Lease, error) {
	return cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
}

// waitRenewed waits until the node's Lease was renewed after after, and returns it.
func waitRenewed(t *testing.T, cs kubernetes.Interface, name string, after time.Time) *coordinationv1.Lease {
	t.Helper()
	var lease *coordinationv1.Lease
	testenv.Eventually(t, waitFor, func() error {
		l, err := getLease(cs, name)
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(after) {
			return fmt.Errorf("lease %s renewed at %v, not after %v", name, l.Spec.RenewTime, after)
		}
		lease = l
		return nil
	})
	return lease
}

func TestRegistersReadyNode(t *testing.T) {
	cs := clientset(t, cp.Config)
	opts := options(t, "register-1")
	opts.ProviderID = "edgefleet://site-a/register-1"
	opts.NodeIP = "10.1.2.3"
	opts.Labels = map[string]string{"edgefleet.io/site": "site-a"}
	start(t, cs, opts)

	n := waitReady(t, cs, "register-1", "v1.36.3")
	for k, v := range map[string]string{
		corev1.LabelHostname:   "register-1",
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: n.Status.NodeInfo.Architecture,
		"edgefleet.io/site":    "site-a",
	} {
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (set: %t), want %q", k, got, ok, v)
		}
	}
	if n.Status.NodeInfo.Architecture == "" || n.Status.NodeInfo.OperatingSystem != "linux" {
		t.Errorf("nodeInfo OS/arch = %q/%q", n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture)
	}
	if n.Spec.ProviderID != opts.ProviderID {
		t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, opts.ProviderID)
	}
	if c := condition(n, corev1.NodeReady); c.Reason != nodeagent.ReasonKubeletReady {
		t.Errorf("Ready reason = %q, want %q", c.Reason, nodeagent.ReasonKubeletReady)
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if c := condition(n, typ); c == nil || c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %v, want False", typ, c)
		}
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}, {Type: corev1.NodeHostName, Address: "register-1"}}
	if fmt.Sprint(n.Status.Addresses) != fmt.Sprint(wantAddrs) {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, wantAddrs)
	}
	for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if list.Pods().Value() != 110 || list.Cpu().Value() < 1 || list.Memory().Value() < 1<<20 {
			t.Errorf("capacity/allocatable = %v, want 110 pods, some CPU and memory", list)
		}
	}
}

func TestLeaseRenewed(t *testing.T) {
	cs := clientset(t, cp.Config)
	start(t, cs, options(t, "lease-1"))
	n := waitReady(t, cs, "lease-1", "v1.36.3")

	first := waitRenewed(t, cs, "lease-1", time.Time{})
	if h := first.Spec.HolderIdentity; h == nil || *h != "lease-1" {
		t.Errorf("holderIdentity = %v, want lease-1", h)
	}
	if d := first.Spec.LeaseDurationSeconds; d == nil || *d != 40 {
		t.Errorf("leaseDurationSeconds = %v, want 40", d)
	}
	if refs := first.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].APIVersion != "v1" ||
		refs[0].Name != "lease-1" || refs[0].UID != n.UID {
		t.Errorf("ownerReferences = %+v, want the Node lease-1 (uid %s)", refs, n.UID)
	}
	// Renewed: renewTime moves on (microsecond precision), the holder stays.
	second := waitRenewed(t, cs, "lease-1", first.Spec.RenewTime.Time)
	if *second.Spec.HolderIdentity != "lease-1" {
		t.Errorf("holderIdentity after renewal = %q", *second.Spec.HolderIdentity)
	}
}

func TestStatusHeartbeatKeepsTransitionTime(t *testing.T) {
	cs := clientset(t, cp.Config)
	start(t, cs, options(t, "status-1"))
	ready := condition(waitReady(t, cs, "status-1", "v1.36.3"), corev1.NodeReady)

	// Times have a precision of one second: with a 500ms status interval the heartbeat moves
	// on within a few refreshes.
	var later *corev1.NodeCondition
	testenv.Eventually(t, waitFor, func() error {
		later = condition(getNode(t, cs, "status-1"), corev1.NodeReady)
		if !later.LastHeartbeatTime.After(ready.LastHeartbeatTime.Time) {
			return fmt.Errorf("heartbeat still %v", later.LastHeartbeatTime)
		}
		return nil
	})
	if !later.LastTransitionTime.Equal(&ready.LastTransitionTime) {
		t.Errorf("Ready's lastTransitionTime moved from %v to %v while its status stayed %s",
			ready.LastTransitionTime, later.LastTransitionTime, later.Status)
	}
}

func TestRestartKeepsSpecAndReportsNewVersion(t *testing.T) {
	cs := clientset(t, cp.Config)
	ctx := context.Background()
	opts := options(t, "restart-1")
	opts.ProviderID = "edgefleet://site-a/restart-1"
	opts.Labels = map[string]string{"edgefleet.io/pool": "a"}
	stop := start(t, cs, opts)
	before := waitReady(t, cs, "restart-1", "v1.36.3")
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Between the runs an operator cordons and taints the Node and relabels the pool.
	taint := corev1.Taint{Key: "edgefleet.io/maintenance", Value: "patch", Effect: corev1.TaintEffectNoSchedule}
	n := getNode(t, cs, "restart-1")
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, taint)
	n.Labels["edgefleet.io/pool"] = "b"
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The package patch: the agent restarts with a new version and a new label.
	opts.KubeletVersion = "v1.36.4"
	opts.ProviderID = "edgefleet://elsewhere/restart-1"
	opts.Labels = map[string]string{"edgefleet.io/pool": "a", "edgefleet.io/patched": "true"}
	start(t, cs, opts)
	after := waitReady(t, cs, "restart-1", "v1.36.4")
	// Wait for one more status write after the version showed, so that a write of the spec by
	// the agent, had there been one, would have happened.
	testenv.Eventually(t, waitFor, func() error {
		c := condition(getNode(t, cs, "restart-1"), corev1.NodeReady)
		if !c.LastHeartbeatTime.After(condition(after, corev1.NodeReady).LastHeartbeatTime.Time) {
			return errors.New("no status refresh yet")
		}
		return nil
	})
	after = getNode(t, cs, "restart-1")

	if after.UID != before.UID {
		t.Errorf("the Node was created again (uid %s, was %s)", after.UID, before.UID)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelHostname + "=restart-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Errorf("%d Nodes with hostname restart-1, want 1", len(nodes.Items))
	}
	if !after.Spec.Unschedulable {
		t.Error("the cordon did not survive the restart")
	}
	// The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready to a
	// new Node (no node lifecycle controller runs here to lift it): the taints must be exactly
	// the first run's plus the operator's.
	wantTaints := append(slices.Clone(before.Spec.Taints), taint)
	if !equality.Semantic.DeepEqual(after.Spec.Taints, wantTaints) {
		t.Errorf("taints = %v, want %v", after.Spec.Taints, wantTaints)
	}
	if after.Spec.ProviderID != "edgefleet://site-a/restart-1" {
		t.Errorf("providerID = %q, want the first run's", after.Spec.ProviderID)
	}
	if got := after.Labels["edgefleet.io/pool"]; got != "b" {
		t.Errorf("label edgefleet.io/pool = %q, want the operator's b", got)
	}
	if got := after.Labels["edgefleet.io/patched"]; got != "true" {
		t.Errorf("label edgefleet.io/patched = %q, want the new run's true", got)
	}
	was, now := condition(before, corev1.NodeReady), condition(after, corev1.NodeReady)
	if !now.LastTransitionTime.Equal(&was.LastTransitionTime) {
		t.Errorf("Ready's lastTransitionTime moved from %v to %v over a restart that kept it True", was.LastTransitionTime, now.LastTransitionTime)
	}
}

func TestStopLeavesNode(t *testing.T) {
	cs := clientset(t, cp.Config)
	stop := start(t, cs, options(t, "stop-1"))
	waitReady(t, cs, "stop-1", "v1.36.3")
	waitRenewed(t, cs, "stop-1", time.Time{})
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v after its context was cancelled, want nil", err)
	}
	getNode(t, cs, "stop-1")
	if _, err := getLease(cs, "stop-1"); err != nil {
		t.Errorf("lease after stop: %v", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	cs := clientset(t, cp.Config)
	tests := []struct {
		name    string
		change  func(*nodeagent.Options)
		wantErr []string // parts of the error
	}{
		{"no node name", func(o *nodeagent.Options) { o.NodeName = "" }, []string{"NodeName is required"}},
		{"node name not DNS-1123", func(o *nodeagent.Options) { o.NodeName = "Worker_1" }, []string{"NodeName", "Worker_1", "DNS-1123"}},
		{"no kubelet version", func(o *nodeagent.Options) { o.KubeletVersion = "" }, []string{"KubeletVersion is required"}},
		{"kubelet version not semantic", func(o *nodeagent.Options) { o.KubeletVersion = "latest" }, []string{"KubeletVersion", "latest"}},
		{"bad node IP", func(o *nodeagent.Options) { o.NodeIP = "10.0.0" }, []string{"NodeIP", "10.0.0"}},
		{"bad label", func(o *nodeagent.Options) { o.Labels = map[string]string{"bad key": "v"} }, []string{"Labels", "bad key"}},
		{"heartbeat beyond the lease", func(o *nodeagent.Options) { o.HeartbeatInterval = 40 * time.Second }, []string{"HeartbeatInterval"}},
		{"negative status interval", func(o *nodeagent.Options) { o.StatusInterval = -time.Second }, []string{"StatusInterval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options(t, "invalid-1")
			tt.change(&opts)
			err := nodeagent.Run(context.Background(), cs, opts)
			if err == nil {
				t.Fatal("Run accepted the options")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if _, err := cs.CoreV1().Nodes().Get(context.Background(), "invalid-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Node was created (get: %v)", err)
			}
		})
	}
}

func TestForbiddenIsAnError(t *testing.T) {
	// A user without any role: the API server refuses for good, Run must say so and not retry.
	kc, err := cp.Kubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err = nodeagent.Run(ctx, clientset(t, cfg), options(t, "forbidden-1"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node forbidden-1") {
		t.Fatalf("Run returned %v, want a forbidden error naming the node", err)
	}
}

// logCount counts the log lines that contain a string.
type logCount struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCount) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logCount) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func TestRetriesWhileAPIServerIsDown(t *testing.T) {
	cs := clientset(t, cp.Config)
	var logs logCount
	opts := options(t, "outage-1")
	opts.Log = logs.logger()
	stop := start(t, cs, opts)
	waitReady(t, cs, "outage-1", "v1.36.3")
	before := waitRenewed(t, cs, "outage-1", time.Time{})

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			if err := cp.StartAPIServer(); err != nil {
				t.Error(err)
			}
		}
	}()
	testenv.Eventually(t, waitFor, func() error {
		if logs.count(`"step"="renew lease"`) == 0 {
			return errors.New("no retried lease renewal logged yet")
		}
		return nil
	})
	restarted = true
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}

	// Back: the same agent renews the Lease again and keeps running.
	waitRenewed(t, cs, "outage-1", before.Spec.RenewTime.Time)
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v, want nil after the outage and a stop", err)
	}
}
