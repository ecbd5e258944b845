package edgemachine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// DefaultRetryInterval is how often a machine that waits for something no watch reports (a
// free host on top of the host watch, its bootstrap data Secret) is looked at again.
const DefaultRetryInterval = 30 * time.Second

// Reconciler binds EdgeMachines to Metal3 BareMetalHosts and has Metal3 provision them.
type Reconciler struct {
	// Client reads EdgeMachines, Machines, Clusters and BareMetalHosts (through the manager's
	// cache) and writes EdgeMachines and BareMetalHosts.
	Client client.Client
	// HostNamespace holds the BareMetalHosts the machines take, whatever their own namespace
	// (sitev1.HostsNamespace in the local controller). Required.
	HostNamespace string
	// APIReader reads without the cache: the BareMetalHosts of a namespace while a machine has
	// no host recorded yet (a lagging cache must never hide a claim), and the metadata of
	// bootstrap data Secrets.
	APIReader client.Reader
	// Recorder emits an event on every change of the Ready condition and on every claim and
	// release of a host.
	Recorder events.EventRecorder
	// RetryInterval is how often a machine waiting for a free host or for its bootstrap data
	// Secret is looked at again; 0 means DefaultRetryInterval.
	RetryInterval time.Duration
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgemachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgemachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with its watches: a BareMetalHost brings back the
// EdgeMachine its consumerRef names (a free host, the machines still waiting for one); a Machine
// its EdgeMachine; a Cluster that appears, is paused or is unpaused its EdgeMachines. Paused
// EdgeMachines are reconciled too, only to report the Paused condition. The manager's scheme
// must know the site kinds, Cluster-API's core kinds (clusterv1) and Metal3's (metal3api).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.HostNamespace == "" {
		return errors.New("edgemachine: HostNamespace is required")
	}
	log := mgr.GetLogger().WithName("edgemachine")
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &sitev1.EdgeMachineList{}, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("map Clusters to EdgeMachines: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("edgemachine").
		For(&sitev1.EdgeMachine{}).
		Watches(&metal3api.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(r.hostToEdgeMachines)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(sitev1.GroupVersion.WithKind(edgeMachineKind)))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			builder.WithPredicates(predicates.Any(mgr.GetScheme(), log,
				predicates.ClusterCreateNotPaused(mgr.GetScheme(), log), predicates.ClusterPausedTransitions(mgr.GetScheme(), log)))).
		WithOptions(opts).
		Complete(r)
}

// Reconcile takes one EdgeMachine a step further: see the package documentation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	em := &sitev1.EdgeMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, em); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EdgeMachine %s: %w", req.NamespacedName, err)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, em.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get the owner Machine of EdgeMachine %s: %w", req.NamespacedName, err)
	}
	cluster, err := r.cluster(ctx, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The Paused condition (v1beta2 contract) is written at once when it changes; a change
	// brings the EdgeMachine back through its own update. Paused stops everything, deletion
	// included.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, em); err != nil || isPaused || requeue {
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("set the Paused condition of EdgeMachine %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}

	before := em.DeepCopy()
	defer func() {
		if err := r.patch(ctx, before, em); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()

	if !em.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, em)
	}
	switch {
	case machine == nil:
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonWaitingForOwner, "waiting for Cluster-API to set the owner Machine")
		return ctrl.Result{}, nil // setting the owner reference updates the EdgeMachine
	case cluster == nil:
		conditions.Set(&em.Status.Conditions, em.Generation, sitev1.EdgeMachineReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonWaitingForOwner, fmt.Sprintf("Cluster %q of Machine %s does not exist", machine.Spec.ClusterName, machine.Name))
		return ctrl.Result{}, nil // the Cluster watch brings the machine back
	}
	// The finalizer is stored before any host is claimed, so that no claim outlives the machine.
	if controllerutil.AddFinalizer(em, sitev1.EdgeMachineFinalizer) {
		if err := r.Client.Patch(ctx, em, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to EdgeMachine %s: %w", req.NamespacedName, err)
		}
		before = em.DeepCopy()
	}
	return r.reconcileNormal(ctx, em, machine)
}

// reconcileNormal runs the phases of a machine that is not being deleted.
func (r *Reconciler) reconcileNormal(ctx context.Context, em *sitev1.EdgeMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	secret, res, err := r.reconcileBootstrapData(ctx, em, machine)
	if err != nil || secret == "" {
		return res, err
	}
	host, res, err := r.reconcileHost(ctx, em)
	if err != nil || host == nil {
		return res, err
	}
	if err := r.reconcileHostSpec(ctx, em, host, secret); err != nil {
		return ctrl.Result{}, err
	}
	reconcileHostStatus(em, host)
	return ctrl.Result{}, nil
}

// cluster returns the Cluster of machine, or nil when machine is nil or its Cluster does not
// exist.
func (r *Reconciler) cluster(ctx context.Context, machine *clusterv1.Machine) (*clusterv1.Cluster, error) {
	if machine == nil {
		return nil, nil
	}
	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: machine.Spec.ClusterName}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Cluster %s/%s of Machine %s: %w", machine.Namespace, machine.Spec.ClusterName, machine.Name, err)
	}
	return cluster, nil
}

// patch writes what the reconcile changed: metadata and spec (finalizer, providerID), then
// status, and emits an event for a change of the Ready condition.
func (r *Reconciler) patch(ctx context.Context, before, em *sitev1.EdgeMachine) error {
	conditions.RecordChanges(r.Recorder, em, before.Status.Conditions, em.Status.Conditions, sitev1.EdgeMachineReadyCondition)
	deleting := !em.DeletionTimestamp.IsZero()
	status := em.Status.DeepCopy()
	base := before
	if !apiequality.Semantic.DeepEqual(before.Spec, em.Spec) || !slices.Equal(before.Finalizers, em.Finalizers) {
		if err := r.Client.Patch(ctx, em, client.MergeFrom(before)); err != nil {
			if deleting && apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("patch EdgeMachine %s: %w", client.ObjectKeyFromObject(em), err)
		}
		// em is the stored object now, with the stored status.
		base = em.DeepCopy()
		em.Status = *status
	}
	if apiequality.Semantic.DeepEqual(base.Status, em.Status) {
		return nil
	}
	if deleting && len(em.Finalizers) == 0 {
		return nil // the machine is gone
	}
	if err := r.Client.Status().Patch(ctx, em, client.MergeFrom(base)); err != nil {
		if deleting && apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of EdgeMachine %s: %w", client.ObjectKeyFromObject(em), err)
	}
	return nil
}

// hostToEdgeMachines maps a BareMetalHost to the EdgeMachine its consumerRef names, and a free
// host to the machines of its namespace that have no host yet.
func (r *Reconciler) hostToEdgeMachines(ctx context.Context, o client.Object) []reconcile.Request {
	h, ok := o.(*metal3api.BareMetalHost)
	if !ok {
		return nil
	}
	if ref := h.Spec.ConsumerRef; ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != sitev1.GroupVersion.Group || ref.Kind != edgeMachineKind {
			return nil
		}
		ns := ref.Namespace
		if ns == "" {
			ns = h.Namespace
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: ref.Name}}}
	}
	if !h.DeletionTimestamp.IsZero() {
		return nil
	}
	if h.Namespace != r.HostNamespace {
		return nil
	}
	machines := &sitev1.EdgeMachineList{}
	if err := r.Client.List(ctx, machines); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list EdgeMachines waiting for a host")
		return nil
	}
	var reqs []reconcile.Request
	for i := range machines.Items {
		em := &machines.Items[i]
		if em.Status.Host == "" && em.DeletionTimestamp.IsZero() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(em)})
		}
	}
	return reqs
}

func (r *Reconciler) retryInterval() time.Duration {
	if r.RetryInterval > 0 {
		return r.RetryInterval
	}
	return DefaultRetryInterval
}
