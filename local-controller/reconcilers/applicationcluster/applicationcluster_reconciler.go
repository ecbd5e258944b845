package applicationcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reconciler expands ApplicationClusters into Metal3 BareMetalHosts and Cluster-API objects,
// rolls changes through them, and summarizes their state in status.
type Reconciler struct {
	// Client reads and writes the site cluster.
	Client client.Client
	// HostNamespace holds the BareMetalHosts of every cluster, apart from the clusters
	// (sitev1.HostsNamespace in the local controller): the BMC Secrets the global controller
	// pushes are there, and Metal3 reads a host's Secret in the host's namespace only. Required.
	HostNamespace string
	// Recorder emits an event on every condition change.
	Recorder events.EventRecorder
	// Resync is how often a cluster that has not settled is looked at again (its Machines and
	// hosts also trigger reconciles when they change).
	Resync time.Duration
	// InPlaceUpgrades says that a new Kubernetes version is rolled through the nodes in place,
	// by the site's BPA patching their packages (control plane first, each node drained), so
	// that only a new OS image replaces machines. Without it (nodes that are not built from
	// packages: the node simulator), a new version replaces the machines one by one.
	InPlaceUpgrades bool
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=applicationclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=applicationclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=artifactsets;edgeclusters;edgemachines;edgemachinetemplates;edgebootstrapconfigs;edgebootstrapconfigtemplates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines;machinedeployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. The manager's scheme needs sitev1, clusterv1 and
// metal3api.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.HostNamespace == "" {
		return errors.New("applicationcluster: HostNamespace is required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("applicationcluster").
		For(&sitev1.ApplicationCluster{}).
		Watches(&metal3api.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(hostToCluster)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(byLabel(clusterv1.ClusterNameLabel))).
		Watches(&sitev1.ArtifactSet{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &sitev1.ApplicationCluster{})).
		WithOptions(opts).
		Complete(r)
}

// hostToCluster maps a BareMetalHost to the ApplicationCluster its labels name.
func hostToCluster(_ context.Context, o client.Object) []reconcile.Request {
	name, ns := o.GetLabels()[sitev1.ClusterNameLabel], o.GetLabels()[sitev1.ClusterNamespaceLabel]
	if name == "" || ns == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
}

// byLabel maps an object to the ApplicationCluster its label names (the CAPI Cluster of an
// ApplicationCluster has its name).
func byLabel(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[label]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	}
}

// Reconcile makes one ApplicationCluster real.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	ac := &sitev1.ApplicationCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, ac); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := ac.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, ac, reterr); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if !ac.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, ac)
	}
	if controllerutil.AddFinalizer(ac, sitev1.ApplicationClusterFinalizer) {
		if err := r.Client.Update(ctx, ac); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to ApplicationCluster %s: %w", req.NamespacedName, err)
		}
	}
	// A cluster is Pending from the first sight on, even when this reconcile fails before it
	// summarizes. (Set after the finalizer's update, which reads the stored status back.)
	if ac.Status.Phase == "" {
		ac.Status.Phase = sitev1.ClusterPending
	}
	w, err := r.observe(ctx, ac)
	if err != nil {
		return ctrl.Result{}, err
	}
	image, err := r.reconcileImage(ctx, ac)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, phase := range []func(context.Context, *sitev1.ApplicationCluster, *world, *sitev1.MachineImage) error{
		r.reconcileHosts,
		r.reconcileCluster,
		r.reconcileControlPlane,
		r.reconcileWorkers,
		r.reconcileRemovedHosts,
	} {
		if err := phase(ctx, ac, w, image); err != nil {
			return ctrl.Result{}, err
		}
	}
	if settled := r.summarize(ac, w, image); !settled {
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	return ctrl.Result{}, nil
}

// patchStatus writes status when it changed; ObservedGeneration and the operation generation
// only after a clean reconcile.
func (r *Reconciler) patchStatus(ctx context.Context, before, ac *sitev1.ApplicationCluster, reconcileErr error) error {
	if reconcileErr == nil {
		ac.Status.ObservedGeneration = ac.Generation
		ac.Status.ObservedOperationGeneration = ac.Spec.OperationGeneration
		ac.Status.LastError = ""
	} else {
		ac.Status.LastError = reconcileErr.Error()
	}
	conditions.RecordChanges(r.Recorder, ac, before.Status.Conditions, ac.Status.Conditions,
		sitev1.HostsProvisionedCondition, sitev1.ControlPlaneReadyCondition, sitev1.WorkersReadyCondition, sitev1.ApplicationClusterReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, ac.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ac, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status of ApplicationCluster %s: %w", client.ObjectKeyFromObject(ac), err)
	}
	return nil
}
