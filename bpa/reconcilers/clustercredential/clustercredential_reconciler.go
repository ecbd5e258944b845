package clustercredential

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// Leftover is how long an answered request may stay before the BPA deletes it: the global
// controller deletes each once it read the answer, unless it stopped in between.
const Leftover = 10 * time.Minute

// Reconciler answers ClusterCredentialRequests.
type Reconciler struct {
	// Client reads requests and ApplicationClusters and writes requests' status.
	Client client.Client
	// Secrets holds the clusters' PKI and admin kubeconfigs.
	Secrets secrets.Store
	// Recorder records every certificate issued, on the ApplicationCluster.
	Recorder events.EventRecorder
	// Clock tells the time certificates are valid from.
	Clock clock.PassiveClock
	// MaxTTL is the longest a certificate may live from now; a request asking for more gets
	// that much.
	MaxTTL time.Duration
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=clustercredentialrequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=clustercredentialrequests/status,verbs=get;update;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil || r.Secrets == nil || r.Recorder == nil || r.Clock == nil {
		return errors.New("bpa-clustercredential: Client, Secrets, Recorder and Clock are required")
	}
	if r.MaxTTL <= 0 {
		return errors.New("bpa-clustercredential: MaxTTL must be positive")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("bpa-clustercredential").
		For(&sitev1.ClusterCredentialRequest{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile answers a request once; an answered one is deleted when left over.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ccr := &sitev1.ClusterCredentialRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, ccr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ccr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if ccr.Answered() {
		if left := ccr.CreationTimestamp.Add(Leftover).Sub(r.Clock.Now()); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		if err := r.Client.Delete(ctx, ccr); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete left-over ClusterCredentialRequest %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}
	before := ccr.DeepCopy()
	st, ac, err := r.answer(ctx, ccr)
	if err != nil {
		return ctrl.Result{}, err
	}
	ccr.Status = st
	if err := r.Client.Status().Patch(ctx, ccr, client.MergeFrom(before)); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // the global controller gave up waiting and deleted it
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("answer ClusterCredentialRequest %s: %w", req.NamespacedName, err)
	}
	if ac != nil {
		r.Recorder.Eventf(ac, ccr, corev1.EventTypeNormal, "ClusterCredentialIssued", "IssueClusterCredential",
			"client certificate for user %q (groups %q) valid until %s", ccr.Spec.User, ccr.Spec.Groups, ccr.Spec.ExpirationTime.UTC().Format(time.RFC3339))
	}
	return ctrl.Result{RequeueAfter: Leftover}, nil
}

// answer is the status a request gets: a certificate (and the cluster it was issued for), or
// a refusal. Errors are the ones worth retrying (the secret store or the API server did not
// answer).
func (r *Reconciler) answer(ctx context.Context, ccr *sitev1.ClusterCredentialRequest) (sitev1.ClusterCredentialRequestStatus, *sitev1.ApplicationCluster, error) {
	refuse := func(reason string, format string, args ...any) (sitev1.ClusterCredentialRequestStatus, *sitev1.ApplicationCluster, error) {
		return sitev1.ClusterCredentialRequestStatus{Reason: reason, Message: fmt.Sprintf(format, args...)}, nil, nil
	}
	spec := ccr.Spec
	id := clustercred.Identity{User: spec.User, Groups: spec.Groups}
	if err := id.Check(); err != nil {
		return refuse(sitev1.CredentialReasonInvalidRequest, "spec: %v", err)
	}
	pub, err := clustercred.PublicKey([]byte(spec.CSR), id)
	if err != nil {
		return refuse(sitev1.CredentialReasonInvalidRequest, "spec.%v", err)
	}
	now := r.Clock.Now()
	notAfter, err := expiry(spec.ExpirationTime.Time, now, r.MaxTTL)
	if err != nil {
		return refuse(sitev1.CredentialReasonInvalidRequest, "spec.expirationTime: %v", err)
	}
	ac := &sitev1.ApplicationCluster{}
	key := client.ObjectKey{Namespace: ccr.Namespace, Name: spec.Cluster}
	if err := r.Client.Get(ctx, key, ac); apierrors.IsNotFound(err) {
		return refuse(sitev1.CredentialReasonClusterNotInstalled, "there is no ApplicationCluster %s on this site", key)
	} else if err != nil {
		return sitev1.ClusterCredentialRequestStatus{}, nil, fmt.Errorf("ApplicationCluster %s: %w", key, err)
	}
	admin, err := r.Secrets.Get(ctx, cluster.AdminKubeconfigSecret(spec.Cluster))
	if errors.Is(err, secrets.ErrNotFound) {
		return refuse(sitev1.CredentialReasonClusterNotInstalled, "cluster %s is not installed yet (the BPA has no admin kubeconfig of it)", spec.Cluster)
	} else if err != nil {
		return sitev1.ClusterCredentialRequestStatus{}, nil, fmt.Errorf("admin kubeconfig of cluster %s: %w", spec.Cluster, err)
	}
	server, err := serverOf(admin["value"])
	if err != nil {
		return refuse(sitev1.CredentialReasonSigningFailed, "admin kubeconfig of cluster %s: %v", spec.Cluster, err)
	}
	cert, ca, err := pki.SignClient(ctx, r.Secrets, cluster.PKISecret(spec.Cluster), pki.ClientRequest{
		PublicKey: pub, User: id.User, Groups: id.Groups, NotAfter: notAfter, Now: now,
	})
	switch {
	case errors.Is(err, pki.ErrNoPKI):
		return refuse(sitev1.CredentialReasonClusterNotInstalled, "cluster %s is not installed yet: %v", spec.Cluster, err)
	case err != nil:
		return refuse(sitev1.CredentialReasonSigningFailed, "%v", err)
	}
	return sitev1.ClusterCredentialRequestStatus{Certificate: string(cert), CertificateAuthority: string(ca), Server: server}, ac, nil
}

// expiry is the NotAfter of a certificate asked to expire at want: want, never more than max
// from now. A want not after now is an error.
func expiry(want, now time.Time, max time.Duration) (time.Time, error) {
	if !want.After(now) {
		return time.Time{}, fmt.Errorf("%s is not after now (%s)", want.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if limit := now.Add(max); want.After(limit) {
		return limit, nil
	}
	return want, nil
}

// serverOf returns the API server URL of a kubeconfig's current context.
func serverOf(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", fmt.Errorf("no current context %q", cfg.CurrentContext)
	}
	c, ok := cfg.Clusters[ctx.Cluster]
	if !ok || c.Server == "" {
		return "", fmt.Errorf("context %q names no cluster with a server", cfg.CurrentContext)
	}
	return c.Server, nil
}
