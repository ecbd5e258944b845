package edgebootstrap

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Bootstrapper turns a machine's host into a node of the application cluster.
type Bootstrapper interface {
	// UserData is the first-boot data (cloud-init user data) Metal3 hands to the machine's host.
	UserData(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) ([]byte, error)
	// Join makes the machine's provisioned host a node of the cluster; it reports true once the
	// node registered. It is called again until then, and must be idempotent.
	Join(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) (bool, error)
}

// ClusterClients gives a client of an application cluster (Cluster-API's ClusterCache does).
type ClusterClients interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
}

// NodeSimulator is the Bootstrapper of test beds and of sites without a BPA: instead of
// installing packages it registers the machine's node in the application cluster itself — a
// simulated kubelet: a Node named after the host, with the machine's provider ID, the machine's
// Kubernetes version as kubelet version, and a Ready condition.
type NodeSimulator struct {
	Clusters ClusterClients
}

// NodeName is the name of the node of a machine: the BareMetalHost its provider ID names (the
// host it stands for), else the host of its label, else the machine's name.
func NodeName(machine *clusterv1.Machine) string {
	if id, ok := strings.CutPrefix(machine.Spec.ProviderID, "metal3://"); ok {
		return path.Base(id)
	}
	if h := machine.Labels[sitev1.HostNameLabel]; h != "" {
		return h
	}
	return machine.Name
}

// UserData names the host, when known.
func (s *NodeSimulator) UserData(_ context.Context, _ *clusterv1.Cluster, machine *clusterv1.Machine) ([]byte, error) {
	return cloudConfig(machine)
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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName(machine)}}
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
	if node.Status.NodeInfo.KubeletVersion == machine.Spec.Version && isReady(node) {
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

func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
