package applicationcluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// summarize writes the status from what exists and reports whether the cluster has settled:
// every host a ready node of the desired version, and no host left to remove.
func (r *Reconciler) summarize(ac *sitev1.ApplicationCluster, w *world, image *sitev1.MachineImage) bool {
	st := &ac.Status
	st.Hosts = st.Hosts[:0]
	st.ControlPlane, st.Workers = sitev1.NodeCounts{}, sitev1.NodeCounts{}
	var failed, provisioning []string
	versions := map[string]bool{}
	current := true
	for _, h := range ac.Spec.Hosts {
		hs := sitev1.HostStatus{Name: h.Name, Role: h.Role}
		bmh := w.hosts[h.Name]
		if bmh != nil {
			hs.ProvisioningState, hs.Hardware = string(bmh.Status.Provisioning.State), hardware(bmh.Status.HardwareDetails)
		}
		m := w.machineOfHost[h.Name]
		if m != nil {
			hs.Machine, hs.Version, hs.Ready = m.Name, nodeVersion(m), ready(m)
			versions[hs.Version] = true
		}
		counts := &st.Workers
		if h.Role == sitev1.RoleControlPlane {
			counts = &st.ControlPlane
		}
		counts.Total++
		upToDate := hs.Ready && hs.Version == ac.Spec.KubernetesVersion &&
			(h.Role != sitev1.RoleControlPlane || m.Name == r.controlPlaneMachineName(ac, h.Name))
		if upToDate {
			counts.Ready++
		} else {
			current = false
		}
		switch {
		case hostError(bmh) != "":
			hs.Message = hostError(bmh)
			failed = append(failed, h.Name+" ("+hs.Message+")")
		case hs.ProvisioningState != "provisioned":
			state := hs.ProvisioningState
			if state == "" {
				state = "not registered yet"
			}
			provisioning = append(provisioning, h.Name+" ("+state+")")
		}
		st.Hosts = append(st.Hosts, hs)
	}
	st.KubernetesVersion = ""
	if len(versions) == 1 {
		for v := range versions {
			st.KubernetesVersion = v
		}
	}
	// Hosts on their way out stay listed until released: the global controller keeps their
	// BMC credentials while the site still needs them to deprovision.
	removing := 0
	for _, name := range slices.Sorted(maps.Keys(w.hosts)) {
		if inSpec(ac, name) {
			continue
		}
		removing++
		bmh := w.hosts[name]
		hs := sitev1.HostStatus{Name: name, ProvisioningState: string(bmh.Status.Provisioning.State), Message: "being removed from the cluster"}
		if m := w.machineOfHost[name]; m != nil {
			hs.Machine, hs.Version = m.Name, nodeVersion(m)
		}
		st.Hosts = append(st.Hosts, hs)
	}

	gen := ac.Generation
	switch {
	case len(failed) > 0:
		conditions.Set(&st.Conditions, gen, sitev1.HostsProvisionedCondition, metav1.ConditionFalse, sitev1.ReasonHostFailed,
			"Metal3 reports errors on "+strings.Join(failed, "; ")+"; the other hosts go on")
	case image == nil:
		conditions.Set(&st.Conditions, gen, sitev1.HostsProvisionedCondition, metav1.ConditionFalse, sitev1.ReasonHostsProvisioning,
			fmt.Sprintf("waiting for the site cache to hold OS image sha256:%s (ArtifactSet %s)", ac.Spec.OSImage.SHA256, ac.Name))
	case len(provisioning) > 0:
		conditions.Set(&st.Conditions, gen, sitev1.HostsProvisionedCondition, metav1.ConditionFalse, sitev1.ReasonHostsProvisioning,
			"provisioning "+strings.Join(provisioning, ", "))
	default:
		conditions.Set(&st.Conditions, gen, sitev1.HostsProvisionedCondition, metav1.ConditionTrue, sitev1.ReasonAllHostsProvisioned,
			fmt.Sprintf("all %d hosts provisioned", len(ac.Spec.Hosts)))
	}
	setNodes(st, gen, sitev1.ControlPlaneReadyCondition, st.ControlPlane, "control-plane")
	setNodes(st, gen, sitev1.WorkersReadyCondition, st.Workers, "worker")
	if msg, bad := conditions.NotTrue(st.Conditions, sitev1.HostsProvisionedCondition, sitev1.ControlPlaneReadyCondition, sitev1.WorkersReadyCondition); bad {
		conditions.Set(&st.Conditions, gen, sitev1.ApplicationClusterReadyCondition, metav1.ConditionFalse, sitev1.ReasonClusterNotReady, msg)
	} else {
		conditions.Set(&st.Conditions, gen, sitev1.ApplicationClusterReadyCondition, metav1.ConditionTrue, sitev1.ReasonClusterReady,
			fmt.Sprintf("%d control-plane and %d worker nodes ready on %s", st.ControlPlane.Ready, st.Workers.Ready, ac.Spec.KubernetesVersion))
	}

	settled := current && removing == 0
	switch {
	case len(failed) > 0:
		st.Phase = sitev1.ClusterDegraded
	case settled:
		st.Phase = sitev1.ClusterProvisioned
	case st.Phase == sitev1.ClusterProvisioned || st.Phase == sitev1.ClusterUpdating || st.Phase == sitev1.ClusterDegraded:
		st.Phase = sitev1.ClusterUpdating
	case len(w.machines) == 0:
		st.Phase = sitev1.ClusterPending
	default:
		st.Phase = sitev1.ClusterProvisioning
	}
	return settled
}

func setNodes(st *sitev1.ApplicationClusterStatus, gen int64, t string, c sitev1.NodeCounts, role string) {
	if c.Ready == c.Total {
		conditions.Set(&st.Conditions, gen, t, metav1.ConditionTrue, sitev1.ReasonNodesReady,
			fmt.Sprintf("%d of %d %s nodes ready and current", c.Ready, c.Total, role))
		return
	}
	conditions.Set(&st.Conditions, gen, t, metav1.ConditionFalse, sitev1.ReasonNodesNotReady,
		fmt.Sprintf("%d of %d %s nodes ready and current", c.Ready, c.Total, role))
}

func inSpec(ac *sitev1.ApplicationCluster, host string) bool {
	for _, h := range ac.Spec.Hosts {
		if h.Name == host {
			return true
		}
	}
	return false
}

// nodeVersion is the Kubernetes version the machine's node runs, as its kubelet reports it
// (Cluster-API copies the Node's system info into the Machine's status); the machine's version
// until the node has reported.
func nodeVersion(m *clusterv1.Machine) string {
	if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" {
		return m.Status.NodeInfo.KubeletVersion
	}
	return m.Spec.Version
}
