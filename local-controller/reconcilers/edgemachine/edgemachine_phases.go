package edgemachine

import (
	"context"
	"fmt"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// maxConflicts is how often a write to a BareMetalHost is tried again after a conflict (Metal3
// writes its hosts all the time) before the reconcile gives up and is retried.
const maxConflicts = 5

// reconcileBootstrapData returns the name of the Machine's bootstrap data Secret, or "" while
// there is none yet.
func (r *Reconciler) reconcileBootstrapData(ctx context.Context, em *sitev1.EdgeMachine, machine *clusterv1.Machine) (string, ctrl.Result, error) {
	name := ptr.Deref(machine.Spec.Bootstrap.DataSecretName, "")
	if name == "" {
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonWaitingForBootstrapData, fmt.Sprintf("Machine %s has no bootstrap data yet (spec.bootstrap.dataSecretName is empty)", machine.Name))
		return "", ctrl.Result{}, nil // the Machine watch brings the machine back
	}
	if ptr.Deref(em.Status.Initialization.Provisioned, false) {
		return name, ctrl.Result{}, nil // the host has booted with it
	}
	// Metal3 reads the Secret only when it provisions; say early when it is missing. Only its
	// metadata is read.
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: em.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonWaitingForBootstrapData, fmt.Sprintf("Secret %s, the bootstrap data of Machine %s, does not exist", name, machine.Name))
		return "", ctrl.Result{RequeueAfter: r.retryInterval()}, nil
	case err != nil:
		return "", ctrl.Result{}, fmt.Errorf("read bootstrap data Secret %s/%s of Machine %s: %w", em.Namespace, name, machine.Name, err)
	}
	return name, ctrl.Result{}, nil
}

// reconcileHost returns the machine's host: the one recorded in status, else the one whose
// consumerRef already names the machine (a claim whose status was never saved), else a host
// of the selector, claimed now. It returns nil when there is none.
func (r *Reconciler) reconcileHost(ctx context.Context, em *sitev1.EdgeMachine) (*metal3api.BareMetalHost, ctrl.Result, error) {
	if em.Status.Host != "" {
		h, err := r.boundHost(ctx, em)
		return h, ctrl.Result{}, err
	}
	hosts := &metal3api.BareMetalHostList{}
	if err := r.APIReader.List(ctx, hosts, client.InNamespace(r.HostNamespace)); err != nil {
		return nil, ctrl.Result{}, fmt.Errorf("list BareMetalHosts in %s for EdgeMachine %s: %w", r.HostNamespace, em.Name, err)
	}
	if h := claimedBy(hosts.Items, em); h != nil {
		ctrl.LoggerFrom(ctx).Info("found the host this machine claimed before", "host", h.Name)
		em.Status.Host = h.Name
		return h, ctrl.Result{}, nil
	}
	sel := selectHosts(hosts.Items, em.Spec.HostSelector)
	for _, h := range sel.candidates {
		ok, err := r.updateHost(ctx, h,
			func(h *metal3api.BareMetalHost) bool { return consumedBy(h, em) || eligible(h, em.Spec.HostSelector) },
			func(h *metal3api.BareMetalHost) { h.Spec.ConsumerRef = consumerRef(em) })
		if err != nil {
			return nil, ctrl.Result{}, fmt.Errorf("claim BareMetalHost %s for EdgeMachine %s: %w", h.Name, em.Name, err)
		}
		if ok {
			em.Status.Host = h.Name
			r.Recorder.Eventf(em, h, corev1.EventTypeNormal, "HostClaimed", "Claim", "claimed BareMetalHost %s (boot MAC %s)", h.Name, h.Spec.BootMACAddress)
			return h, ctrl.Result{}, nil
		}
	}
	why := sel.why
	if why == "" {
		why = "each matching host was claimed by another machine meanwhile"
	}
	conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonNoHost,
		fmt.Sprintf("no BareMetalHost in namespace %s for %s: %s", r.HostNamespace, describeSelector(em.Spec.HostSelector), why))
	return nil, ctrl.Result{RequeueAfter: r.retryInterval()}, nil
}

// claimedBy returns the host among hosts whose consumerRef names em (the first by name, should
// there be several), or nil.
func claimedBy(hosts []metal3api.BareMetalHost, em *sitev1.EdgeMachine) *metal3api.BareMetalHost {
	var found *metal3api.BareMetalHost
	for i := range hosts {
		if consumedBy(&hosts[i], em) && (found == nil || hosts[i].Name < found.Name) {
			found = &hosts[i]
		}
	}
	return found
}

// eligible reports whether sel may claim h.
func eligible(h *metal3api.BareMetalHost, sel sitev1.HostSelector) bool {
	return len(selectHosts([]metal3api.BareMetalHost{*h}, sel).candidates) == 1
}

// boundHost returns the host recorded in status. The cache may not show the machine's claim
// yet: a host that looks free is claimed again, under the optimistic lock, which settles it. A
// host that is gone or claimed by another is an error the machine cannot recover from: a
// machine never moves to another host.
func (r *Reconciler) boundHost(ctx context.Context, em *sitev1.EdgeMachine) (*metal3api.BareMetalHost, error) {
	h := &metal3api.BareMetalHost{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.HostNamespace, Name: em.Status.Host}, h)
	switch {
	case apierrors.IsNotFound(err):
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonHostError,
			fmt.Sprintf("BareMetalHost %s, bound to this machine, does not exist any more: delete the machine", em.Status.Host))
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get BareMetalHost %s/%s of EdgeMachine %s: %w", r.HostNamespace, em.Status.Host, em.Name, err)
	case consumedBy(h, em):
		return h, nil
	}
	ok, err := r.updateHost(ctx, h,
		func(h *metal3api.BareMetalHost) bool { return consumedBy(h, em) || free(h) },
		func(h *metal3api.BareMetalHost) { h.Spec.ConsumerRef = consumerRef(em) })
	if err != nil {
		return nil, fmt.Errorf("claim BareMetalHost %s again for EdgeMachine %s: %w", h.Name, em.Name, err)
	}
	if ok {
		return h, nil
	}
	why := "is being deleted"
	if h.Spec.ConsumerRef != nil {
		why = "is claimed by " + describeRef(h.Spec.ConsumerRef)
	}
	conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonHostError,
		fmt.Sprintf("BareMetalHost %s, bound to this machine, %s: delete the machine", h.Name, why))
	return nil, nil
}

// reconcileHostSpec writes the image, the bootstrap data Secret as user data and online=true
// on the machine's host, when they differ. Once the machine is provisioned its host is left
// alone: a changed image does not reprovision a running node (replace the machine instead).
func (r *Reconciler) reconcileHostSpec(ctx context.Context, em *sitev1.EdgeMachine, h *metal3api.BareMetalHost, secret string) error {
	if ptr.Deref(em.Status.Initialization.Provisioned, false) {
		return nil
	}
	image := desiredImage(em)
	userData := &corev1.SecretReference{Namespace: em.Namespace, Name: secret}
	_, err := r.updateHost(ctx, h,
		func(h *metal3api.BareMetalHost) bool { return consumedBy(h, em) },
		func(h *metal3api.BareMetalHost) {
			h.Spec.Image = image.DeepCopy()
			h.Spec.UserData = userData.DeepCopy()
			h.Spec.Online = true
		})
	if err != nil {
		return fmt.Errorf("set image and user data on BareMetalHost %s of EdgeMachine %s: %w", h.Name, em.Name, err)
	}
	return nil // a host released meanwhile shows on the next reconcile, which its update triggers
}

// reconcileHostStatus mirrors Metal3's view of the host into the machine's status.
func reconcileHostStatus(em *sitev1.EdgeMachine, h *metal3api.BareMetalHost) {
	state := h.Status.Provisioning.State
	em.Status.ProvisioningState = string(state)
	if msg := hostError(h); msg != "" {
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonHostError,
			fmt.Sprintf("Metal3 reports an error on BareMetalHost %s (%s): %s", h.Name, describeState(state), msg))
		return
	}
	if provisioned(h) {
		em.Spec.ProviderID = providerID(h)
		em.Status.Initialization.Provisioned = ptr.To(true)
		em.Status.Addresses = addresses(h)
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionTrue, sitev1.ReasonHostProvisioned,
			fmt.Sprintf("BareMetalHost %s is provisioned with %s", h.Name, h.Status.Provisioning.Image.URL))
		return
	}
	conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonHostProvisioning,
		fmt.Sprintf("BareMetalHost %s is %s", h.Name, describeState(state)))
}

func describeState(s metal3api.ProvisioningState) string {
	if s == metal3api.StateNone {
		return "not registered yet"
	}
	return string(s)
}

// reconcileDelete gives the machine's host back, then lets the machine go.
func (r *Reconciler) reconcileDelete(ctx context.Context, em *sitev1.EdgeMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(em, sitev1.EdgeMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	done, err := r.releaseHost(ctx, em)
	if err != nil || !done {
		return ctrl.Result{}, err // the host watch brings the machine back
	}
	controllerutil.RemoveFinalizer(em, sitev1.EdgeMachineFinalizer)
	return ctrl.Result{}, nil
}

// releaseHost deprovisions, releases and powers off (removalPolicy Deprovision) or only
// releases (Keep: the host stays provisioned and online) the machine's host, and reports
// whether that is done. A host that is gone, being deleted or not
// claimed by the machine is done.
func (r *Reconciler) releaseHost(ctx context.Context, em *sitev1.EdgeMachine) (bool, error) {
	h, err := r.hostToRelease(ctx, em)
	if err != nil {
		return false, err
	}
	if h == nil {
		return true, nil // a missing host never holds the machine back
	}
	em.Status.ProvisioningState = string(h.Status.Provisioning.State)
	if !h.DeletionTimestamp.IsZero() {
		return true, nil // Metal3 is deleting the host
	}
	mine := func(h *metal3api.BareMetalHost) bool { return consumedBy(h, em) }
	release := func(h *metal3api.BareMetalHost) { h.Spec.ConsumerRef = nil }

	if em.Spec.RemovalPolicy == sitev1.RemovalKeep {
		ok, err := r.updateHost(ctx, h, mine, release)
		if err != nil {
			return false, fmt.Errorf("release BareMetalHost %s of EdgeMachine %s: %w", h.Name, em.Name, err)
		}
		if ok {
			r.Recorder.Eventf(em, h, corev1.EventTypeNormal, "HostReleased", "Release",
				"released BareMetalHost %s, left %s (removalPolicy %s)", h.Name, describeState(h.Status.Provisioning.State), sitev1.RemovalKeep)
		}
		return true, nil
	}

	// Deprovision: take image and user data away, wait until Metal3 has wiped the host, then
	// release it. The claim stays meanwhile, so that no other machine takes a host in use.
	ok, err := r.updateHost(ctx, h, mine, func(h *metal3api.BareMetalHost) { h.Spec.Image, h.Spec.UserData = nil, nil })
	if err != nil {
		return false, fmt.Errorf("deprovision BareMetalHost %s of EdgeMachine %s: %w", h.Name, em.Name, err)
	}
	if !ok {
		return true, nil
	}
	em.Status.ProvisioningState = string(h.Status.Provisioning.State)
	if holdsImage(h) {
		msg := fmt.Sprintf("waiting for Metal3 to deprovision BareMetalHost %s (now %s)", h.Name, describeState(h.Status.Provisioning.State))
		if e := hostError(h); e != "" {
			msg += ": " + e
		}
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse, sitev1.ReasonHostReleasing, msg)
		return false, nil
	}
	// Wiped, the host is released powered off: it does not sit switched on with nothing on it
	// until the next machine claims it (which sets online again) or it is deleted.
	releaseOff := func(h *metal3api.BareMetalHost) { h.Spec.ConsumerRef, h.Spec.Online = nil, false }
	if ok, err = r.updateHost(ctx, h, mine, releaseOff); err != nil {
		return false, fmt.Errorf("release BareMetalHost %s of EdgeMachine %s: %w", h.Name, em.Name, err)
	}
	if ok {
		r.Recorder.Eventf(em, h, corev1.EventTypeNormal, "HostReleased", "Release",
			"released BareMetalHost %s, deprovisioned (%s) and powered off", h.Name, describeState(h.Status.Provisioning.State))
	}
	return true, nil
}

// hostToRelease returns the host the machine claimed, read without the cache, or nil when there
// is none (any more).
func (r *Reconciler) hostToRelease(ctx context.Context, em *sitev1.EdgeMachine) (*metal3api.BareMetalHost, error) {
	if em.Status.Host != "" {
		h := &metal3api.BareMetalHost{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.HostNamespace, Name: em.Status.Host}, h)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("get BareMetalHost %s/%s of EdgeMachine %s: %w", r.HostNamespace, em.Status.Host, em.Name, err)
		}
		return h, nil
	}
	// No host recorded: a claim whose status was never saved is found by its consumerRef.
	hosts := &metal3api.BareMetalHostList{}
	if err := r.APIReader.List(ctx, hosts, client.InNamespace(r.HostNamespace)); err != nil {
		return nil, fmt.Errorf("list BareMetalHosts in %s for EdgeMachine %s: %w", r.HostNamespace, em.Name, err)
	}
	return claimedBy(hosts.Items, em), nil
}

// updateHost applies change to h and writes the spec with an optimistic lock, if allowed(h) and
// the change changes anything. After a conflict it reads the host again (uncached) and starts
// over. It reports whether the change is in place; false means allowed said no or the host is
// gone. h is the stored host afterwards.
func (r *Reconciler) updateHost(ctx context.Context, h *metal3api.BareMetalHost, allowed func(*metal3api.BareMetalHost) bool, change func(*metal3api.BareMetalHost)) (bool, error) {
	key := client.ObjectKeyFromObject(h)
	for attempt := 1; ; attempt++ {
		if !allowed(h) {
			return false, nil
		}
		base := h.DeepCopy()
		change(h)
		if apiequality.Semantic.DeepEqual(base.Spec, h.Spec) {
			return true, nil
		}
		err := r.Client.Patch(ctx, h, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			*h = *base
			return false, nil
		case !apierrors.IsConflict(err) || attempt == maxConflicts:
			*h = *base
			return false, fmt.Errorf("update BareMetalHost %s (attempt %d): %w", key, attempt, err)
		}
		fresh := &metal3api.BareMetalHost{}
		if err := r.APIReader.Get(ctx, key, fresh); err != nil {
			*h = *base
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("read BareMetalHost %s again after a conflict: %w", key, err)
		}
		*h = *fresh
	}
}
