package edgebootstrap

import (
	"context"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
