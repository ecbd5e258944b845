package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// fakeCluster is a fake API server for drains (client-go's fake clientset): an eviction deletes
// the pod unless a disruption budget is scripted to refuse it; a ReplicaSet's available
// replicas are set by the test, as its controller would.
type fakeCluster struct {
	*fake.Clientset
	mu sync.Mutex
	// refuse is how many more evictions a disruption budget refuses.
	refuse    int
	evictions int
}

func newFakeCluster(objs ...runtime.Object) *fakeCluster {
	c := &fakeCluster{Clientset: fake.NewClientset(objs...)}
	c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.evictions++
		if c.refuse > 0 {
			c.refuse--
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		}
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
		return true, nil, c.Tracker().Delete(gvr, a.GetNamespace(), ev.Name)
	})
	return c
}

func pod(name, node string, controller *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if controller != nil {
		p.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	return p
}

func controlledBy(kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{Kind: kind, Name: name, Controller: ptr.To(true), APIVersion: "apps/v1"}
}

func replicaSet(name string, replicas, available int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.ReplicaSetStatus{AvailableReplicas: available},
	}
}

func TestDrain(t *testing.T) {
	d := func(c *fakeCluster) drainer {
		return drainer{cs: c, timeout: 2 * time.Second, poll: 10 * time.Millisecond}
	}

	t.Run("evicts what runs on the node, leaves DaemonSet pods, finished pods and other nodes", func(t *testing.T) {
		done := pod("job", "n1", nil)
		done.Status.Phase = corev1.PodSucceeded
		c := newFakeCluster(pod("web", "n1", nil), pod("agent", "n1", controlledBy("DaemonSet", "agent")), done, pod("other", "n2", nil))
		if err := d(c).drain(t.Context(), "n1"); err != nil {
			t.Fatal(err)
		}
		left, err := c.CoreV1().Pods("app").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range left.Items {
			names = append(names, p.Name)
		}
		if strings.Join(names, ",") != "agent,job,other" {
			t.Errorf("left %v, want agent, job and other", names)
		}
	})

	t.Run("retries an eviction a disruption budget refuses for now", func(t *testing.T) {
		c := newFakeCluster(pod("web-1", "n1", nil))
		c.refuse = 3
		if err := d(c).drain(t.Context(), "n1"); err != nil {
			t.Fatal(err)
		}
		if c.evictions != 4 {
			t.Errorf("%d evictions, want 4 (3 refused)", c.evictions)
		}
	})

	t.Run("gives up on a budget that never allows it, saying so", func(t *testing.T) {
		c := newFakeCluster(pod("web-1", "n1", nil))
		c.refuse = 1 << 30
		err := d(c).drain(t.Context(), "n1")
		if err == nil || !strings.Contains(err.Error(), "evict pod app/web-1: still refused") || !strings.Contains(err.Error(), "disruption budget") {
			t.Fatalf("err %v, want one naming the pod and the budget", err)
		}
	})

	t.Run("waits for the evicted pods' ReplicaSet to be available again", func(t *testing.T) {
		c := newFakeCluster(pod("web-1", "n1", controlledBy("ReplicaSet", "web")), replicaSet("web", 3, 3))
		// The eviction leaves the ReplicaSet one short until its controller starts a pod
		// elsewhere.
		c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "eviction" {
				rs := replicaSet("web", 3, 2)
				_ = c.Tracker().Update(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, rs, "app")
				go func() {
					time.Sleep(200 * time.Millisecond)
					_ = c.Tracker().Update(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, replicaSet("web", 3, 3), "app")
				}()
			}
			return false, nil, nil
		})
		start := time.Now()
		if err := d(c).drain(t.Context(), "n1"); err != nil {
			t.Fatal(err)
		}
		rs, err := c.AppsV1().ReplicaSets("app").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil || rs.Status.AvailableReplicas != 3 {
			t.Errorf("drain returned at %s with the ReplicaSet at %d available (%v), want 3", time.Since(start), rs.Status.AvailableReplicas, err)
		}
	})

	t.Run("says which workload did not come back", func(t *testing.T) {
		db := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3))},
			Status:     appsv1.StatefulSetStatus{AvailableReplicas: 3},
		}
		c := newFakeCluster(pod("db-0", "n1", controlledBy("StatefulSet", "db")), db)
		c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "eviction" { // and never comes back
				short := db.DeepCopy()
				short.Status.AvailableReplicas = 2
				_ = c.Tracker().Update(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, short, "app")
			}
			return false, nil, nil
		})
		err := d(c).drain(context.Background(), "n1")
		if err == nil || !strings.Contains(err.Error(), "do not run elsewhere") || !strings.Contains(err.Error(), "StatefulSet app/db: 2 available, 3 before the drain") {
			t.Fatalf("err %v, want one naming the StatefulSet", err)
		}
	})

	t.Run("does not wait for a replacement no other node can take", func(t *testing.T) {
		c := newFakeCluster(pod("web-1", "n1", controlledBy("ReplicaSet", "web")), replicaSet("web", 2, 2))
		c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "eviction" {
				_ = c.Tracker().Update(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, replicaSet("web", 2, 1), "app")
				waiting := pod("web-2", "", controlledBy("ReplicaSet", "web"))
				waiting.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) were unschedulable.",
				}}}
				_ = c.Tracker().Add(waiting)
			}
			return false, nil, nil
		})
		if err := d(c).drain(t.Context(), "n1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("does not wait for a workload that was short before the drain to heal", func(t *testing.T) {
		c := newFakeCluster(pod("web-1", "n1", controlledBy("ReplicaSet", "web")), replicaSet("web", 3, 1))
		if err := d(c).drain(t.Context(), "n1"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOtherSchedulableNodes(t *testing.T) {
	node := func(name string, ready, cordoned bool) *corev1.Node {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	}
	for _, tc := range []struct {
		name  string
		nodes []runtime.Object
		want  int
	}{
		{"a cluster of one node", []runtime.Object{node("n1", true, true)}, 0},
		{"the others not ready or cordoned", []runtime.Object{node("n1", true, true), node("n2", false, false), node("n3", true, true)}, 0},
		{"one other ready and schedulable", []runtime.Object{node("n1", true, true), node("n2", true, false), node("n3", false, false)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := otherSchedulableNodes(t.Context(), fake.NewClientset(tc.nodes...), "n1")
			if err != nil || got != tc.want {
				t.Errorf("%d (%v), want %d", got, err, tc.want)
			}
		})
	}
}
