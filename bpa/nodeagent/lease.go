package nodeagent

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// renewLease renews the node's Lease kube-node-lease/<node>, creating it when absent. The
// Lease's owner is node, so that it goes with the Node.
func (a *agent) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	name := a.opts.NodeName
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease}}
		a.setLease(lease, node)
		// NotFound here (the API server has not created kube-node-lease yet) is retried.
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create lease %s/%s: %w", corev1.NamespaceNodeLease, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease %s/%s: %w", corev1.NamespaceNodeLease, name, err)
	}
	a.setLease(lease, node)
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", corev1.NamespaceNodeLease, name, err)
	}
	return nil
}

// setLease makes the agent the holder of lease, renewed now, and node its owner if it has none.
func (a *agent) setLease(lease *coordinationv1.Lease, node *corev1.Node) {
	lease.Spec.HolderIdentity = ptr.To(a.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(a.opts.Clock.Now()))
	if len(lease.OwnerReferences) == 0 {
		lease.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: corev1.SchemeGroupVersion.String(),
			Kind:       "Node",
			Name:       node.Name,
			UID:        node.UID,
		}}
	}
}
