package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// drainTimeout bounds a drain: evictions a PodDisruptionBudget holds back, the pods going, and
// their replacements running elsewhere.
const drainTimeout = 5 * time.Minute

// drainer drains nodes through the Eviction API.
type drainer struct {
	cs      kubernetes.Interface
	timeout time.Duration
	poll    time.Duration
}

// owner is the controller of an evicted pod that must have it running elsewhere again.
type owner struct{ namespace, kind, name string }

func (o owner) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// otherSchedulableNodes counts the nodes other than node that are Ready and not cordoned: where
// a drain of node could move its pods.
func otherSchedulableNodes(ctx context.Context, cs kubernetes.Interface, node string) (int, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("nodes: %w", err)
	}
	n := 0
	for _, o := range nodes.Items {
		ready := slices.ContainsFunc(o.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		if o.Name != node && ready && !o.Spec.Unschedulable {
			n++
		}
	}
	return n, nil
}

// drain evicts the pods of node (not DaemonSet pods, not mirror pods, as kubectl drain does),
// retrying evictions a PodDisruptionBudget refuses for now, waits until the pods are gone, and
// then until the ReplicaSets and StatefulSets they belonged to have as many replicas available
// as before the drain — elsewhere, the node being cordoned — so that the next node is only
// drained once the workloads are whole again. A workload whose replacement the scheduler finds
// no other node for (anti-affinity, resources) does not hold the drain: its pod runs again when
// the node is back. Each wait is bounded by the drainer's timeout; its error names what it
// waited for.
func (d drainer) drain(ctx context.Context, node string) error {
	pods, err := d.evictable(ctx, node)
	if err != nil {
		return err
	}
	// The workloads of the pods, with the replicas they had available before: a drain waits
	// for them to be back to that, not for a workload that was short already to heal.
	var owners []owner
	before := map[owner]int32{}
	for _, p := range pods {
		c := metav1.GetControllerOf(&p)
		if c == nil || (c.Kind != "ReplicaSet" && c.Kind != "StatefulSet") {
			continue
		}
		o := owner{p.Namespace, c.Kind, c.Name}
		if slices.Contains(owners, o) {
			continue
		}
		ready, want, err := d.available(ctx, o)
		if err != nil {
			return err
		}
		owners, before[o] = append(owners, o), min(ready, want)
	}
	for _, p := range pods {
		if err := d.evict(ctx, p); err != nil {
			return err
		}
	}
	var left []corev1.Pod
	// The conditions read with the drain's context, not the poll's: a read cut by the poll's
	// deadline would hide what was waited for.
	err = wait.PollUntilContextTimeout(ctx, d.poll, d.timeout, true, func(context.Context) (bool, error) {
		left, err = d.evictable(ctx, node)
		return len(left) == 0, err
	})
	if err != nil {
		return fmt.Errorf("drain: %d pods still on node %s after %s (%s): %w", len(left), node, d.timeout, podNames(left), err)
	}
	var missing []string
	err = wait.PollUntilContextTimeout(ctx, d.poll, d.timeout, true, func(context.Context) (bool, error) {
		missing = missing[:0]
		for _, o := range owners {
			ready, want, err := d.available(ctx, o)
			if err != nil {
				return false, err
			}
			if ready >= min(before[o], want) {
				continue
			}
			stuck, err := d.unschedulable(ctx, o)
			if err != nil {
				return false, err
			}
			if !stuck { // a replacement that cannot run anywhere else waits for the node to come back
				missing = append(missing, fmt.Sprintf("%s: %d available, %d before the drain", o, ready, before[o]))
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("drain: the pods evicted from node %s do not run elsewhere after %s (%s): %w", node, d.timeout, strings.Join(missing, "; "), err)
	}
	return nil
}

// unschedulable reports whether a pod of owner o waits for a node because the scheduler found
// none it fits.
func (d drainer) unschedulable(ctx context.Context, o owner) (bool, error) {
	pods, err := d.cs.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("drain: list pods of %s: %w", o, err)
	}
	for _, p := range pods.Items {
		c := metav1.GetControllerOf(&p)
		if c == nil || c.Kind != o.kind || c.Name != o.name || p.Spec.NodeName != "" {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
	}
	return false, nil
}

// evictable lists the pods of node a drain evicts.
func (d drainer) evictable(ctx context.Context, node string) ([]corev1.Pod, error) {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	pods, err := d.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("drain: list pods: %w", err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			continue // the selector asked for the node's pods only; a fake or a proxy may not honour it
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // finished: nothing runs
		}
		out = append(out, p)
	}
	return out, nil
}

// evict evicts pod, retrying while a PodDisruptionBudget does not allow it (429), up to the
// drainer's timeout.
func (d drainer) evict(ctx context.Context, p corev1.Pod) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, d.poll, d.timeout, true, func(context.Context) (bool, error) {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := d.cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return true, nil
		case apierrors.IsTooManyRequests(err):
			last = err // a disruption budget: the workload cannot lose a pod yet
			return false, nil
		}
		return false, err
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("drain: evict pod %s/%s: still refused after %s: %w", p.Namespace, p.Name, d.timeout, errors.Join(last, err))
		}
		return fmt.Errorf("drain: evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// available is how many replicas of o are available, and how many it wants. An owner deleted
// meanwhile wants none.
func (d drainer) available(ctx context.Context, o owner) (int32, int32, error) {
	switch o.kind {
	case "ReplicaSet":
		rs, err := d.cs.AppsV1().ReplicaSets(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 0, 0, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("drain: %s: %w", o, err)
		}
		return rs.Status.AvailableReplicas, ptr.Deref(rs.Spec.Replicas, 1), nil
	default: // StatefulSet
		ss, err := d.cs.AppsV1().StatefulSets(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 0, 0, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("drain: %s: %w", o, err)
		}
		return ss.Status.AvailableReplicas, ptr.Deref(ss.Spec.Replicas, 1), nil
	}
}

// podNames lists pods as namespace/name, at most 5.
func podNames(pods []corev1.Pod) string {
	var names []string
	for i, p := range pods {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(pods)-5))
			break
		}
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return strings.Join(names, ", ")
}
