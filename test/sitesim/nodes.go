package sitesim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgebootstrap"
)

// NodeSimulator is the local controller's node bootstrapper (edgebootstrap.Bootstrapper) of
// test beds without hosts, in bin/local-controller-simulated only (./localcontroller): instead
// of installing packages it registers the machine's node in the application cluster itself — a
// simulated kubelet: a Node named after the host, with the machine's provider ID, the machine's
// Kubernetes version as kubelet version, and a Ready condition.
type NodeSimulator struct {
	Clusters edgebootstrap.ClusterClients
}

// NewNodeSimulator is NodeSimulator over the local controller's application cluster clients
// (setup.Options.NodeBootstrapper).
func NewNodeSimulator(clusters edgebootstrap.ClusterClients) edgebootstrap.Bootstrapper {
	return &NodeSimulator{Clusters: clusters}
}

// UserData names the host, when known.
func (s *NodeSimulator) UserData(_ context.Context, _ *clusterv1.Cluster, machine *clusterv1.Machine) ([]byte, error) {
	return edgebootstrap.CloudConfig(machine)
}

// Join creates or updates the machine's Node and marks it Ready.
func (s *NodeSimulator) Join(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) (bool, error) {
	if machine.Spec.ProviderID == "" {
		return false, nil // not provisioned yet
	}
	c, err := s.Clusters.GetClient(ctx, client.ObjectKeyFromObject(cluster))
	if err != nil {
		return false, fmt.Errorf("reach application cluster %s: %w", client.ObjectKeyFromObject(cluster), err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: edgebootstrap.NodeName(machine)}}
	err = c.Get(ctx, client.ObjectKeyFromObject(node), node)
	switch {
	case apierrors.IsNotFound(err):
		node.Spec.ProviderID = machine.Spec.ProviderID
		if err := c.Create(ctx, node); err != nil {
			return false, fmt.Errorf("register node %s: %w", node.Name, err)
		}
	case err != nil:
		return false, fmt.Errorf("get node %s: %w", node.Name, err)
	case node.Spec.ProviderID != machine.Spec.ProviderID:
		node.Spec.ProviderID = machine.Spec.ProviderID
		if err := c.Update(ctx, node); err != nil {
			return false, fmt.Errorf("update node %s: %w", node.Name, err)
		}
	}
	if node.Status.NodeInfo.KubeletVersion == machine.Spec.Version && nodeReady(node) {
		return true, nil
	}
	now := metav1.Now()
	node.Status.NodeInfo.KubeletVersion = machine.Spec.Version
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "simulated kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficient" + string(t)[:len(t)-len("Pressure")],
			Message: "simulated kubelet", LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	if err := c.Status().Update(ctx, node); err != nil {
		return false, fmt.Errorf("report node %s ready: %w", node.Name, err)
	}
	return true, nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
