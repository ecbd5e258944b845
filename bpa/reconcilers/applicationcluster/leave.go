package applicationcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// The contract between the local controller, which deletes a host's Machine when the host
// leaves the cluster (Cluster-API then drains its node), and the BPA, which must stop the
// host's packages before the host is wiped or released: Cluster-API's pre-terminate hook. The
// BPA puts LeaveHookAnnotation (and AddressAnnotation: where it reaches the host, which the
// cluster's spec no longer says once the host left it) on every Machine whose host it
// installed. Cluster-API deletes a Machine in order — drain the node, then wait while any
// pre-terminate hook annotation is there, then delete the infrastructure (deprovision or
// release the host) and the Node. So the BPA finds a deleting Machine drained and waiting for
// it, takes the host out of the cluster (cluster.BringUp.Leave), and only then removes its
// annotation. Either side may be killed at any step: the Machine keeps its deletion and the
// annotation until the BPA has done its part, and every step of Leave is idempotent.
const (
	LeaveHookAnnotation = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/edgefleet-bpa"
	AddressAnnotation   = "bpa.edgefleet.io/address"
	hookOwner           = "edgefleet-bpa"
)

// holdMachines puts the leave hook and the host's address on the Machines of hosts (installed).
func (w *work) holdMachines(ctx context.Context, hosts []cluster.Host) error {
	for _, h := range hosts {
		m := &clusterv1.Machine{}
		if err := w.r.Client.Get(ctx, client.ObjectKey{Namespace: w.ac.Namespace, Name: h.SSH.Name}, m); err != nil {
			return fmt.Errorf("machine of host %s: %w", h.Name, err)
		}
		if !m.DeletionTimestamp.IsZero() || (m.Annotations[LeaveHookAnnotation] == hookOwner && m.Annotations[AddressAnnotation] == h.IP.String()) {
			continue
		}
		base := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[LeaveHookAnnotation], m.Annotations[AddressAnnotation] = hookOwner, h.IP.String()
		if err := w.r.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("hold machine %s of host %s: %w", m.Name, h.Name, err)
		}
	}
	return nil
}

// leave takes the hosts of the cluster's deleting Machines out of the cluster once Cluster-API
// has drained their nodes and waits for the BPA (see LeaveHookAnnotation), and lets the
// Machines go. A control-plane host leaves its packages' groups first (etcd's member is
// removed through a control-plane host that stays), so the cluster never counts a member that
// is gone. The host the cluster's API endpoint names does not leave: every node and client
// reaches the cluster through it; its Machine waits, and the error says what to do.
func (w *work) leave(ctx context.Context, pkgs []install.Package) error {
	machines := &clusterv1.MachineList{}
	if err := w.r.Client.List(ctx, machines, client.InNamespace(w.ac.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: w.ac.Name}); err != nil {
		return fmt.Errorf("machines of cluster %s: %w", w.ac.Name, err)
	}
	var staying []cluster.Host // resolved once, when a host leaves
	var errs []error
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.DeletionTimestamp.IsZero() || m.Annotations[LeaveHookAnnotation] == "" || m.Status.Deletion == nil || m.Status.Deletion.WaitForPreTerminateHookStartTime.IsZero() {
			continue // not leaving, or Cluster-API is still draining its node
		}
		h, err := leavingHost(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ep := w.ac.Spec.Network.ControlPlaneEndpoint.Host; h.ControlPlane && ep == h.IP.String() {
			errs = append(errs, fmt.Errorf("control-plane host %s cannot leave the cluster: it is the cluster's API endpoint (spec.network.controlPlaneEndpoint.host %s), which the BPA and the cluster's users reach it through; its Machine %s waits on annotation %s. Point the endpoint at another control-plane host first, or put the endpoint on a virtual address",
				h.Name, ep, m.Name, LeaveHookAnnotation))
			continue
		}
		if staying == nil {
			set, err := w.hosts(ctx)
			if err != nil {
				return err
			}
			staying = set.ready
		}
		res, err := cluster.New(w.r.Installer, w.r.Secrets).Leave(ctx, cluster.Spec{Name: w.ac.Name, Packages: pkgs, Hosts: staying}, h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Unreachable != nil {
			// A host that does not answer runs nothing the BPA could stop; it is wiped, or
			// released as it is, next.
			w.r.Recorder.Eventf(w.ac, nil, corev1.EventTypeWarning, "HostLeftUnreachable", "Leave",
				"host %s left the cluster without its packages stopped: it does not answer (%v)", h.Name, res.Unreachable)
		}
		if err := releaseMachine(ctx, w.r.Client, m); err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Unreachable == nil {
			w.r.Recorder.Eventf(w.ac, nil, corev1.EventTypeNormal, "HostLeft", "Leave", "host %s left the cluster: its node drained, its packages stopped", h.Name)
		}
	}
	return errors.Join(errs...)
}

// leavingHost is the host of a deleting Machine the BPA installed, as its annotations and
// labels say: the cluster's spec may no longer name it.
func leavingHost(m *clusterv1.Machine) (cluster.Host, error) {
	name := path.Base(m.Spec.ProviderID) // the BareMetalHost's name, the host's
	ip, err := netip.ParseAddr(m.Annotations[AddressAnnotation])
	if err != nil {
		return cluster.Host{}, fmt.Errorf("host %s of Machine %s is leaving, but annotation %s holds no address (%q) to reach it at: set it to the host's address",
			name, m.Name, AddressAnnotation, m.Annotations[AddressAnnotation])
	}
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	return cluster.Host{
		Name: name, IP: ip, ControlPlane: cp, ProviderID: m.Spec.ProviderID,
		SSH: sshexec.Target{Name: m.Name, Addr: net.JoinHostPort(ip.String(), "22")},
	}, nil
}

// releaseMachine removes the BPA's leave hook from a Machine.
func releaseMachine(ctx context.Context, c client.Client, m *clusterv1.Machine) error {
	if _, ok := m.Annotations[LeaveHookAnnotation]; !ok {
		return nil
	}
	base := m.DeepCopy()
	delete(m.Annotations, LeaveHookAnnotation)
	if err := c.Patch(ctx, m, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("release machine %s: %w", m.Name, err)
	}
	return nil
}

// releaseAll removes the leave hook from every Machine of cluster name in namespace ns: the
// cluster itself is being deleted (or is gone), and its hosts with it.
func (r *Reconciler) releaseAll(ctx context.Context, ns, name string) error {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return fmt.Errorf("machines of cluster %s/%s: %w", ns, name, err)
	}
	var errs []error
	for i := range machines.Items {
		errs = append(errs, releaseMachine(ctx, r.Client, &machines.Items[i]))
	}
	return errors.Join(errs...)
}
