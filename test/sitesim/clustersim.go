package sitesim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// ClusterSimulator stands for the local controllers of many sites that share one site control
// plane: the global controller pushes each site's ApplicationCluster (named after the site) to
// that control plane over the real transport, and the simulator answers on each as a local
// controller would — after WorkTime, the cluster runs the pushed version and is Ready, or, for a
// site Fail picks, a host failed. It provisions nothing: it is a simulator, for tests and
// benchmarks of what the global side does with many sites.
type ClusterSimulator struct {
	// WorkTime is how long each operation takes at a site.
	WorkTime time.Duration
	// Fail, when set, says whether a site's operation fails.
	Fail func(site, operation string) bool
	// Concurrency is how many sites are answered in parallel (default 32).
	Concurrency int
	// Bootstrap has the simulator also report what a site's BPA and Metal3 would: while it
	// works, the patch's step (the first package on the first host); after, every host
	// provisioned and a ready node of the pushed version, the pushed packages installed and
	// charts deployed (status.hosts, status.bootstrap).
	Bootstrap bool

	mu         sync.Mutex
	seen       map[string]time.Time // "site/generation" → when first seen
	operations map[string][]string  // site → operation IDs taken in, in order
}

// Dispatches returns, per site, the operation IDs the simulator took in, in order: the same
// ID twice would be a dispatch the global side repeated.
func (s *ClusterSimulator) Dispatches() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.operations))
	for site, ops := range s.operations {
		out[site] = append([]string(nil), ops...)
	}
	return out
}

// Start runs the simulator against the site control plane cfg until ctx ends; it returns once
// its cache has synced.
func (s *ClusterSimulator) Start(ctx context.Context, cfg *rest.Config) error {
	s.seen, s.operations = map[string]time.Time{}, map[string][]string{}
	concurrency := s.Concurrency
	if concurrency == 0 {
		concurrency = 32
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:  controlplane.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{sitev1.InfoNamespace: {}}},
	})
	if err != nil {
		return fmt.Errorf("cluster simulator: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("cluster-simulator").For(&sitev1.ApplicationCluster{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(&simReconciler{sim: s, client: mgr.GetClient()})
	if err != nil {
		return fmt.Errorf("cluster simulator: %w", err)
	}
	go func() { _ = mgr.Start(ctx) }() // stops with ctx
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cluster simulator: cache did not sync")
	}
	return nil
}

type simReconciler struct {
	sim    *ClusterSimulator
	client client.Client
}

func (r *simReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ac := &sitev1.ApplicationCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, ac); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := &ac.Status
	if st.ObservedGeneration == ac.Generation && st.ObservedOperationGeneration == ac.Spec.OperationGeneration && st.Phase != "" {
		return ctrl.Result{}, nil
	}
	op := ac.Annotations[sitev1.OperationAnnotation]
	key := fmt.Sprintf("%s/%d", ac.Name, ac.Generation)
	r.sim.mu.Lock()
	first, ok := r.sim.seen[key]
	if !ok {
		first = time.Now()
		r.sim.seen[key] = first
		if ops := r.sim.operations[ac.Name]; op != "" && (len(ops) == 0 || ops[len(ops)-1] != op) {
			r.sim.operations[ac.Name] = append(ops, op)
		}
	}
	r.sim.mu.Unlock()
	if wait := time.Until(first.Add(r.sim.WorkTime)); wait > 0 {
		if r.sim.Bootstrap && reportWork(ac, first) {
			return r.report(ctx, ac, ctrl.Result{RequeueAfter: wait})
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	hosts := int32(len(ac.Spec.Hosts))
	st.ObservedGeneration, st.ObservedOperationGeneration = ac.Generation, ac.Spec.OperationGeneration
	now := metav1.Now()
	failed := r.sim.Fail != nil && op != "" && r.sim.Fail(ac.Name, op)
	if failed {
		st.Phase, st.KubernetesVersion = sitev1.ClusterDegraded, ""
		st.Conditions = []metav1.Condition{
			{Type: sitev1.HostsProvisionedCondition, Status: metav1.ConditionFalse, Reason: sitev1.ReasonHostFailed, Message: "simulated host failure", LastTransitionTime: now},
			{Type: sitev1.ApplicationClusterReadyCondition, Status: metav1.ConditionFalse, Reason: sitev1.ReasonClusterNotReady, Message: "HostsProvisioned is False", LastTransitionTime: now},
		}
	} else {
		st.Phase, st.KubernetesVersion = sitev1.ClusterProvisioned, ac.Spec.KubernetesVersion
		st.ControlPlane, st.Workers = sitev1.NodeCounts{Ready: hosts, Total: hosts}, sitev1.NodeCounts{}
		st.Conditions = []metav1.Condition{
			{Type: sitev1.HostsProvisionedCondition, Status: metav1.ConditionTrue, Reason: sitev1.ReasonAllHostsProvisioned, Message: "simulated", LastTransitionTime: now},
			{Type: sitev1.ApplicationClusterReadyCondition, Status: metav1.ConditionTrue, Reason: sitev1.ReasonClusterReady, Message: "simulated", LastTransitionTime: now},
		}
	}
	if r.sim.Bootstrap {
		reportDone(ac, failed)
	}
	return r.report(ctx, ac, ctrl.Result{})
}

// report writes the ApplicationCluster's status and returns then; a conflict is retried
// shortly.
func (r *simReconciler) report(ctx context.Context, ac *sitev1.ApplicationCluster, then ctrl.Result) (ctrl.Result, error) {
	if err := r.client.Status().Update(ctx, ac); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return ctrl.Result{}, fmt.Errorf("report on ApplicationCluster %s/%s: %w", ac.Namespace, ac.Name, err)
	}
	return then, nil
}

// reportWork sets, once per generation, what a site reports while its BPA works on the
// generation: the cluster updating (provisioning, the first time) and the step the BPA is at,
// the first package on the first host. It returns false when that is reported already.
func reportWork(ac *sitev1.ApplicationCluster, since time.Time) bool {
	st := &ac.Status
	if b := st.Bootstrap; b != nil && b.ObservedGeneration == ac.Generation && b.Step != nil {
		return false
	}
	b := &sitev1.BootstrapStatus{Phase: sitev1.BootstrapPatching, ObservedGeneration: ac.Generation, Message: "simulated: rolling the packages through the nodes"}
	st.Phase = sitev1.ClusterUpdating
	if st.Bootstrap == nil {
		b.Phase, b.Message, st.Phase = sitev1.BootstrapInstalling, "simulated: installing the packages", sitev1.ClusterProvisioning
	} else {
		b.Packages, b.Charts, b.Nodes = st.Bootstrap.Packages, st.Bootstrap.Charts, st.Bootstrap.Nodes
	}
	step := &sitev1.PatchStep{Package: "node", Node: ac.Spec.Hosts[0].Name, Index: 1, Of: int32(len(ac.Spec.Hosts)), Step: "installing", Since: metav1.NewTime(since)}
	if len(ac.Spec.Packages) > 0 {
		step.Package, step.Version = nameVersion(ac.Spec.Packages[0])
	}
	b.Step = step
	st.Bootstrap = b
	return true
}

// reportDone sets the hosts and the BPA's report once the generation is done: every host a
// ready node of the pushed version, the packages installed and the charts deployed, or with
// failed, the hosts not ready and the BPA stopped.
func reportDone(ac *sitev1.ApplicationCluster, failed bool) {
	st := &ac.Status
	st.Hosts = st.Hosts[:0]
	for _, h := range ac.Spec.Hosts {
		hs := sitev1.HostStatus{Name: h.Name, Role: h.Role, ProvisioningState: "provisioned", Machine: h.Name, Version: ac.Spec.KubernetesVersion, Ready: !failed}
		if failed {
			hs.Message = "simulated host failure"
		}
		st.Hosts = append(st.Hosts, hs)
	}
	b := &sitev1.BootstrapStatus{Phase: sitev1.BootstrapInstalled, ObservedGeneration: ac.Generation, Nodes: int32(len(ac.Spec.Hosts)),
		Message: fmt.Sprintf("simulated: %d packages on %d nodes, %d charts", len(ac.Spec.Packages), len(ac.Spec.Hosts), len(ac.Spec.Charts))}
	if failed {
		b.Phase, b.Message = sitev1.BootstrapWaiting, "simulated: waiting for the failed host"
	}
	for _, p := range ac.Spec.Packages {
		name, version := nameVersion(p)
		b.Packages = append(b.Packages, sitev1.InstalledPackage{Name: name, Version: version, SHA256: p.SHA256})
	}
	for _, c := range ac.Spec.Charts {
		name, version := nameVersion(c)
		b.Charts = append(b.Charts, sitev1.ChartRelease{Name: name, Namespace: "kube-system", Version: version, Revision: 1, State: "deployed", PodsReady: 1, PodsDesired: 1})
	}
	st.Bootstrap = b
}

// nameVersion reads an artifact's name and version from its reference's name ("KIND NAME
// VERSION", as releases record them), or takes the whole name.
func nameVersion(a sitev1.ArtifactRef) (name, version string) {
	if f := strings.Fields(a.Name); len(f) == 3 {
		return f[1], f[2]
	}
	return a.Name, ""
}
