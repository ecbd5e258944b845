package applicationcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// Reconciler reconciles ApplicationClusters on the BPA's side.
type Reconciler struct {
	// Client reads the site cluster and writes status.bootstrap and the kubeconfig Secret.
	Client client.Client
	// APIReader reads the ApplicationCluster from the API server at the start of a reconcile:
	// the status merge patches carry no resourceVersion precondition (so that the local
	// controller's writes never make them fail), so one computed from a cached copy older
	// than the BPA's own last write would put its fields over that write's — a Failed phase
	// kept under the message of a patch that starts again.
	APIReader client.Reader
	// Installer installs packages and writes files on hosts (an install.Installer over SSH).
	Installer cluster.Installer
	// Secrets holds the clusters' PKI and admin kubeconfigs.
	Secrets secrets.Store
	// Charts installs charts into application clusters.
	Charts Charts
	// ClusterClient makes a client of an application cluster from its admin config
	// (kubernetes.NewForConfig).
	ClusterClient func(*rest.Config) (kubernetes.Interface, error)
	// HTTP reads the site cache.
	HTTP *http.Client
	// Recorder emits an event when the phase changes.
	Recorder events.EventRecorder
	// Retry is how long to wait before looking again while waiting or after an error.
	Retry time.Duration
	// Resync is how often an installed cluster is checked again (hosts, charts).
	Resync time.Duration
	// Certificates is the lifetime of the clusters' leaf certificates (zero fields: defaults).
	Certificates certs.Lifetime
	// ClientCertificateMaxTTL is the longest a cluster user's certificate lives: a CA
	// roll-over keeps the old CAs trusted that long after the new one began signing them.
	ClientCertificateMaxTTL time.Duration
	// KMS, when set, has the clusters' API servers encrypt Secrets through Vault
	// (bpa/clusterkms); nil: with a secretbox key of each cluster's PKI.
	KMS KMSSource

	cache *siteCache
}

// KMSSource gives a cluster what its KMS plugin needs (clusterkms.Source), and when to ask
// again for a new token.
type KMSSource interface {
	For(ctx context.Context, ac *sitev1.ApplicationCluster) (*cluster.KMS, time.Time, error)
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=applicationclusters,verbs=get;list;watch
// The KMS plugins' ServiceAccounts and their tokens (bpa/clusterkms), in their own namespace.
// +kubebuilder:rbac:groups="",namespace=edgefleet-kms,resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups="",namespace=edgefleet-kms,resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=applicationclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=artifactsets,verbs=get;list;watch
// The site cache's content (sitecache.ReadersResource, a virtual resource checked by the local
// controller's SubjectAccessReview).
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=artifacts,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// SetupWithManager registers the reconciler: spec changes of an ApplicationCluster (not its
// status, which the local controller rewrites), its Machines (a host provisioned) and its
// ArtifactSet (packages cached) bring it back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	switch {
	case r.Client == nil, r.APIReader == nil, r.Installer == nil, r.Secrets == nil, r.Charts == nil, r.ClusterClient == nil, r.HTTP == nil, r.Recorder == nil:
		return errors.New("bpa-applicationcluster: Client, APIReader, Installer, Secrets, Charts, ClusterClient, HTTP and Recorder are required")
	case r.Retry <= 0, r.Resync <= 0, r.ClientCertificateMaxTTL <= 0:
		return errors.New("bpa-applicationcluster: Retry, Resync and ClientCertificateMaxTTL must be positive")
	}
	r.cache = newSiteCache(r.HTTP)
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("bpa-applicationcluster").
		For(&sitev1.ApplicationCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToCluster)).
		Watches(&sitev1.ArtifactSet{}, sameName).
		WithOptions(opts).
		Complete(r)
}

// machineToCluster maps a Machine to the ApplicationCluster of its Cluster (same name).
func machineToCluster(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// Reconcile brings the cluster's hosts, packages and charts in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	ac := &sitev1.ApplicationCluster{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, ac); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.releaseAll(ctx, req.Namespace, req.Name)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !ac.DeletionTimestamp.IsZero() {
		// Metal3 wipes the hosts; the secrets stay for an audit. Nothing is left to stop.
		return ctrl.Result{}, r.releaseAll(ctx, ac.Namespace, ac.Name)
	}
	before := ac.DeepCopy()
	if ac.Status.Bootstrap == nil {
		ac.Status.Bootstrap = &sitev1.BootstrapStatus{}
	}
	w := &work{r: r, ac: ac, st: ac.Status.Bootstrap, before: before,
		recheck: ac.Status.Bootstrap.Phase == sitev1.BootstrapInstalled && ac.Status.Bootstrap.ObservedGeneration == ac.Generation}
	defer func() {
		if err := r.patchStatus(ctx, w.before, ac); err != nil {
			res, reterr = ctrl.Result{}, errors.Join(reterr, err)
		}
	}()
	res, err := w.run(ctx)
	if err != nil {
		w.st.Message = err.Error()
		if unreachable := (*sshexec.UnreachableError)(nil); errors.As(err, &unreachable) {
			// Machines are provisioned before their hosts have booted: say so, not the
			// errors of every step that could not start.
			w.st.Message = fmt.Sprintf("waiting for host %s to answer over SSH at %s (%v): a host just provisioned may still be booting; if this stays, check the host's network and sshd",
				unreachable.Host, unreachable.Addr, unreachable.Err)
		}
		if w.st.Phase != sitev1.BootstrapFailed {
			w.st.Phase = sitev1.BootstrapWaiting
		}
		ctrl.LoggerFrom(ctx).Info("cluster not installed yet", "reason", err.Error())
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	w.st.ObservedGeneration = ac.Generation
	return res, nil
}

// patchStatus writes status.bootstrap when it changed: a merge patch of that field alone,
// without a resourceVersion precondition, so the local controller's fields are never
// overwritten and its writes never make ours fail.
func (r *Reconciler) patchStatus(ctx context.Context, before, ac *sitev1.ApplicationCluster) error {
	was, is := before.Status.Bootstrap, ac.Status.Bootstrap
	if apiequality.Semantic.DeepEqual(was, is) {
		return nil
	}
	if was == nil || was.Phase != is.Phase {
		r.Recorder.Eventf(ac, nil, eventType(is.Phase), "Bootstrap"+string(is.Phase), "Bootstrap", "%s", is.Message)
	}
	base := before.DeepCopy()
	base.ResourceVersion = ac.ResourceVersion // an earlier patch of this reconcile moved it on
	if err := r.Client.Status().Patch(ctx, ac, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status.bootstrap of ApplicationCluster %s: %w", client.ObjectKeyFromObject(ac), err)
	}
	return nil
}

func eventType(p sitev1.BootstrapPhase) string {
	if p == sitev1.BootstrapFailed {
		return "Warning"
	}
	return "Normal"
}
