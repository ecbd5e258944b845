package host

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reconciler reconciles Hosts.
type Reconciler struct {
	// Client reads Sites, Hosts and Secret metadata from the cache and writes Host status.
	Client client.Client
	// Recorder emits an event on every condition change.
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=hosts,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=hosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. The index package's indexes must be set up first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("host").
		For(&fleetv1.Host{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A host created or deleted changes who owns its boot MAC: look at the others with it.
		Watches(&fleetv1.Host{}, handler.EnqueueRequestsFromMapFunc(r.hostsWithSameMAC),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// A site created or deleted binds or unbinds its hosts.
		Watches(&fleetv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.hostsOfSite),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
			}})).
		// A BMC Secret created or deleted makes its hosts' credentials found or missing (only
		// the Secrets' metadata is cached, shared with the site reconciler's watch).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.hostsOfSecret),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
			}})).
		WithOptions(opts).
		Complete(r)
}

// Reconcile brings one Host's status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	host := &fleetv1.Host{}
	if err := r.Client.Get(ctx, req.NamespacedName, host); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !host.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := host.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, host, reterr == nil); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	for _, phase := range []func(context.Context, *fleetv1.Host) error{
		r.reconcileSite,
		r.reconcileBootMAC,
		r.reconcileBMCCredentials,
		r.reconcileReady,
	} {
		if err := phase(ctx, host); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// reconcileSite binds the host to the Site its spec names.
func (r *Reconciler) reconcileSite(ctx context.Context, host *fleetv1.Host) error {
	key := types.NamespacedName{Namespace: host.Namespace, Name: host.Spec.SiteRef.Name}
	site := &fleetv1.Site{}
	err := r.Client.Get(ctx, key, site)
	switch {
	case apierrors.IsNotFound(err):
		setCondition(host, fleetv1.HostSiteBoundCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotFound,
			fmt.Sprintf("Site %q (spec.siteRef.name) does not exist in namespace %q", key.Name, key.Namespace))
	case err != nil:
		return fmt.Errorf("get site %s of host %s: %w", key, client.ObjectKeyFromObject(host), err)
	case !site.DeletionTimestamp.IsZero():
		setCondition(host, fleetv1.HostSiteBoundCondition, metav1.ConditionFalse, fleetv1.ReasonSiteDeleting,
			fmt.Sprintf("Site %q is being deleted", key.Name))
	default:
		setCondition(host, fleetv1.HostSiteBoundCondition, metav1.ConditionTrue, fleetv1.ReasonSiteFound,
			fmt.Sprintf("bound to Site %q", key.Name))
	}
	return nil
}

// reconcileBootMAC gives the boot MAC to the earliest-registered host that claims it.
func (r *Reconciler) reconcileBootMAC(ctx context.Context, host *fleetv1.Host) error {
	mac := index.NormalizeMAC(host.Spec.BootMACAddress)
	hosts := &fleetv1.HostList{}
	if err := r.Client.List(ctx, hosts, client.MatchingFields{index.HostBootMAC: mac}); err != nil {
		return fmt.Errorf("list hosts with boot MAC %s: %w", mac, err)
	}
	owner := host
	others := 0
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if h.UID == host.UID || !h.DeletionTimestamp.IsZero() {
			continue
		}
		others++
		if registeredBefore(h, owner) {
			owner = h
		}
	}
	switch {
	case owner != host:
		setCondition(host, fleetv1.HostBootMACUniqueCondition, metav1.ConditionFalse, fleetv1.ReasonDuplicateBootMAC,
			fmt.Sprintf("boot MAC %s is already used by Host %s/%s, registered earlier; fix spec.bootMACAddress of one of them", mac, owner.Namespace, owner.Name))
	case others > 0:
		setCondition(host, fleetv1.HostBootMACUniqueCondition, metav1.ConditionTrue, fleetv1.ReasonBootMACUnique,
			fmt.Sprintf("this host keeps boot MAC %s; %d later host(s) claiming it are flagged", mac, others))
	default:
		setCondition(host, fleetv1.HostBootMACUniqueCondition, metav1.ConditionTrue, fleetv1.ReasonBootMACUnique,
			fmt.Sprintf("no other host uses boot MAC %s", mac))
	}
	return nil
}

// reconcileBMCCredentials checks that the Secret with the host's BMC credentials exists; the
// site controller, which copies it to the site, checks its keys.
func (r *Reconciler) reconcileBMCCredentials(ctx context.Context, host *fleetv1.Host) error {
	bmc := host.Spec.BMC
	if bmc.CredentialsSecretRef == nil {
		where := "spec.bmc.credentialsVaultRef"
		if bmc.CredentialsVaultRef != nil {
			where += " " + bmc.CredentialsVaultRef.Path
		}
		setCondition(host, fleetv1.HostBMCCredentialsCondition, metav1.ConditionTrue, fleetv1.ReasonBMCCredentialsInVault,
			fmt.Sprintf("the BMC credentials are a Vault entry (%s), read by the site controller at each push: its Site's ClusterSynced condition tells when it cannot be read", where))
		return nil
	}
	key := types.NamespacedName{Namespace: host.Namespace, Name: bmc.CredentialsSecretRef.Name}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Client.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		setCondition(host, fleetv1.HostBMCCredentialsCondition, metav1.ConditionFalse, fleetv1.ReasonBMCCredentialsNotFound,
			fmt.Sprintf("BMC Secret %q (spec.bmc.credentialsSecretRef.name) does not exist in namespace %q: create it with the BMC's \"username\" and \"password\"; until then the host is left out of its site's cluster", key.Name, key.Namespace))
	case err != nil:
		return fmt.Errorf("get BMC secret %s of host %s: %w", key, client.ObjectKeyFromObject(host), err)
	case !secret.DeletionTimestamp.IsZero():
		setCondition(host, fleetv1.HostBMCCredentialsCondition, metav1.ConditionFalse, fleetv1.ReasonBMCCredentialsNotFound,
			fmt.Sprintf("BMC Secret %q (spec.bmc.credentialsSecretRef.name) is being deleted", key.Name))
	default:
		setCondition(host, fleetv1.HostBMCCredentialsCondition, metav1.ConditionTrue, fleetv1.ReasonBMCCredentialsFound,
			fmt.Sprintf("BMC Secret %q exists", key.Name))
	}
	return nil
}

// registeredBefore orders hosts by creation time, then namespace and name, so every reconcile
// picks the same owner of a MAC.
func registeredBefore(a, b *fleetv1.Host) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return index.Key(a.Namespace, a.Name) < index.Key(b.Namespace, b.Name)
}

// reconcileReady sums the other conditions up.
func (r *Reconciler) reconcileReady(_ context.Context, host *fleetv1.Host) error {
	if why, notReady := conditions.NotTrue(host.Status.Conditions, fleetv1.HostSiteBoundCondition, fleetv1.HostBootMACUniqueCondition, fleetv1.HostBMCCredentialsCondition); notReady {
		setCondition(host, fleetv1.HostReadyCondition, metav1.ConditionFalse, fleetv1.ReasonHostNotReady, why)
		return nil
	}
	setCondition(host, fleetv1.HostReadyCondition, metav1.ConditionTrue, fleetv1.ReasonHostReady,
		fmt.Sprintf("bound to Site %q with boot MAC %s", host.Spec.SiteRef.Name, index.NormalizeMAC(host.Spec.BootMACAddress)))
	return nil
}

// patchStatus writes the status if it changed and emits an event for every condition change.
func (r *Reconciler) patchStatus(ctx context.Context, before, host *fleetv1.Host, clean bool) error {
	if clean {
		host.Status.ObservedGeneration = host.Generation
	}
	conditions.RecordChanges(r.Recorder, host, before.Status.Conditions, host.Status.Conditions,
		fleetv1.HostSiteBoundCondition, fleetv1.HostBootMACUniqueCondition, fleetv1.HostBMCCredentialsCondition, fleetv1.HostReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, host.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, host, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of host %s: %w", client.ObjectKeyFromObject(host), err)
	}
	return nil
}

func (r *Reconciler) hostsWithSameMAC(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, client.MatchingFields{index.HostBootMAC: index.NormalizeMAC(o.(*fleetv1.Host).Spec.BootMACAddress)})
}

func (r *Reconciler) hostsOfSite(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.HostSite: index.Key(o.GetNamespace(), o.GetName())})
}

// hostsOfSecret maps a Secret to the Hosts whose BMC credentials it holds.
func (r *Reconciler) hostsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.HostBMCSecret: index.Key(o.GetNamespace(), o.GetName())})
}

func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	hosts := &fleetv1.HostList{}
	if err := r.Client.List(ctx, hosts, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list hosts to re-check")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(hosts.Items))
	for i := range hosts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
	}
	return reqs
}

func setCondition(host *fleetv1.Host, t string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(&host.Status.Conditions, host.Generation, t, status, reason, message)
}
