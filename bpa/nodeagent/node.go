package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Reasons of the conditions the agent owns, as kubelet's.
const (
	ReasonKubeletReady               = "KubeletReady"
	ReasonKubeletHasSufficientMemory = "KubeletHasSufficientMemory"
	ReasonKubeletHasNoDiskPressure   = "KubeletHasNoDiskPressure"
	ReasonKubeletHasSufficientPID    = "KubeletHasSufficientPID"
)

// labels are the Node's labels: the well-known ones, then Options.Labels.
func (a *agent) labels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   a.opts.NodeName,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
	maps.Copy(l, a.opts.Labels)
	return l
}

// register creates the Node, or adds the labels an existing Node lacks without touching its
// spec (a cordon or taints set by others stay), and returns it.
func (a *agent) register(ctx context.Context) (*corev1.Node, error) {
	nodes := a.cs.CoreV1().Nodes()
	name := a.opts.NodeName
	node, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: a.labels()},
			Spec:       corev1.NodeSpec{ProviderID: a.opts.ProviderID},
		}
		// AlreadyExists (the Node appeared meanwhile) is retried: the next try finds it.
		if node, err = nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create node %s: %w", name, err)
		}
		return node, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	missing := map[string]string{}
	for k, v := range a.labels() {
		if _, ok := node.Labels[k]; !ok {
			missing[k] = v
		}
	}
	if len(missing) == 0 {
		return node, nil
	}
	// A merge patch of the labels alone: nothing else of the Node can change.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
	if err != nil {
		return nil, fmt.Errorf("label node %s: %w", name, err)
	}
	if node, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("label node %s: %w", name, err)
	}
	return node, nil
}

// updateStatus posts the node's status through the status subresource.
func (a *agent) updateStatus(ctx context.Context) error {
	nodes := a.cs.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a.setStatus(&node.Status, metav1.NewTime(a.opts.Clock.Now()))
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", a.opts.NodeName, err)
	}
	return nil
}

// setStatus sets the parts of s the agent owns, as of now; the rest of s stays.
func (a *agent) setStatus(s *corev1.NodeStatus, now metav1.Time) {
	s.Conditions = setConditions(s.Conditions, kubeletConditions(), now)
	s.NodeInfo.KubeletVersion = a.opts.KubeletVersion
	s.NodeInfo.OperatingSystem = runtime.GOOS
	s.NodeInfo.Architecture = runtime.GOARCH
	s.Addresses = nil
	if a.host.internalIP != "" {
		s.Addresses = append(s.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.host.internalIP})
	}
	s.Addresses = append(s.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.opts.NodeName})
	s.Capacity = a.host.capacity.DeepCopy()
	s.Allocatable = a.host.capacity.DeepCopy()
}

// kubeletConditions are the conditions the agent owns, in kubelet's order, as a healthy kubelet
// reports them.
func kubeletConditions() []corev1.NodeCondition {
	return []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: ReasonKubeletHasSufficientMemory, Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: ReasonKubeletHasNoDiskPressure, Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: ReasonKubeletHasSufficientPID, Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonKubeletReady, Message: "kubelet is posting ready status"},
	}
}

// setConditions returns conds with every condition of want set, its heartbeat at now and its
// transition at now unless conds already had it with the same status. Conditions of other
// types (set by others) stay as they are.
func setConditions(conds, want []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	out := slices.Clone(conds)
	for _, w := range want {
		w.LastHeartbeatTime = now
		w.LastTransitionTime = now
		i := slices.IndexFunc(out, func(c corev1.NodeCondition) bool { return c.Type == w.Type })
		if i < 0 {
			out = append(out, w)
			continue
		}
		if out[i].Status == w.Status && !out[i].LastTransitionTime.IsZero() {
			w.LastTransitionTime = out[i].LastTransitionTime
		}
		out[i] = w
	}
	return out
}
