package applicationcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// poolLabel marks the machines of the worker MachineDeployment.
const poolLabel = "site.edgefleet.io/pool"

// world is what exists of one ApplicationCluster, read once per reconcile.
type world struct {
	// hosts are the BareMetalHosts labelled with the cluster, by name.
	hosts map[string]*metal3api.BareMetalHost
	// machines are the cluster's Machines.
	machines []*clusterv1.Machine
	// machineOfHost is the Machine bound to each host (through its EdgeMachine).
	machineOfHost map[string]*clusterv1.Machine
	// edgeMachineOf is the EdgeMachine of each Machine, by Machine name.
	edgeMachineOf map[string]*sitev1.EdgeMachine
	// workers is the worker MachineDeployment, nil before it exists.
	workers *clusterv1.MachineDeployment
}

func (r *Reconciler) observe(ctx context.Context, ac *sitev1.ApplicationCluster) (*world, error) {
	w := &world{hosts: map[string]*metal3api.BareMetalHost{}, machineOfHost: map[string]*clusterv1.Machine{}, edgeMachineOf: map[string]*sitev1.EdgeMachine{}}
	in := client.InNamespace(ac.Namespace)
	bmhs, err := r.hostsOf(ctx, ac)
	if err != nil {
		return nil, err
	}
	for i := range bmhs.Items {
		w.hosts[bmhs.Items[i].Name] = &bmhs.Items[i]
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, in, client.MatchingLabels{clusterv1.ClusterNameLabel: ac.Name}); err != nil {
		return nil, fmt.Errorf("list Machines of %s: %w", ac.Name, err)
	}
	ems := &sitev1.EdgeMachineList{}
	if err := r.Client.List(ctx, ems, in); err != nil {
		return nil, fmt.Errorf("list EdgeMachines of %s: %w", ac.Name, err)
	}
	byName := map[string]*sitev1.EdgeMachine{}
	for i := range ems.Items {
		byName[ems.Items[i].Name] = &ems.Items[i]
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		w.machines = append(w.machines, m)
		em := byName[m.Spec.InfrastructureRef.Name]
		if em == nil {
			continue
		}
		w.edgeMachineOf[m.Name] = em
		if em.Status.Host != "" {
			w.machineOfHost[em.Status.Host] = m
		}
	}
	md := &clusterv1.MachineDeployment{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: ac.Namespace, Name: workersName(ac)}, md)
	switch {
	case err == nil:
		w.workers = md
	case client.IgnoreNotFound(err) != nil:
		return nil, fmt.Errorf("get MachineDeployment %s: %w", workersName(ac), err)
	}
	return w, nil
}

// hostsOf lists the BareMetalHosts labelled with the cluster, in HostNamespace.
func (r *Reconciler) hostsOf(ctx context.Context, ac *sitev1.ApplicationCluster) (*metal3api.BareMetalHostList, error) {
	bmhs := &metal3api.BareMetalHostList{}
	if err := r.Client.List(ctx, bmhs, client.InNamespace(r.HostNamespace), clusterLabels(ac)); err != nil {
		return nil, fmt.Errorf("list BareMetalHosts of %s in %s: %w", ac.Name, r.HostNamespace, err)
	}
	return bmhs, nil
}

// clusterLabels select the BareMetalHosts of a cluster.
func clusterLabels(ac *sitev1.ApplicationCluster) client.MatchingLabels {
	return client.MatchingLabels{sitev1.ClusterNameLabel: ac.Name, sitev1.ClusterNamespaceLabel: ac.Namespace}
}

// controlPlaneMachines returns the control-plane Machines by the host they stand for.
func (w *world) controlPlaneMachines() map[string][]*clusterv1.Machine {
	out := map[string][]*clusterv1.Machine{}
	for _, m := range w.machines {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			out[m.Labels[sitev1.HostNameLabel]] = append(out[m.Labels[sitev1.HostNameLabel]], m)
		}
	}
	return out
}

// ready reports whether a Machine's node is ready.
func ready(m *clusterv1.Machine) bool {
	return m != nil && m.DeletionTimestamp.IsZero() && m.Status.NodeRef.IsDefined() && conditions.IsTrue(m, clusterv1.MachineNodeReadyCondition)
}

// revision names what makes a machine current: its OS image and, unless the site's BPA
// upgrades Kubernetes in place (InPlaceUpgrades), its Kubernetes version. A machine of another
// revision is replaced.
func (r *Reconciler) revision(ac *sitev1.ApplicationCluster) string {
	what := ac.Spec.KubernetesVersion + "/" + ac.Spec.OSImage.SHA256
	if r.InPlaceUpgrades {
		what = ac.Spec.OSImage.SHA256
	}
	sum := sha256.Sum256([]byte(what))
	return hex.EncodeToString(sum[:4])
}

// controlPlaneMachineName is the name of the current control-plane Machine (and of its
// EdgeMachine and EdgeBootstrapConfig) of a host.
func (r *Reconciler) controlPlaneMachineName(ac *sitev1.ApplicationCluster, host string) string {
	return host + "-" + r.revision(ac)
}

func workersName(ac *sitev1.ApplicationCluster) string { return ac.Name + "-workers" }

func (r *Reconciler) workerTemplateName(ac *sitev1.ApplicationCluster) string {
	return workersName(ac) + "-" + r.revision(ac)
}
