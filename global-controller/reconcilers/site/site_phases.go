package site

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/conditions"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// errKeyMissing is returned by the kubeconfig reader when the Secret lacks the referenced key.
var errKeyMissing = errors.New("secret key missing")

// reconcileKubeconfig finds the site's kubeconfig, in a Secret or in Vault, and makes sure the
// site has a client built from its current content.
func (r *Reconciler) reconcileKubeconfig(ctx context.Context, s *scope) error {
	var src kubeconfigSource
	var err error
	switch spec := s.site.Spec; {
	case spec.KubeconfigVaultRef != nil:
		// Vault sends no event: whatever comes of this reading, the entry is read again within a
		// heartbeat.
		s.requeueBy(r.HeartbeatInterval)
		src, err = r.vaultKubeconfig(ctx, s, spec.KubeconfigVaultRef)
	case spec.KubeconfigSecretRef != nil:
		src, err = r.secretKubeconfig(ctx, s, spec.KubeconfigSecretRef)
	default:
		r.Sites.Forget(s.key)
		s.setKubeconfigInvalid(fleetv1.ReasonSecretNotFound, "the Site names no kubeconfig: set spec.kubeconfigSecretRef or spec.kubeconfigVaultRef")
		return nil
	}
	if err != nil || src.name == "" {
		return err
	}
	if src.keep != "" {
		s.connected = true
		setCondition(s.site, fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid,
			fmt.Sprintf("kubeconfig from %s key %q loaded before; %s", src.name, src.key, src.keep))
		return nil
	}
	rebuilt, err := r.Sites.Connect(ctx, s.key, src.fingerprint, src.read)
	switch {
	case errors.Is(err, errKeyMissing):
		s.setKubeconfigInvalid(src.keyMissingReason, fmt.Sprintf("%s has no key %q (%s.key)", src.name, src.key, src.field))
		return nil
	case errors.Is(err, siteclient.ErrUnsafe):
		s.setKubeconfigInvalid(fleetv1.ReasonKubeconfigUnsafe, fmt.Sprintf("%s key %q was refused: %v", src.name, src.key, err))
		return nil
	case errors.Is(err, siteclient.ErrInvalid):
		s.setKubeconfigInvalid(fleetv1.ReasonKubeconfigInvalid, fmt.Sprintf("%s key %q: %v", src.name, src.key, err))
		return nil
	case err != nil:
		return fmt.Errorf("connect to site %s: %w", s.key, err)
	}
	s.connected, s.rebuilt = true, rebuilt
	setCondition(s.site, fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid,
		fmt.Sprintf("kubeconfig from %s key %q loaded", src.name, src.key))
	return nil
}

// kubeconfigSource is one version of a site's kubeconfig; a zero name means there is none to
// use (the Site's KubeconfigValid condition then says why).
type kubeconfigSource struct {
	// name ("Secret \"x\"", "Vault entry secret/...") and field ("spec.kubeconfigSecretRef")
	// say where it is; key is the key there; keyMissingReason is the reason when it is absent.
	name, field, key, keyMissingReason string
	// fingerprint identifies this version: the site's client is rebuilt when it changes.
	fingerprint string
	// read returns the kubeconfig, or errKeyMissing.
	read func(context.Context) ([]byte, error)
	// keep, when set, says why the site's current client is kept without reading the source:
	// the kubeconfig in use may be older than the source's current version.
	keep string
}

// secretKubeconfig finds the kubeconfig Secret. Its data is read only when its resourceVersion
// changed.
func (r *Reconciler) secretKubeconfig(ctx context.Context, s *scope, ref *fleetv1.SecretKeyReference) (kubeconfigSource, error) {
	secretKey := client.ObjectKey{Namespace: s.site.Namespace, Name: ref.Name}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, secretKey, secretMeta); err != nil {
		if !apierrors.IsNotFound(err) {
			return kubeconfigSource{}, fmt.Errorf("get kubeconfig secret %s of site %s: %w", secretKey, s.key, err)
		}
		r.Sites.Forget(s.key)
		s.setKubeconfigInvalid(fleetv1.ReasonSecretNotFound, fmt.Sprintf("Secret %q (spec.kubeconfigSecretRef.name) does not exist in namespace %q; create it with the site's kubeconfig under key %q", ref.Name, s.site.Namespace, secretKeyOf(ref)))
		return kubeconfigSource{}, nil
	}
	return kubeconfigSource{
		name: fmt.Sprintf("Secret %q", ref.Name), field: "spec.kubeconfigSecretRef", key: secretKeyOf(ref),
		keyMissingReason: fleetv1.ReasonSecretKeyMissing,
		fingerprint:      fingerprint(string(secretMeta.UID), secretMeta.ResourceVersion),
		read: func(ctx context.Context) ([]byte, error) {
			secret := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, secretKey, secret); err != nil {
				return nil, fmt.Errorf("read kubeconfig secret %s: %w", secretKey, err)
			}
			data, ok := secret.Data[secretKeyOf(ref)]
			if !ok {
				return nil, errKeyMissing
			}
			return data, nil
		},
	}, nil
}

// vaultKubeconfig reads the kubeconfig's Vault entry, whole, at every reconcile: Vault has no
// watch. When Vault refuses or does not answer, a site connected before keeps the client built
// from the kubeconfig read then, and KubeconfigValid says so; a site not connected yet is not
// usable until Vault answers.
func (r *Reconciler) vaultKubeconfig(ctx context.Context, s *scope, ref *fleetv1.VaultKeyReference) (kubeconfigSource, error) {
	key := cmp.Or(ref.Key, "kubeconfig")
	if r.Vault == nil {
		r.Sites.Forget(s.key)
		s.setKubeconfigInvalid(fleetv1.ReasonVaultUnavailable, "spec.kubeconfigVaultRef is set but the global controller runs without Vault: start it with --vault-addr (docs/security.md), or put the kubeconfig in a Secret (spec.kubeconfigSecretRef)")
		return kubeconfigSource{}, nil
	}
	where := r.Vault.Where(s.site.Namespace, ref.Path)
	src := kubeconfigSource{name: "Vault entry " + where, field: "spec.kubeconfigVaultRef", key: key, keyMissingReason: fleetv1.ReasonVaultEntryNotFound}
	entry, err := r.Vault.Read(ctx, s.site.Namespace, ref.Path)
	switch {
	case errors.Is(err, vaultref.ErrNotFound):
		r.Sites.Forget(s.key)
		s.setKubeconfigInvalid(fleetv1.ReasonVaultEntryNotFound, fmt.Sprintf("Vault entry %s (spec.kubeconfigVaultRef.path) does not exist; write the site's kubeconfig there under key %q, or enroll the site", where, key))
		return kubeconfigSource{}, nil
	case err != nil:
		if _, noClient := r.Sites.Client(s.key); noClient == nil {
			src.keep = fmt.Sprintf("Vault cannot be read now, so a newer version there is not seen: %v", err)
			return src, nil
		}
		s.setKubeconfigInvalid(fleetv1.ReasonVaultUnavailable, fmt.Sprintf("the kubeconfig cannot be read from Vault entry %s (spec.kubeconfigVaultRef.path): %v", where, err))
		return kubeconfigSource{}, nil
	}
	src.fingerprint = vaultFingerprint(where, entry.Version)
	src.read = func(context.Context) ([]byte, error) {
		data, ok := entry.Data[key]
		if !ok {
			return nil, errKeyMissing
		}
		return []byte(data), nil
	}
	return src, nil
}

func (s *scope) setKubeconfigInvalid(reason, message string) {
	setCondition(s.site, fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, reason, message)
	setCondition(s.site, fleetv1.SiteReachableCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked,
		"not checked: the site's kubeconfig is not usable (see KubeconfigValid)")
}

// reconcileReachability probes the site when a probe is due: on a new client, after
// HeartbeatInterval while reachable, with a doubling delay while unreachable, and after a push
// failed. A spec change (a dispatch) is no reason to probe: the push that carries it finds out
// whether the site answers. The probe times are remembered here; the Site gets them when its
// status is written anyway, or every StatusReportInterval (holdProbeTimes).
func (r *Reconciler) reconcileReachability(ctx context.Context, s *scope) error {
	if !s.connected {
		return nil
	}
	reachable := meta.FindStatusCondition(s.site.Status.Conditions, fleetv1.SiteReachableCondition)
	interval := r.HeartbeatInterval
	if reachable == nil || reachable.Status != metav1.ConditionTrue {
		interval = r.retryInterval(reachable, s.now)
	}
	last, _ := r.probes.get(s.key)
	if last.checked.IsZero() && s.site.Status.LastCheckTime != nil {
		last.checked = s.site.Status.LastCheckTime.Time
	}
	synced := meta.FindStatusCondition(s.site.Status.Conditions, fleetv1.SiteClusterSyncedCondition)
	due := s.rebuilt || reachable == nil || reachable.Reason == fleetv1.ReasonNotChecked || last.checked.IsZero() ||
		(synced != nil && synced.Reason == fleetv1.ReasonPushFailed)
	wait := time.Duration(0)
	if !last.checked.IsZero() {
		wait = last.checked.Add(interval).Sub(s.now)
	}
	if !due && wait > 0 {
		s.requeueAfter = wait
		return nil
	}
	s.heartbeat = wait <= 0

	start := r.Clock.Now()
	probe, err := r.Sites.Probe(ctx, s.key)
	r.Metrics.observeProbe(s.key, s.now, r.Clock.Since(start), err == nil)
	last.checked = s.now
	if err == nil {
		last.answered = s.now
	}
	r.probes.set(s.key, last)
	checked := metav1.NewTime(last.checked)
	s.site.Status.LastCheckTime = &checked
	if !last.answered.IsZero() {
		answered := metav1.NewTime(last.answered)
		s.site.Status.LastHeartbeatTime = &answered
	}
	if err != nil {
		setCondition(s.site, fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable,
			fmt.Sprintf("the site's API server did not answer: %v", err))
		s.requeueAfter = r.retryInterval(meta.FindStatusCondition(s.site.Status.Conditions, fleetv1.SiteReachableCondition), s.now)
		return nil
	}
	s.site.Status.KubernetesVersion = probe.KubernetesVersion
	s.site.Status.LocalControllerVersion = probe.LocalControllerVersion
	setCondition(s.site, fleetv1.SiteReachableCondition, metav1.ConditionTrue, fleetv1.ReasonAPIServerReachable,
		fmt.Sprintf("the site's API server answered, Kubernetes %s", probe.KubernetesVersion))
	s.requeueAfter = r.HeartbeatInterval
	return nil
}

// retryInterval is the delay before re-probing a site that is not reachable: as long as it has
// been unreachable, so the delay doubles, between MinRetryInterval and HeartbeatInterval.
func (r *Reconciler) retryInterval(reachable *metav1.Condition, now time.Time) time.Duration {
	d := r.MinRetryInterval
	if reachable != nil && reachable.Status == metav1.ConditionFalse {
		d = max(d, now.Sub(reachable.LastTransitionTime.Time))
	}
	return min(d, r.HeartbeatInterval)
}

// reconcileHosts lists the site's hosts and counts them by role.
func (r *Reconciler) reconcileHosts(ctx context.Context, s *scope) error {
	hosts := &fleetv1.HostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(s.site.Namespace),
		client.MatchingFields{index.HostSite: index.Key(s.site.Namespace, s.site.Name)}); err != nil {
		return fmt.Errorf("list hosts of site %s: %w", s.key, err)
	}
	s.hosts = hosts.Items
	counts := fleetv1.HostCounts{}
	for _, h := range hosts.Items {
		counts.Total++
		switch h.Spec.Role {
		case fleetv1.RoleControlPlane:
			counts.ControlPlane++
		case fleetv1.RoleWorker:
			counts.Worker++
		}
	}
	s.site.Status.Hosts = counts
	return nil
}

// reconcileReady sums KubeconfigValid and Reachable up. The cluster conditions stay out of it:
// a site is usable (e.g. to install a cluster) whatever its cluster's state.
func (r *Reconciler) reconcileReady(_ context.Context, s *scope) error {
	if why, notReady := conditions.NotTrue(s.site.Status.Conditions, fleetv1.SiteKubeconfigValidCondition, fleetv1.SiteReachableCondition); notReady {
		setCondition(s.site, fleetv1.SiteReadyCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotReady, why)
		return nil
	}
	msg := fmt.Sprintf("site reachable, Kubernetes %s", s.site.Status.KubernetesVersion)
	if v := s.site.Status.LocalControllerVersion; v != "" {
		msg += ", local controller " + v
	} else {
		msg += ", no local controller installed yet"
	}
	setCondition(s.site, fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady, msg)
	return nil
}

func setCondition(site *fleetv1.Site, t string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(&site.Status.Conditions, site.Generation, t, status, reason, message)
}

func secretKeyOf(ref *fleetv1.SecretKeyReference) string {
	if ref.Key == "" {
		return "kubeconfig"
	}
	return ref.Key
}
