package edgecluster

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// reconcileEndpoint reports the cluster provisioned once its control-plane endpoint is set:
// bare metal needs nothing more. Once provisioned, it stays so (the v1beta2 contract).
func reconcileEndpoint(ec *sitev1.EdgeCluster, cluster *clusterv1.Cluster) {
	ep := ec.Spec.ControlPlaneEndpoint
	if ep.Host == "" {
		conditions.Set(&ec.Status.Conditions, ec.Generation, sitev1.EdgeClusterReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonNoControlPlaneEndpoint, "spec.controlPlaneEndpoint.host is empty: set the address of the cluster's API server")
		return
	}
	ec.Status.Initialization.Provisioned = ptr.To(true)
	conditions.Set(&ec.Status.Conditions, ec.Generation, sitev1.EdgeClusterReadyCondition, metav1.ConditionTrue,
		sitev1.ReasonInfrastructureProvisioned,
		fmt.Sprintf("infrastructure of Cluster %s provisioned; control-plane endpoint %s:%d", cluster.Name, ep.Host, ep.Port))
}
