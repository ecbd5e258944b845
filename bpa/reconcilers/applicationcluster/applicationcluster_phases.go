package applicationcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// work is one reconcile of one cluster.
type work struct {
	r  *Reconciler
	ac *sitev1.ApplicationCluster
	st *sitev1.BootstrapStatus
	// set is the cluster's ArtifactSet, read at the start of the reconcile.
	set *sitev1.ArtifactSet
	// before is the object as last written: the reconcile's final patch is the difference.
	before *sitev1.ApplicationCluster
	// recheck is a pass over a cluster installed at this generation: it reports no progress
	// (nothing is expected to change) unless it patches.
	recheck bool
}

// specError is a spec the BPA cannot carry out as it is (packages that cannot go together, that
// no host of the cluster runs, or content of a package's digest that is no package): it fails
// the cluster until the spec changes, rather than being retried. Its message says what to fix.
type specError struct{ error }

func (e *specError) Unwrap() error { return e.error }

// run is the reconcile: packages, hosts, install or patch, kubeconfig, charts.
func (w *work) run(ctx context.Context) (ctrl.Result, error) {
	// The site cache's state of the cluster's artifacts: where to read each.
	w.set = &sitev1.ArtifactSet{}
	if err := w.r.Client.Get(ctx, client.ObjectKeyFromObject(w.ac), w.set); err != nil {
		return ctrl.Result{}, fmt.Errorf("the cluster's ArtifactSet %s: %w", client.ObjectKeyFromObject(w.ac), err)
	}
	pkgs, err := w.packages(ctx)
	if w.refused(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := w.leave(ctx, pkgs); err != nil {
		return ctrl.Result{}, err
	}
	// After the leaves: a host going is never held back by a package left without a host.
	if w.refused(w.placed(pkgs)) {
		return ctrl.Result{}, nil
	}
	set, err := w.hosts(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	hosts := set.ready
	if len(set.cpWaiting) > 0 {
		w.st.Phase = sitev1.BootstrapWaiting
		w.st.Message = "waiting for control-plane hosts to be provisioned: " + strings.Join(set.cpWaiting, ", ")
		return ctrl.Result{RequeueAfter: w.r.Retry}, nil
	}
	images, err := w.images(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	spec := cluster.Spec{
		Name:              w.ac.Name,
		KubernetesVersion: w.ac.Spec.KubernetesVersion,
		ServiceCIDR:       w.ac.Spec.Network.ServiceCIDRs[0],
		PodCIDR:           w.ac.Spec.Network.PodCIDRs[0],
		APIEndpoint:       w.ac.Spec.Network.ControlPlaneEndpoint.Host,
		Hosts:             hosts,
		Workers:           workers(w.ac.Spec.Hosts),
		Packages:          pkgs,
		Images:            images,
		Certificates:      w.r.Certificates,
		// The BPA signs cluster users' certificates (the ClusterCredentialRequest reconciler).
		ClientCertificateMaxTTL: w.r.ClientCertificateMaxTTL,
	}
	if w.ac.Spec.Rotations != nil {
		spec.SecretEncryptionKeyRotations = w.ac.Spec.Rotations.SecretEncryptionKey
		spec.CARotations = w.ac.Spec.Rotations.CertificateAuthorities
	}
	var kmsRenew time.Time // when the KMS plugin's token is due again
	if w.r.KMS != nil {
		if spec.KMS, kmsRenew, err = w.r.KMS.For(ctx, w.ac); err != nil {
			return ctrl.Result{}, fmt.Errorf("the cluster's KMS (Vault): %w", err)
		}
	}
	if w.st.FailedPackage != "" && !slices.ContainsFunc(w.ac.Spec.Packages, func(a sitev1.ArtifactRef) bool { return a.SHA256 == w.st.FailedPackage }) {
		w.st.FailedPackage = "" // the packages changed since: try again
	}
	if w.st.FailedPackage != "" {
		w.st.Phase = sitev1.BootstrapFailed
		return ctrl.Result{}, nil // the message of the failure stays; a new spec brings us back
	}
	bu := cluster.New(w.r.Installer, w.r.Secrets)
	if patching := w.patches(pkgs); len(patching) > 0 {
		return w.patch(ctx, bu, spec, patching)
	}
	// What the cluster runs: the packages whose requirement it meets (cluster.Spec leaves the
	// others out).
	running := slices.DeleteFunc(slices.Clone(pkgs), func(p install.Package) bool { return !p.Manifest.Requires.Met(spec.KMS != nil) })
	w.progress(ctx, sitev1.BootstrapInstalling, fmt.Sprintf("installing %s on %d hosts", versions(running), len(hosts)))
	res, err := bu.Run(ctx, spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	hosts = slices.DeleteFunc(hosts, func(h cluster.Host) bool {
		return slices.ContainsFunc(res.LeftOut, func(l cluster.HostError) bool { return l.Host == h.Name })
	})
	if err := w.holdMachines(ctx, hosts); err != nil {
		return ctrl.Result{}, err
	}
	w.st.Nodes = int32(len(hosts))
	w.st.Packages = installed(running)
	cfg, err := w.publishKubeconfig(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := w.labelRoles(ctx, cfg, hosts); err != nil {
		return ctrl.Result{}, err
	}
	if err := w.bindClusterUsers(ctx, cfg); err != nil {
		return ctrl.Result{}, err
	}
	if err := w.charts(ctx, cfg, spec); err != nil {
		return ctrl.Result{}, err
	}
	w.st.Phase, w.st.Step = sitev1.BootstrapInstalled, nil
	w.st.Message = fmt.Sprintf("%d nodes run %s", len(hosts), versions(running))
	// The cluster serves, but may not be all its spec asks for yet: the status says what is missing.
	var missing []string
	if len(set.held) > 0 {
		missing = append(missing, fmt.Sprintf("control-plane hosts %s join once host %s has left (etcd removes a member before it adds one)", strings.Join(set.held, ", "), set.leaving))
	}
	if len(set.workersWaiting) > 0 {
		missing = append(missing, "waiting for worker hosts to be provisioned: "+strings.Join(set.workersWaiting, ", "))
	}
	for _, l := range res.LeftOut {
		if unreachable := (*sshexec.UnreachableError)(nil); errors.As(l.Err, &unreachable) {
			missing = append(missing, fmt.Sprintf("worker host %s not installed yet, it does not answer (%v): if this stays, check the host's network and sshd", l.Host, l.Err))
			continue
		}
		missing = append(missing, fmt.Sprintf("worker host %s not installed: %v", l.Host, l.Err))
	}
	if len(missing) > 0 {
		w.st.Message = fmt.Sprintf("%d of %d nodes run %s; %s", len(hosts), len(w.ac.Spec.Hosts), versions(running), strings.Join(missing, "; "))
	}
	requeue := w.r.Resync
	if len(w.st.Charts) > 0 {
		var ready, desired int32
		for _, c := range w.st.Charts {
			ready, desired = ready+c.PodsReady, desired+c.PodsDesired
		}
		w.st.Message += fmt.Sprintf("; %d charts deployed, their pods %d/%d ready", len(w.st.Charts), ready, desired)
		if ready < desired {
			// The pods are still starting (or cannot): look again soon, so the count the
			// status shows follows them.
			requeue = w.r.Retry
		}
	}
	if len(res.LeftOut) > 0 || len(set.held) > 0 {
		requeue = w.r.Retry // the next run joins them once they answer, or once the leaving host has left
	}
	rotating := w.secretEncryption(res, spec.SecretEncryptionKeyRotations)
	if w.caRotation(res, spec.CARotations) || rotating {
		requeue = min(requeue, nextRotationPass(rotating, res.CAs.Until, time.Now(), w.r.Resync))
	}
	if !kmsRenew.IsZero() {
		requeue = min(requeue, max(time.Until(kmsRenew), time.Second)) // the next run writes the new token
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// nextRotationPass is how soon the next run should come while a rotation is under way: a second (it
// rolls the next phase out), unless the only thing under way is a CA roll-over waiting until a
// time (cluster users' kubeconfigs expiring, hours): then at that time, or a resync before.
func nextRotationPass(rotatingKey bool, caUntil, now time.Time, resync time.Duration) time.Duration {
	if rotatingKey || caUntil.IsZero() {
		return time.Second
	}
	return min(resync, max(caUntil.Sub(now), time.Second))
}

// secretEncryption reports in the status where the Secret encryption key stands after a run
// (nothing when no API server of the cluster encrypts Secrets), and whether a rotation asked
// for is not finished.
func (w *work) secretEncryption(res *cluster.Result, asked int64) bool {
	now := res.SecretEncryption
	if now.Key == "" {
		return false
	}
	was := w.st.SecretEncryption
	st := &sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: now.Key, Rotations: now.Generation, Phase: sitev1.KeyRotationPhase(now.Phase), Reencrypted: now.Reencrypted}
	if now.KMS || now.Key == pki.KMSProviderName { // the plugin encrypts from a move's UseNew on
		st.Provider = sitev1.SecretEncryptionKMS
	}
	if now.MovingToKMS {
		st.To = sitev1.SecretEncryptionKMS
	}
	if was != nil {
		st.Since = phaseSince(was.Phase, was.Since, st.Phase)
	} else {
		st.Since = phaseSince("", nil, st.Phase)
	}
	w.st.SecretEncryption = st
	if res.Reencrypted != nil {
		w.r.Recorder.Eventf(w.ac, nil, corev1.EventTypeNormal, "SecretsReencrypted", "Reencrypt",
			"%d Secrets stored again under key %s, %d were under it already", res.Reencrypted.Rewritten, now.Key, res.Reencrypted.Current)
	}
	if st.To != "" {
		w.st.Message += "; moving the Secrets to the KMS plugin (Vault): " + moveStep(st)
		return true
	}
	if st.Phase == "" && asked <= st.Rotations {
		return false
	}
	w.st.Message += fmt.Sprintf("; rotating the Secret encryption key (%d of %d rotations done): %s", st.Rotations, asked, rotationStep(st))
	return true
}

// moveStep says what the API servers do in a phase of the move to the KMS plugin.
func moveStep(st *sitev1.SecretEncryptionStatus) string {
	switch st.Phase {
	case sitev1.RotationAddNew:
		return "every API server gets the plugin (one at a time), key " + st.Key + " still encrypts"
	case sitev1.RotationUseNew:
		return "the plugin encrypts; every Secret is stored again through it"
	}
	return "the secretbox key goes from every API server (one at a time), the plugin alone"
}

// phaseSince is when a rotation's phase began: kept while the phase lasts (was, since), now
// when one begins, none outside a phase.
func phaseSince(was sitev1.KeyRotationPhase, since *metav1.Time, phase sitev1.KeyRotationPhase) *metav1.Time {
	switch phase {
	case "":
		return nil
	case was:
		return since
	}
	now := metav1.Now()
	return &now
}

// rotationStep says what the API servers do in a rotation's phase.
func rotationStep(st *sitev1.SecretEncryptionStatus) string {
	switch st.Phase {
	case sitev1.RotationAddNew:
		return "every API server gets the new key (one at a time), key " + st.Key + " still encrypts"
	case sitev1.RotationUseNew:
		return "key " + st.Key + " encrypts; every Secret is stored again under it"
	case sitev1.RotationDropOld:
		return "the old key goes from every API server (one at a time), key " + st.Key + " alone"
	}
	return "the next rotation starts"
}

// caRotation reports in the status where a roll-over of the cluster's CAs stands after a run
// (nothing when the cluster has no API server, or never had a roll-over asked for), and whether
// one asked for is not finished.
func (w *work) caRotation(res *cluster.Result, asked int64) bool {
	now := res.CAs
	if asked == 0 && now.Generation == 0 && now.Phase == "" {
		w.st.CertificateAuthorities = nil
		return false
	}
	was := w.st.CertificateAuthorities
	st := &sitev1.CARotationStatus{Rotations: now.Generation, Phase: sitev1.KeyRotationPhase(now.Phase), Waiting: now.Waiting}
	switch {
	case st.Phase != "" && !now.Since.IsZero():
		st.Since = &metav1.Time{Time: now.Since} // as the PKI has it: when the phase began
	case was != nil:
		st.Since = phaseSince(was.Phase, was.Since, st.Phase)
	default:
		st.Since = phaseSince("", nil, st.Phase)
	}
	w.st.CertificateAuthorities = st
	if len(now.Restarted) > 0 {
		w.r.Recorder.Eventf(w.ac, nil, corev1.EventTypeNormal, "RestartedForNewCA", "CARollOver",
			"restarted %s so that their pods trust the new cluster CA before the API servers present its certificates", strings.Join(now.Restarted, ", "))
	}
	if st.Phase == "" && asked <= st.Rotations {
		return false
	}
	w.st.Message += fmt.Sprintf("; rolling the CAs over (%d of %d roll-overs done): %s", st.Rotations, asked, caRotationStep(st))
	return true
}

// caRotationStep says what a CA roll-over's phase does, and what it waits for.
func caRotationStep(st *sitev1.CARotationStatus) string {
	step := "the next roll-over starts"
	switch st.Phase {
	case sitev1.RotationAddNew:
		step = "every host trusts the new CAs beside the old (one host at a time)"
	case sitev1.RotationUseNew:
		step = "every certificate is issued again by the new CAs (one host at a time)"
	case sitev1.RotationDropOld:
		step = "the old CAs go from every host (one host at a time)"
	}
	if st.Waiting != "" {
		step += "; waiting: " + st.Waiting
	}
	return step
}

// progress writes the phase and message at once, so a long install shows while it runs.
func (w *work) progress(ctx context.Context, phase sitev1.BootstrapPhase, msg string) {
	if (w.recheck && phase != sitev1.BootstrapPatching) || (w.st.Phase == phase && w.st.Message == msg) {
		return
	}
	w.st.Phase, w.st.Message = phase, msg
	// A copy is patched: the client decodes the answer into the object it patches, which would
	// detach w.st from w.ac.
	cur := w.ac.DeepCopy()
	if err := w.r.patchStatus(ctx, w.before, cur); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "report progress")
		return
	}
	w.ac.ResourceVersion = cur.ResourceVersion
	w.before = w.before.DeepCopy()
	w.before.Status.Bootstrap = cur.Status.Bootstrap.DeepCopy()
}

// packages reads the cluster's packages from the site cache, in install order (their
// manifests' after lists); packages that cannot go together, or content that is no package,
// are a specError.
func (w *work) packages(ctx context.Context) ([]install.Package, error) {
	var pkgs []install.Package
	for _, ref := range w.ac.Spec.Packages {
		url := w.cachedURL(ref.SHA256)
		if url == "" {
			return nil, fmt.Errorf("package %s (%s) is not cached at the site yet", ref.SHA256, ref.Name)
		}
		p, err := w.r.cache.pkg(ctx, url, ref.SHA256)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	ordered, err := cluster.Ordered(pkgs)
	if err != nil {
		return nil, &specError{fmt.Errorf("spec.%w; fix the Release's packages", err)} // "spec.packages: …"
	}
	return ordered, nil
}

// placed is a specError when a package of the cluster has no host of its spec to run on. The
// cluster runs the packages whose requirement it meets: the KMS ones where the BPA has a Vault
// for its clusters (spec.KMS in run).
func (w *work) placed(pkgs []install.Package) error {
	if err := cluster.Placed(pkgs, workers(w.ac.Spec.Hosts), w.r.KMS != nil); err != nil {
		return &specError{fmt.Errorf("spec.%w", err)}
	}
	return nil
}

// refused fails the cluster when err is a specError, and reports whether it did.
func (w *work) refused(err error) bool {
	if serr := (*specError)(nil); !errors.As(err, &serr) {
		return false
	}
	w.st.Phase, w.st.Message = sitev1.BootstrapFailed, err.Error()
	return true
}

// images are the cluster's container image archives, streamed from the site cache to each
// host that imports them.
func (w *work) images(ctx context.Context) ([]install.Image, error) {
	var out []install.Image
	for _, ref := range w.ac.Spec.Images {
		url := w.cachedURL(ref.SHA256)
		if url == "" {
			return nil, fmt.Errorf("image %s (%s) is not cached at the site yet", ref.SHA256, ref.Name)
		}
		name := cmp.Or(ref.Name, ref.SHA256)
		out = append(out, install.Image{Name: name, Digest: ref.SHA256, Archive: func() (io.ReadCloser, error) { return w.r.cache.open(ctx, url) }})
	}
	return out, nil
}

// cachedURL is where the site cache serves the artifact of digest, "" while it does not.
func (w *work) cachedURL(digest string) string {
	for _, a := range w.set.Status.Artifacts {
		if a.SHA256 == digest && a.Phase == sitev1.ArtifactCached {
			return a.URL
		}
	}
	return ""
}

// hostSet is what hosts found.
type hostSet struct {
	// ready are the provisioned hosts the BPA installs, control plane first.
	ready []cluster.Host
	// cpWaiting and workersWaiting are the hosts not provisioned yet.
	cpWaiting, workersWaiting []string
	// held are provisioned control-plane hosts not installed yet, held back while an installed
	// control-plane host leaves: etcd removes a member before it adds one, so that a member
	// that is gone (a dead host being replaced) and one that has not started yet never count
	// together against the quorum.
	held []string
	// leaving is the installed control-plane host whose Machine is being deleted, if any.
	leaving string
}

// hosts sorts the cluster's hosts (see hostSet). A provisioned host without an address is an
// error: the BPA cannot reach it.
func (w *work) hosts(ctx context.Context) (hostSet, error) {
	var set hostSet
	machines := &clusterv1.MachineList{}
	if err := w.r.Client.List(ctx, machines, client.InNamespace(w.ac.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: w.ac.Name}); err != nil {
		return set, fmt.Errorf("machines of cluster %s: %w", w.ac.Name, err)
	}
	byHost := map[string]*clusterv1.Machine{}
	for i := range machines.Items {
		m := &machines.Items[i]
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		switch id := m.Spec.ProviderID; {
		case !m.DeletionTimestamp.IsZero() && cp && m.Annotations[LeaveHookAnnotation] != "":
			set.leaving = path.Base(id)
		case id != "" && m.DeletionTimestamp.IsZero():
			byHost[path.Base(id)] = m
		}
	}
	for _, h := range w.ac.Spec.Hosts {
		cp := h.Role == sitev1.RoleControlPlane
		m := byHost[h.Name]
		switch {
		case m == nil && cp:
			set.cpWaiting = append(set.cpWaiting, h.Name)
			continue
		case m == nil:
			set.workersWaiting = append(set.workersWaiting, h.Name)
			continue
		case cp && set.leaving != "" && m.Annotations[LeaveHookAnnotation] == "":
			set.held = append(set.held, h.Name)
			continue
		}
		ip, err := netip.ParseAddr(h.Address)
		if err != nil {
			return set, fmt.Errorf("host %s is provisioned but has no address the BPA could reach it at (spec.hosts[].address %q)", h.Name, h.Address)
		}
		set.ready = append(set.ready, cluster.Host{
			Name: h.Name, IP: ip, ControlPlane: cp, ProviderID: m.Spec.ProviderID,
			// Host keys are pinned per machine: a host provisioned again for another
			// machine is a new OS with new keys.
			SSH: sshexec.Target{Name: m.Name, Addr: net.JoinHostPort(ip.String(), "22")},
		})
	}
	slices.SortStableFunc(set.ready, func(a, b cluster.Host) int {
		if a.ControlPlane != b.ControlPlane {
			if a.ControlPlane {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return set, nil
}

// workers counts the worker hosts of the cluster's spec.
func workers(hosts []sitev1.ClusterHost) int {
	n := 0
	for _, h := range hosts {
		if h.Role != sitev1.RoleControlPlane {
			n++
		}
	}
	return n
}

// patches are the packages whose version changed since they were rolled out, in install order.
func (w *work) patches(pkgs []install.Package) []install.Package {
	var out []install.Package
	for _, p := range pkgs {
		i := slices.IndexFunc(w.st.Packages, func(ip sitev1.InstalledPackage) bool { return ip.Name == p.Manifest.Name })
		if i >= 0 && w.st.Packages[i].SHA256 != p.Digest {
			out = append(out, p)
		}
	}
	return out
}

// labelRoles gives each host's Node its role label, as kubeadm does (a kubelet may not set
// node-role labels on its own Node): node-role.kubernetes.io/control-plane or
// node-role.kubernetes.io/worker, so that `kubectl get nodes` shows ROLES. A host without a
// Node (packages without a kubelet) is left alone.
func (w *work) labelRoles(ctx context.Context, cfg *rest.Config, hosts []cluster.Host) error {
	cs, err := w.r.ClusterClient(cfg)
	if err != nil {
		return fmt.Errorf("client of cluster %s: %w", w.ac.Name, err)
	}
	for _, h := range hosts {
		label := "node-role.kubernetes.io/worker"
		if h.ControlPlane {
			label = "node-role.kubernetes.io/control-plane"
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", h.Name, err)
		}
		if _, ok := n.Labels[label]; ok {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, label)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, h.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s %s: %w", h.Name, label, err)
		}
	}
	return nil
}

// bindClusterUsers keeps the ClusterRoleBinding that lets every cluster user (group
// edgefleet:cluster-users, issue 17) read what the ClusterRole view allows. It is created when
// missing and put back when its role or subjects were changed; other bindings admins add for
// edgefleet:<user> are theirs.
func (w *work) bindClusterUsers(ctx context.Context, cfg *rest.Config) error {
	cs, err := w.r.ClusterClient(cfg)
	if err != nil {
		return fmt.Errorf("client of cluster %s: %w", w.ac.Name, err)
	}
	want := clustercred.UsersBinding()
	crbs := cs.RbacV1().ClusterRoleBindings()
	got, err := crbs.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRoleBinding %s in cluster %s: %w", want.Name, w.ac.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("ClusterRoleBinding %s in cluster %s: %w", want.Name, w.ac.Name, err)
	case got.RoleRef == want.RoleRef && slices.Equal(got.Subjects, want.Subjects):
		return nil
	}
	// The role of a binding cannot change: replace it.
	if err := crbs.Delete(ctx, want.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &got.UID}}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replace ClusterRoleBinding %s in cluster %s: %w", want.Name, w.ac.Name, err)
	}
	if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("replace ClusterRoleBinding %s in cluster %s: %w", want.Name, w.ac.Name, err)
	}
	return nil
}

// patch rolls the changed packages through the nodes of the cluster (the hosts that are nodes
// already; new hosts get the new versions when installed after), one package after the other.
// A package whose health check fails is rolled back on its node and the patch stops: the
// package is marked failed and not tried again until spec.packages changes.
func (w *work) patch(ctx context.Context, bu *cluster.BringUp, spec cluster.Spec, pkgs []install.Package) (ctrl.Result, error) {
	cfg, err := w.adminConfig(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	cs, err := w.r.ClusterClient(cfg)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("client of cluster %s: %w", w.ac.Name, err)
	}
	var nodes []cluster.Host
	for _, h := range spec.Hosts {
		_, err := cs.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			nodes = append(nodes, h)
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("node %s: %w", h.Name, err)
		}
	}
	spec.Hosts = nodes
	bu.Progress = func(s cluster.PatchStep) {
		w.st.Step = &sitev1.PatchStep{Package: s.Package, Version: s.Version, Node: s.Host, Index: int32(s.Index), Of: int32(s.Of), Step: s.Step, Since: metav1.Now()}
		w.progress(ctx, sitev1.BootstrapPatching, fmt.Sprintf("patching %s to %s, one node at a time: node %s (%d of %d): %s", s.Package, s.Version, s.Host, s.Index, s.Of, s.Step))
	}
	for _, pkg := range pkgs {
		m := pkg.Manifest
		w.progress(ctx, sitev1.BootstrapPatching, fmt.Sprintf("patching %s to %s, one node at a time", m.Name, m.Version))
		res, err := bu.Patch(ctx, spec, m.Name)
		for _, n := range res.GetNodes() {
			if n.NotDrained {
				w.r.Recorder.Eventf(w.ac, nil, corev1.EventTypeNormal, "NodeNotDrained", "Patch",
					"%s patched on node %s without draining it: no other node could take its pods, which ran on in place", m.Name, n.Host)
			}
		}
		if herr := (*install.HealthError)(nil); errors.As(err, &herr) {
			w.st.Phase, w.st.FailedPackage = sitev1.BootstrapFailed, pkg.Digest
			w.st.Message = "patch failed and was rolled back: " + err.Error()
			return ctrl.Result{}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		i := slices.IndexFunc(w.st.Packages, func(p sitev1.InstalledPackage) bool { return p.Name == m.Name })
		w.st.Packages[i] = sitev1.InstalledPackage{Name: m.Name, Version: m.Version, SHA256: pkg.Digest}
	}
	w.st.Step = nil
	return ctrl.Result{RequeueAfter: time.Second}, nil // new hosts, new packages and charts on the next pass
}

func installed(pkgs []install.Package) []sitev1.InstalledPackage {
	var out []sitev1.InstalledPackage
	for _, p := range pkgs {
		out = append(out, sitev1.InstalledPackage{Name: p.Manifest.Name, Version: p.Manifest.Version, SHA256: p.Digest})
	}
	return out
}

func versions(pkgs []install.Package) string {
	var s []string
	for _, p := range pkgs {
		s = append(s, p.Manifest.Name+" "+p.Manifest.Version)
	}
	return strings.Join(s, ", ")
}

// adminConfig is the cluster's admin client config, from the secret store.
func (w *work) adminConfig(ctx context.Context) (*rest.Config, error) {
	kc, err := w.adminKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of cluster %s: %w", w.ac.Name, err)
	}
	return cfg, nil
}

func (w *work) adminKubeconfig(ctx context.Context) ([]byte, error) {
	data, err := w.r.Secrets.Get(ctx, cluster.AdminKubeconfigSecret(w.ac.Name))
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of cluster %s: %w", w.ac.Name, err)
	}
	return data["value"], nil
}

// publishKubeconfig writes the admin kubeconfig into Cluster-API's <cluster>-kubeconfig
// Secret (key value), owned by the Cluster-API Cluster, when it differs, and returns it as a
// client config.
func (w *work) publishKubeconfig(ctx context.Context) (*rest.Config, error) {
	kc, err := w.adminKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	capi := &clusterv1.Cluster{}
	if err := w.r.Client.Get(ctx, client.ObjectKeyFromObject(w.ac), capi); err != nil {
		return nil, fmt.Errorf("Cluster-API Cluster %s: %w", client.ObjectKeyFromObject(w.ac), err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ac.Namespace, Name: w.ac.Name + "-kubeconfig"}}
	if _, err := controllerutil.CreateOrPatch(ctx, w.r.Client, secret, func() error {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[clusterv1.ClusterNameLabel] = w.ac.Name
		secret.Type = clusterv1.ClusterSecretType
		secret.Data = map[string][]byte{"value": kc}
		return controllerutil.SetOwnerReference(capi, secret, w.r.Client.Scheme())
	}); err != nil {
		return nil, fmt.Errorf("write Secret %s: %w", client.ObjectKeyFromObject(secret), err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of cluster %s: %w", w.ac.Name, err)
	}
	return cfg, nil
}
