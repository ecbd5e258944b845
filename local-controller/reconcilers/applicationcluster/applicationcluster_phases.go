package applicationcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// reconcileImage returns the OS image the machines get: spec.osImage.url, or the site cache's
// URL once the cache holds the image (the cluster's ArtifactSet asks for it, with the
// packages and charts). Nil while the image is not cached yet.
func (r *Reconciler) reconcileImage(ctx context.Context, ac *sitev1.ApplicationCluster) (*sitev1.MachineImage, error) {
	img := ac.Spec.OSImage
	if img.URL != "" {
		return &sitev1.MachineImage{URL: img.URL, SHA256: img.SHA256, Format: img.Format}, nil
	}
	set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: ac.Name}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, set, func() error {
		set.Spec.Artifacts = ac.Spec.Artifacts()
		return controllerutil.SetControllerReference(ac, set, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("ArtifactSet %s of the cluster's artifacts: %w", ac.Name, err)
	}
	for _, a := range set.Status.Artifacts {
		if a.SHA256 == img.SHA256 && a.Phase == sitev1.ArtifactCached {
			return &sitev1.MachineImage{URL: a.URL, SHA256: img.SHA256, Format: img.Format}, nil
		}
	}
	return nil, nil
}

// reconcileHosts keeps one BareMetalHost per host of the spec.
func (r *Reconciler) reconcileHosts(ctx context.Context, ac *sitev1.ApplicationCluster, w *world, _ *sitev1.MachineImage) error {
	for _, h := range ac.Spec.Hosts {
		bmh := w.hosts[h.Name]
		if bmh == nil {
			bmh = &metal3api.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: r.HostNamespace, Name: h.Name}}
		}
		before := bmh.DeepCopy()
		if bmh.Labels == nil {
			bmh.Labels = map[string]string{}
		}
		maps.Copy(bmh.Labels, clusterLabels(ac))
		bmh.Labels[sitev1.HostRoleLabel] = string(h.Role)
		bmh.Labels[sitev1.HostNameLabel] = h.Name
		bmh.Spec.BootMACAddress = h.BootMACAddress
		bmh.Spec.BMC = metal3api.BMCDetails{Address: h.BMC.Address, CredentialsName: h.BMC.CredentialsName,
			DisableCertificateVerification: h.BMC.DisableCertificateVerification}
		switch {
		case before.ResourceVersion == "":
			// A BareMetalHost left by an earlier reconcile that failed before observing it is
			// found next time; AlreadyExists is not an error.
			if err := r.Client.Create(ctx, bmh); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create BareMetalHost %s: %w", h.Name, err)
			}
			w.hosts[h.Name] = bmh
		case !equalHost(before, bmh):
			if err := r.Client.Update(ctx, bmh); err != nil {
				return fmt.Errorf("update BareMetalHost %s: %w", h.Name, err)
			}
		}
	}
	return nil
}

func equalHost(a, b *metal3api.BareMetalHost) bool {
	return maps.Equal(a.Labels, b.Labels) && a.Spec.BootMACAddress == b.Spec.BootMACAddress && a.Spec.BMC == b.Spec.BMC
}

// reconcileCluster keeps the Cluster-API Cluster and its EdgeCluster.
func (r *Reconciler) reconcileCluster(ctx context.Context, ac *sitev1.ApplicationCluster, _ *world, _ *sitev1.MachineImage) error {
	ec := &sitev1.EdgeCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: ac.Name}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, ec, func() error {
		ec.Spec.ControlPlaneEndpoint = ac.Spec.Network.ControlPlaneEndpoint
		return nil
	}); err != nil {
		return fmt.Errorf("EdgeCluster %s: %w", ac.Name, err)
	}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: ac.Name}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl)
	if client.IgnoreNotFound(err) != nil || err == nil {
		return err
	}
	cl.Spec = clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: ac.Spec.Network.PodCIDRs},
			Services: clusterv1.NetworkRanges{CIDRBlocks: ac.Spec.Network.ServiceCIDRs},
		},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeCluster", Name: ec.Name},
	}
	if err := r.Client.Create(ctx, cl); err != nil {
		return fmt.Errorf("create Cluster %s: %w", ac.Name, err)
	}
	return nil
}

// reconcileControlPlane gives every control-plane host a Machine of the current revision. It
// creates the missing ones all at once, and replaces outdated ones one at a time, only while
// every other control-plane node is ready (no spare hardware: the host is wiped and
// provisioned again).
func (r *Reconciler) reconcileControlPlane(ctx context.Context, ac *sitev1.ApplicationCluster, w *world, image *sitev1.MachineImage) error {
	if image == nil {
		return nil
	}
	byHost := w.controlPlaneMachines()
	for _, h := range ac.Spec.Hosts {
		if h.Role != sitev1.RoleControlPlane || len(byHost[h.Name]) > 0 {
			continue
		}
		if err := r.createControlPlaneMachine(ctx, ac, h, image); err != nil {
			return err
		}
		byHost[h.Name] = []*clusterv1.Machine{nil} // created: counts as present below
	}
	var outdated *clusterv1.Machine
	for _, h := range ac.Spec.Hosts {
		if h.Role != sitev1.RoleControlPlane {
			continue
		}
		for _, m := range byHost[h.Name] {
			if !ready(m) {
				return nil // replace only while the whole control plane is up
			}
			if m.Name != r.controlPlaneMachineName(ac, h.Name) && outdated == nil {
				outdated = m
			}
		}
	}
	if outdated == nil {
		return nil
	}
	if err := r.setRemovalPolicy(ctx, w.edgeMachineOf[outdated.Name], sitev1.RemovalDeprovision); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("replacing control-plane machine", "machine", outdated.Name, "host", outdated.Labels[sitev1.HostNameLabel])
	if err := r.Client.Delete(ctx, outdated); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete outdated control-plane Machine %s: %w", outdated.Name, err)
	}
	return nil
}

func (r *Reconciler) createControlPlaneMachine(ctx context.Context, ac *sitev1.ApplicationCluster, h sitev1.ClusterHost, image *sitev1.MachineImage) error {
	name := r.controlPlaneMachineName(ac, h.Name)
	labels := map[string]string{clusterv1.ClusterNameLabel: ac.Name, clusterv1.MachineControlPlaneLabel: "", sitev1.HostNameLabel: h.Name}
	objs := []client.Object{
		&sitev1.EdgeBootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: name, Labels: labels}},
		&sitev1.EdgeMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: name, Labels: labels},
			Spec: sitev1.EdgeMachineSpec{
				HostSelector:  sitev1.HostSelector{BootMACAddress: h.BootMACAddress},
				Image:         *image,
				RemovalPolicy: sitev1.RemovalDeprovision,
			},
		},
		&clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{
				ClusterName: ac.Name,
				Version:     ac.Spec.KubernetesVersion,
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeBootstrapConfig", Name: name}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeMachine", Name: name},
			},
		},
	}
	for _, o := range objs {
		if err := r.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s for control-plane host %s: %w", o, name, h.Name, err)
		}
	}
	return nil
}

// reconcileWorkers keeps the worker MachineDeployment: one replica per worker host, machines
// bound to free worker hosts by label, rolled one at a time (maxSurge 0: no spare hardware).
// A new version or image reaches the workers only once the control plane runs it.
func (r *Reconciler) reconcileWorkers(ctx context.Context, ac *sitev1.ApplicationCluster, w *world, image *sitev1.MachineImage) error {
	if image == nil {
		return nil
	}
	owned := func(o client.Object) error { return controllerutil.SetControllerReference(ac, o, r.Client.Scheme()) }
	bt := &sitev1.EdgeBootstrapConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: workersName(ac)}}
	if err := owned(bt); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, bt); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create EdgeBootstrapConfigTemplate %s: %w", bt.Name, err)
	}
	version, template := ac.Spec.KubernetesVersion, r.workerTemplateName(ac)
	if w.workers != nil && (!r.controlPlaneCurrent(ac, w) || w.workers.Spec.Template.Spec.InfrastructureRef.Name == template) {
		// A new revision reaches the workers only once the control plane runs it; and with
		// in-place upgrades a new version alone is no new revision: the template's version
		// stays the one its machines were provisioned with, as any change would roll them.
		version, template = w.workers.Spec.Template.Spec.Version, w.workers.Spec.Template.Spec.InfrastructureRef.Name
	}
	if template == r.workerTemplateName(ac) {
		mt := &sitev1.EdgeMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: template},
			Spec: sitev1.EdgeMachineTemplateSpec{Template: sitev1.EdgeMachineTemplateResource{Spec: sitev1.EdgeMachineSpec{
				HostSelector:  sitev1.HostSelector{MatchLabels: map[string]string{sitev1.ClusterNameLabel: ac.Name, sitev1.ClusterNamespaceLabel: ac.Namespace, sitev1.HostRoleLabel: string(sitev1.RoleWorker)}},
				Image:         *image,
				RemovalPolicy: sitev1.RemovalDeprovision,
			}}},
		}
		if err := owned(mt); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, mt); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create EdgeMachineTemplate %s: %w", mt.Name, err)
		}
	}
	replicas := int32(0)
	for _, h := range ac.Spec.Hosts {
		if h.Role == sitev1.RoleWorker {
			replicas++
		}
	}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: workersName(ac)}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, md, func() error {
		labels := map[string]string{clusterv1.ClusterNameLabel: ac.Name, poolLabel: "workers"}
		md.Labels = labels
		md.Spec.ClusterName = ac.Name
		md.Spec.Replicas = ptr.To(replicas)
		md.Spec.Selector = metav1.LabelSelector{MatchLabels: labels}
		md.Spec.Template.Labels = labels
		md.Spec.Template.Spec.ClusterName = ac.Name
		md.Spec.Template.Spec.Version = version
		md.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeBootstrapConfigTemplate", Name: bt.Name}
		md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeMachineTemplate", Name: template}
		md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
				MaxSurge:       ptr.To(intstr.FromInt32(0)),
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			},
		}
		return owned(md)
	})
	if err != nil {
		return fmt.Errorf("MachineDeployment %s: %w", md.Name, err)
	}
	w.workers = md
	return nil
}

// controlPlaneCurrent reports whether every control-plane host has a ready Machine of the
// current revision and nothing else.
func (r *Reconciler) controlPlaneCurrent(ac *sitev1.ApplicationCluster, w *world) bool {
	byHost := w.controlPlaneMachines()
	for _, h := range ac.Spec.Hosts {
		if h.Role != sitev1.RoleControlPlane {
			continue
		}
		ms := byHost[h.Name]
		if len(ms) != 1 || ms[0].Name != r.controlPlaneMachineName(ac, h.Name) || !ready(ms[0]) {
			return false
		}
	}
	return true
}

// reconcileRemovedHosts takes hosts that left the spec out of the cluster: no new machine may
// pick them, their machine is deleted (a worker's is marked first so that its
// MachineDeployment scales in on exactly it), and once free the host is deprovisioned and
// deleted, or released as it is (HostRemovalPolicy).
func (r *Reconciler) reconcileRemovedHosts(ctx context.Context, ac *sitev1.ApplicationCluster, w *world, _ *sitev1.MachineImage) error {
	inSpec := map[string]bool{}
	for _, h := range ac.Spec.Hosts {
		inSpec[h.Name] = true
	}
	policy := ac.Spec.HostRemovalPolicy
	if policy == "" {
		policy = sitev1.RemovalDeprovision
	}
	for _, name := range slices.Sorted(maps.Keys(w.hosts)) {
		bmh := w.hosts[name]
		if inSpec[name] {
			continue
		}
		if _, ok := bmh.Labels[sitev1.HostRoleLabel]; ok {
			delete(bmh.Labels, sitev1.HostRoleLabel) // no machine picks it any more
			if err := r.Client.Update(ctx, bmh); err != nil {
				return fmt.Errorf("take BareMetalHost %s out of the cluster: %w", name, err)
			}
		}
		if m := w.machineOfHost[name]; m != nil {
			if err := r.setRemovalPolicy(ctx, w.edgeMachineOf[m.Name], policy); err != nil {
				return err
			}
			if err := r.removeMachine(ctx, m); err != nil {
				return err
			}
			continue
		}
		if bmh.Spec.ConsumerRef != nil {
			continue // its machine is on its way out
		}
		if policy == sitev1.RemovalKeep {
			delete(bmh.Labels, sitev1.ClusterNameLabel)
			delete(bmh.Labels, sitev1.ClusterNamespaceLabel)
			delete(bmh.Labels, sitev1.HostNameLabel)
			if err := r.Client.Update(ctx, bmh); err != nil {
				return fmt.Errorf("release BareMetalHost %s: %w", name, err)
			}
			ctrl.LoggerFrom(ctx).Info("released host, kept provisioned", "host", name)
			continue
		}
		if err := r.Client.Delete(ctx, bmh); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete BareMetalHost %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted deprovisioned host", "host", name)
	}
	return nil
}

// removeMachine deletes a control-plane Machine, or marks a worker Machine so that its
// MachineDeployment deletes it when it scales in.
func (r *Reconciler) removeMachine(ctx context.Context, m *clusterv1.Machine) error {
	if !m.DeletionTimestamp.IsZero() {
		return nil
	}
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
		if err := r.Client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete control-plane Machine %s: %w", m.Name, err)
		}
		return nil
	}
	if _, marked := m.Annotations[clusterv1.DeleteMachineAnnotation]; marked {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[clusterv1.DeleteMachineAnnotation] = ""
	if err := r.Client.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("mark worker Machine %s for deletion: %w", m.Name, err)
	}
	return nil
}

func (r *Reconciler) setRemovalPolicy(ctx context.Context, em *sitev1.EdgeMachine, policy sitev1.HostRemovalPolicy) error {
	if em == nil || em.Spec.RemovalPolicy == policy {
		return nil
	}
	patch := client.MergeFrom(em.DeepCopy())
	em.Spec.RemovalPolicy = policy
	if err := r.Client.Patch(ctx, em, patch); err != nil {
		return fmt.Errorf("set removal policy of EdgeMachine %s: %w", em.Name, err)
	}
	return nil
}

// reconcileDelete takes the cluster down: the Cluster-API Cluster (and with it every Machine,
// whose hosts are deprovisioned), then the hosts.
func (r *Reconciler) reconcileDelete(ctx context.Context, ac *sitev1.ApplicationCluster) (ctrl.Result, error) {
	ac.Status.Phase = sitev1.ClusterDeleting
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ac.Namespace, Name: ac.Name}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl)
	switch {
	case err == nil:
		if cl.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, cl); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete Cluster %s: %w", cl.Name, err)
			}
		}
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	case client.IgnoreNotFound(err) != nil:
		return ctrl.Result{}, fmt.Errorf("get Cluster %s: %w", cl.Name, err)
	}
	bmhs, err := r.hostsOf(ctx, ac)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range bmhs.Items {
		if err := r.Client.Delete(ctx, &bmhs.Items[i]); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete BareMetalHost %s: %w", bmhs.Items[i].Name, err)
		}
	}
	if len(bmhs.Items) > 0 {
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	if controllerutil.RemoveFinalizer(ac, sitev1.ApplicationClusterFinalizer) {
		if err := r.Client.Update(ctx, ac); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("remove finalizer of ApplicationCluster %s: %w", ac.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// hostError is Metal3's error on a host, empty when there is none.
func hostError(bmh *metal3api.BareMetalHost) string {
	if bmh == nil || bmh.Status.ErrorMessage == "" {
		return ""
	}
	return fmt.Sprintf("%s: %s", bmh.Status.ErrorType, bmh.Status.ErrorMessage)
}
