package site

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// The push: the site's ApplicationCluster (named after the Site, in sitev1.InfoNamespace) and one
// BMC Secret per host (in sitev1.HostsNamespace), built from spec.cluster and the site's Hosts. Every object is read first
// and written only when it differs, so a steady site costs reads (one GET, one LIST) and no
// write per heartbeat. Between heartbeats a push trusts what it remembers having left on the
// site (secretRecord) and does not list the BMC Secrets again unless a host or its Secret
// changed: an operation's dispatch and polls cost one GET of the ApplicationCluster. Writes are
// plain create/update with the resourceVersion just read: the global controller owns the whole
// spec (and the Secrets' data), so a full update both corrects anything changed on the site by
// hand and never overwrites a version it did not compare with.

// reconcileClusterPush writes the site's ApplicationCluster and BMC Secrets when spec.cluster is
// set, and removes them when it was removed. It reads the ApplicationCluster back for
// reconcileClusterStatus.
func (r *Reconciler) reconcileClusterPush(ctx context.Context, s *scope) error {
	if s.site.Spec.Cluster == nil {
		return r.reconcileClusterRemoval(ctx, s)
	}
	if !s.siteAnswers() {
		s.setClusterNotChecked()
		return nil
	}
	siteClient, err := r.Sites.Client(s.key)
	if err != nil {
		return fmt.Errorf("push to site %s: %w", s.key, err)
	}
	p := &push{r: r, s: s, site: siteClient, name: s.site.Name}
	if err := p.run(ctx); err != nil {
		r.pushed.forget(s.key)
		s.pushFailed(err)
		return nil
	}
	if p.secrets != nil {
		r.pushed.set(s.key, recordOf(p.name, p.secrets, p.listedAt))
	}
	return nil
}

// push is one push of a site's cluster.
type push struct {
	r    *Reconciler
	s    *scope
	site client.Client
	// name of the ApplicationCluster, and the ClusterLabel of its Secrets.
	name string
	// existing is the ApplicationCluster on the site before this push (nil: none).
	existing *sitev1.ApplicationCluster
	// secrets are the BMC Secrets on the site, by host, once listed (nil: not listed in this
	// push); listedAt is when they were listed.
	secrets  map[string]*corev1.Secret
	listedAt time.Time
	// known is, while secrets is nil, what the last push left on the site: host → fingerprint
	// of the global Secret its copy is current for (see secretRecord).
	known map[string]string
}

func (p *push) run(ctx context.Context) error {
	var err error
	if p.existing, err = getCluster(ctx, p.site, p.name); err != nil {
		return err
	}
	if p.existing != nil && !managed(p.existing) {
		return fmt.Errorf("ApplicationCluster %s/%s exists on the site but was not created by the global controller (label %s=%s missing): delete it, or label it to hand it over",
			sitev1.InfoNamespace, p.name, sitev1.ManagedByLabel, sitev1.ManagedByGlobal)
	}
	p.s.clusterRead, p.s.cluster = true, p.existing
	what, reason, msg, err := p.content(ctx)
	if err != nil {
		return err
	}
	if reason != "" {
		if p.existing != nil {
			msg += fmt.Sprintf("; ApplicationCluster %s/%s is left as last pushed", sitev1.InfoNamespace, p.name)
		}
		setCondition(p.s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, reason, msg)
		return nil
	}
	if err := p.recall(ctx); err != nil {
		return err
	}

	hosts, leftOut, kept, err := p.hosts(ctx)
	if err != nil {
		return err
	}
	if !hasControlPlane(hosts) {
		msg := "no usable control-plane Host: an ApplicationCluster needs at least one"
		if p.existing != nil {
			msg += fmt.Sprintf("; ApplicationCluster %s/%s is left as last pushed", sitev1.InfoNamespace, p.name)
		}
		setCondition(p.s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonNoControlPlaneHost,
			withHostNotes(msg, leftOut, kept))
	} else {
		op := p.s.applying()
		carries := op != nil && (p.existing == nil || p.existing.Annotations[sitev1.OperationAnnotation] != op.ID)
		spec := desiredSpec(p.s.site.Spec.Cluster, what, hosts, operationGeneration(op, p.existing), p.existing)
		ac, err := p.writeCluster(ctx, spec, op)
		if err != nil {
			return err
		}
		p.s.cluster, p.s.carried = ac, carries
		msg := fmt.Sprintf("ApplicationCluster %s/%s holds %d host(s) and their BMC Secrets", sitev1.InfoNamespace, p.name, len(hosts))
		if len(leftOut) > 0 {
			setCondition(p.s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonHostsLeftOut, withHostNotes(msg, leftOut, kept))
		} else {
			setCondition(p.s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, withHostNotes(msg, nil, kept))
		}
	}
	return p.pruneSecrets(ctx, hosts)
}

// recall takes what the last push left on the site as the site's BMC Secrets while that can be
// trusted: recorded less than a heartbeat ago, by this client, and this reconcile is not the
// heartbeat (which checks the site). Otherwise it lists them.
func (p *push) recall(ctx context.Context) error {
	rec, ok := p.r.pushed.get(p.s.key)
	if ok && !p.s.rebuilt && !p.s.heartbeat && p.s.now.Sub(rec.listedAt) < p.r.HeartbeatInterval {
		p.known, p.listedAt = rec.hosts, rec.listedAt
		return nil
	}
	return p.list(ctx)
}

// list lists the cluster's BMC Secrets on the site, once per push.
func (p *push) list(ctx context.Context) error {
	if p.secrets != nil {
		return nil
	}
	secrets, err := listBMCSecrets(ctx, p.site, p.name)
	if err != nil {
		return err
	}
	p.secrets, p.known, p.listedAt = secrets, nil, p.s.now
	return nil
}

// content is what the cluster runs: spec.cluster's release, or its own version and image. When
// there is nothing to push yet, reason and msg say why.
func (p *push) content(ctx context.Context) (what content, reason, msg string, err error) {
	c := p.s.site.Spec.Cluster
	if c.Release == "" {
		if what, ok := inlineContent(c); ok {
			return what, "", "", nil
		}
		return content{}, fleetv1.ReasonReleaseNotSet,
			"spec.cluster names no release (and no kubernetesVersion and osImage): nothing to install until a campaign or spec.cluster.release sets one", nil
	}
	release := &fleetv1.Release{}
	if err := p.r.Client.Get(ctx, client.ObjectKey{Namespace: p.s.site.Namespace, Name: c.Release}, release); err != nil {
		if apierrors.IsNotFound(err) {
			return content{}, fleetv1.ReasonReleaseNotFound, fmt.Sprintf("Release %q (spec.cluster.release) does not exist", c.Release), nil
		}
		return content{}, "", "", fmt.Errorf("get release %s of site %s: %w", c.Release, p.s.key, err)
	}
	return releaseContent(release), "", "", nil
}

// hosts builds the cluster's hosts from the site's Hosts and pushes their BMC Secrets. A Host that
// cannot be pushed is left out (leftOut says why) unless it was pushed before: then it keeps its
// last pushed entry (kept says why), so a Secret being rotated or a Host briefly not Ready never
// takes a machine out of the cluster. Only deleting the Host does.
func (p *push) hosts(ctx context.Context) (hosts []sitev1.ClusterHost, leftOut, kept []string, err error) {
	var pushed []sitev1.ClusterHost
	if p.existing != nil {
		pushed = p.existing.Spec.Hosts
	}
	for i := range p.s.hosts {
		h := &p.s.hosts[i]
		if !h.DeletionTimestamp.IsZero() {
			continue
		}
		why := unusable(h)
		if why == "" {
			if why, err = p.pushBMCSecret(ctx, h); err != nil {
				return nil, nil, nil, err
			}
		}
		if why == "" {
			hosts = append(hosts, clusterHost(h))
			continue
		}
		if j := slices.IndexFunc(pushed, func(c sitev1.ClusterHost) bool { return c.Name == h.Name }); j >= 0 {
			hosts = append(hosts, pushed[j])
			kept = append(kept, fmt.Sprintf("%s (%s)", h.Name, why))
			continue
		}
		leftOut = append(leftOut, fmt.Sprintf("%s (%s)", h.Name, why))
	}
	sortHosts(hosts)
	return hosts, leftOut, kept, nil
}

// pushBMCSecret copies a host's BMC credentials to the site, when the copy there is not of the
// current version of their source (a global Secret or a Vault entry). It returns why the host
// cannot be pushed, if it cannot.
func (p *push) pushBMCSecret(ctx context.Context, h *fleetv1.Host) (string, error) {
	src, why, err := p.r.bmcSource(ctx, h)
	if why != "" || err != nil {
		return why, err
	}
	if p.secrets == nil {
		if p.known[h.Name] == src.fingerprint {
			return "", nil
		}
		// The host or its credentials changed since the last push: look at the site's copy.
		if err := p.list(ctx); err != nil {
			return "", err
		}
	}
	current := p.secrets[h.Name]
	if bmcSecretCurrent(current, p.name, h.Name, src.fingerprint) {
		return "", nil
	}
	username, password, why, err := src.read(ctx)
	if why != "" || err != nil {
		return why, err
	}
	key := client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: bmcSecretName(h.Name)}
	if current == nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		applyBMCSecret(s, src.name, src.fingerprint, p.name, h.Name, username, password)
		err := p.site.Create(ctx, s)
		switch {
		case apierrors.IsAlreadyExists(err):
			return fmt.Sprintf("Secret %s exists on the site but was not created by the global controller", key), nil
		case err != nil:
			return "", fmt.Errorf("create Secret %s on the site: %w", key, err)
		}
		p.secrets[h.Name] = s
		return "", nil
	}
	if applyBMCSecret(current, src.name, src.fingerprint, p.name, h.Name, username, password) {
		if err := p.site.Update(ctx, current); err != nil {
			return "", fmt.Errorf("update Secret %s on the site: %w", key, err)
		}
	}
	return "", nil
}

// bmcSource is one version of a host's BMC credentials on the global side.
type bmcSource struct {
	// name is the source for people and for the site copy's SourceAnnotation.
	name string
	// fingerprint identifies this version (SourceVersionAnnotation).
	fingerprint string
	// read returns the username and password, or why they are unusable.
	read func(context.Context) (username, password, why string, err error)
}

// bmcSource finds where a host's BMC credentials are, and their version, or why the host cannot
// be pushed. A Secret's data is read only when its copy on the site is not current; a Vault
// entry is read whole, at every push, since Vault has no cheaper way to learn its version.
func (r *Reconciler) bmcSource(ctx context.Context, h *fleetv1.Host) (bmcSource, string, error) {
	if ref := h.Spec.BMC.CredentialsVaultRef; ref != nil {
		return r.vaultBMCSource(ctx, h, ref)
	}
	if h.Spec.BMC.CredentialsSecretRef == nil {
		return bmcSource{}, "it names no BMC credentials: set spec.bmc.credentialsSecretRef or spec.bmc.credentialsVaultRef", nil
	}
	ref := client.ObjectKey{Namespace: h.Namespace, Name: h.Spec.BMC.CredentialsSecretRef.Name}
	missing := fmt.Sprintf("BMC Secret %q (spec.bmc.credentialsSecretRef.name) does not exist", ref.Name)
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, ref, secretMeta); err != nil {
		if apierrors.IsNotFound(err) {
			return bmcSource{}, missing, nil
		}
		return bmcSource{}, "", fmt.Errorf("get BMC secret %s of host %s: %w", ref, h.Name, err)
	}
	return bmcSource{
		name:        "Secret " + index.Key(ref.Namespace, ref.Name),
		fingerprint: fingerprint(string(secretMeta.UID), secretMeta.ResourceVersion),
		read: func(ctx context.Context) (string, string, string, error) {
			source := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, ref, source); err != nil {
				if apierrors.IsNotFound(err) {
					return "", "", missing, nil
				}
				return "", "", "", fmt.Errorf("read BMC secret %s of host %s: %w", ref, h.Name, err)
			}
			username, password, why := credentials(fmt.Sprintf("BMC Secret %q (spec.bmc.credentialsSecretRef.name)", ref.Name),
				func(k string) string { return string(source.Data[k]) })
			return username, password, why, nil
		},
	}, "", nil
}

// vaultBMCSource reads a host's BMC credentials from Vault. What keeps them from the site — no
// Vault configured, no entry, Vault refusing or not answering — is why the host is not pushed
// (a host pushed before keeps its copy on the site, see pushedHosts).
func (r *Reconciler) vaultBMCSource(ctx context.Context, h *fleetv1.Host, ref *fleetv1.VaultReference) (bmcSource, string, error) {
	if r.Vault == nil {
		return bmcSource{}, "spec.bmc.credentialsVaultRef is set but the global controller runs without Vault: start it with --vault-addr (docs/security.md), or use spec.bmc.credentialsSecretRef", nil
	}
	where := r.Vault.Where(h.Namespace, ref.Path)
	entry, err := r.Vault.Read(ctx, h.Namespace, ref.Path)
	switch {
	case errors.Is(err, vaultref.ErrNotFound):
		return bmcSource{}, fmt.Sprintf("Vault entry %s (spec.bmc.credentialsVaultRef.path) does not exist; write the BMC's username and password there", where), nil
	case err != nil:
		return bmcSource{}, fmt.Sprintf("its BMC credentials cannot be read from Vault: %v", err), nil
	}
	username, password, why := credentials(fmt.Sprintf("Vault entry %s (spec.bmc.credentialsVaultRef.path)", where),
		func(k string) string { return entry.Data[k] })
	return bmcSource{
		name:        "Vault " + where,
		fingerprint: vaultFingerprint(where, entry.Version),
		read: func(context.Context) (string, string, string, error) {
			return username, password, why, nil
		},
	}, "", nil
}

// writeCluster creates or updates the ApplicationCluster when it differs from spec, and returns
// it as it is on the site. A conflict (the local controller wrote it since it was read) is
// retried on a fresh copy.
func (p *push) writeCluster(ctx context.Context, spec sitev1.ApplicationClusterSpec, op *fleetv1.SiteOperation) (*sitev1.ApplicationCluster, error) {
	key := client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: p.name}
	opID := ""
	if op != nil {
		opID = op.ID
	}
	ac := p.existing
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := getCluster(ctx, p.site, p.name)
			if err != nil {
				return err
			}
			ac = fresh
		}
		first = false
		if ac == nil {
			ac = &sitev1.ApplicationCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			applyClusterSpec(ac, p.s.site, spec, opID)
			if err := p.site.Create(ctx, ac); err != nil {
				return fmt.Errorf("create ApplicationCluster %s on the site: %w", key, err)
			}
			return nil
		}
		if !applyClusterSpec(ac, p.s.site, spec, opID) {
			return nil
		}
		if err := p.site.Update(ctx, ac); err != nil {
			return fmt.Errorf("update ApplicationCluster %s on the site: %w", key, err)
		}
		return nil
	})
	return ac, err
}

// pruneSecrets deletes the BMC Secrets of hosts that are neither wanted, nor in the
// ApplicationCluster's spec, nor still reported in its status: the local controller needs a
// removed host's credentials until it has deprovisioned or released it.
func (p *push) pruneSecrets(ctx context.Context, wanted []sitev1.ClusterHost) error {
	inUse := map[string]bool{}
	for _, h := range wanted {
		inUse[h.Name] = true
	}
	if ac := p.s.cluster; ac != nil {
		for _, h := range ac.Spec.Hosts {
			inUse[h.Name] = true
		}
		for _, h := range ac.Status.Hosts {
			inUse[h.Name] = true
		}
	}
	if p.secrets == nil {
		stale := false
		for host := range p.known {
			stale = stale || !inUse[host]
		}
		if !stale {
			return nil
		}
		if err := p.list(ctx); err != nil {
			return err
		}
	}
	for host, secret := range p.secrets {
		if inUse[host] {
			continue
		}
		if err := deleteSecret(ctx, p.site, secret); err != nil {
			return err
		}
		delete(p.secrets, host)
	}
	return nil
}

// reconcileClusterRemoval removes what was pushed once spec.cluster is gone: the
// ApplicationCluster first, and the BMC Secrets only when it is gone, because the local
// controller needs them to take the hosts down. Sites that never had a cluster cost nothing.
func (r *Reconciler) reconcileClusterRemoval(ctx context.Context, s *scope) error {
	if meta.FindStatusCondition(s.site.Status.Conditions, fleetv1.SiteClusterSyncedCondition) == nil && s.site.Status.Cluster == nil {
		meta.RemoveStatusCondition(&s.site.Status.Conditions, fleetv1.SiteClusterReadyCondition)
		return nil
	}
	r.pushed.forget(s.key)
	if !s.siteAnswers() {
		s.setClusterNotChecked()
		return nil
	}
	siteClient, err := r.Sites.Client(s.key)
	if err != nil {
		return fmt.Errorf("remove cluster from site %s: %w", s.key, err)
	}
	if err := removeCluster(ctx, s, siteClient); err != nil {
		s.pushFailed(err)
	}
	return nil
}

func removeCluster(ctx context.Context, s *scope, siteClient client.Client) error {
	name := s.site.Name
	ac, err := getCluster(ctx, siteClient, name)
	if err != nil {
		return err
	}
	s.clusterRead, s.cluster = true, ac
	if ac != nil && managed(ac) {
		if ac.DeletionTimestamp.IsZero() {
			uid := ac.UID
			if err := siteClient.Delete(ctx, ac, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete ApplicationCluster %s/%s on the site: %w", sitev1.InfoNamespace, name, err)
			}
		}
		setCondition(s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonClusterDeleting,
			fmt.Sprintf("spec.cluster was removed: ApplicationCluster %s/%s is being deleted on the site; its BMC Secrets go when it is gone", sitev1.InfoNamespace, name))
		return nil
	}
	secrets, err := listBMCSecrets(ctx, siteClient, name)
	if err != nil {
		return err
	}
	for _, secret := range secrets {
		if err := deleteSecret(ctx, siteClient, secret); err != nil {
			return err
		}
	}
	s.clusterRead, s.clusterRemoved, s.cluster, s.site.Status.Cluster = true, true, nil, nil
	meta.RemoveStatusCondition(&s.site.Status.Conditions, fleetv1.SiteClusterSyncedCondition)
	meta.RemoveStatusCondition(&s.site.Status.Conditions, fleetv1.SiteClusterReadyCondition)
	return nil
}

// reconcileClusterStatus mirrors the status of the ApplicationCluster read this reconcile into
// status.cluster and ClusterReady, and each host's entry into its Host's status.cluster. When it
// could not be read, all keep what they were (the condition says it is not current).
func (r *Reconciler) reconcileClusterStatus(ctx context.Context, s *scope) error {
	if !s.clusterRead {
		return nil
	}
	if err := r.mirrorHosts(ctx, s); err != nil {
		return err
	}
	if s.clusterRemoved {
		return nil
	}
	s.site.Status.Cluster = nil
	if s.cluster != nil {
		s.site.Status.Cluster = summary(s.cluster)
	}
	status, reason, msg := clusterReady(s.cluster)
	setCondition(s.site, fleetv1.SiteClusterReadyCondition, status, reason, msg)
	return nil
}

// mirrorHosts copies what the site reports of each host into the Host's status.cluster, with a
// merge patch of that field alone (the host reconciler owns the rest of the status), and only for
// the hosts whose report changed.
func (r *Reconciler) mirrorHosts(ctx context.Context, s *scope) error {
	for i := range s.hosts {
		h := &s.hosts[i]
		want := hostReport(s.cluster, h.Name)
		if apiequality.Semantic.DeepEqual(h.Status.Cluster, want) {
			continue
		}
		before := h.DeepCopy()
		h.Status.Cluster = want
		if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("patch status.cluster of host %s: %w", client.ObjectKeyFromObject(h), err)
		}
	}
	return nil
}

// siteAnswers reports whether the site has a client and answered its last probe.
func (s *scope) siteAnswers() bool {
	return s.connected && meta.IsStatusConditionTrue(s.site.Status.Conditions, fleetv1.SiteReachableCondition)
}

func (s *scope) setClusterNotChecked() {
	const msg = "not checked: the site is not reachable (see Reachable); status.cluster is the last summary it reported"
	setCondition(s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked, msg)
	setCondition(s.site, fleetv1.SiteClusterReadyCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked, msg)
}

// pushFailed reports a failed push; it is retried on the next heartbeat (or event), and the
// reconcile does not count as clean.
func (s *scope) pushFailed(err error) {
	s.dirty = true
	setCondition(s.site, fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonPushFailed, err.Error())
}

func withHostNotes(msg string, leftOut, kept []string) string {
	if len(leftOut) > 0 {
		msg += "; left out: " + strings.Join(leftOut, ", ")
	}
	if len(kept) > 0 {
		msg += "; kept as last pushed: " + strings.Join(kept, ", ")
	}
	return msg
}

// getCluster reads the site's ApplicationCluster; nil when there is none.
func getCluster(ctx context.Context, c client.Client, name string) (*sitev1.ApplicationCluster, error) {
	ac := &sitev1.ApplicationCluster{}
	err := c.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: name}, ac)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read ApplicationCluster %s/%s on the site: %w", sitev1.InfoNamespace, name, err)
	}
	return ac, nil
}

// listBMCSecrets returns the BMC Secrets pushed for the cluster, by host.
func listBMCSecrets(ctx context.Context, c client.Client, cluster string) (map[string]*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(sitev1.HostsNamespace),
		client.MatchingLabels{sitev1.ManagedByLabel: sitev1.ManagedByGlobal, sitev1.ClusterLabel: cluster}); err != nil {
		return nil, fmt.Errorf("list BMC Secrets of ApplicationCluster %s/%s in %s on the site: %w", sitev1.InfoNamespace, cluster, sitev1.HostsNamespace, err)
	}
	secrets := make(map[string]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		if host := s.Labels[sitev1.HostLabel]; host != "" && s.Name == bmcSecretName(host) {
			secrets[host] = s
		}
	}
	return secrets, nil
}

func deleteSecret(ctx context.Context, c client.Client, s *corev1.Secret) error {
	uid := s.UID
	if err := c.Delete(ctx, s, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Secret %s on the site: %w", index.Key(s.Namespace, s.Name), err)
	}
	return nil
}
