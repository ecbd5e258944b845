package sitesim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// FakeSiteReconcilerOptions configure a FakeSiteReconciler.
type FakeSiteReconcilerOptions struct {
	// Namespace whose Sites are simulated.
	Namespace string
	// WorkTime is how long an operation runs on the site before it finishes; nil means 0 (the
	// final phase is written at once).
	WorkTime func(site string, op *fleetv1.SiteOperation) time.Duration
	// Outcome is the final phase of an operation (Succeeded or Failed; for a pre-cache,
	// Succeeded stands for PreCached) and its message. An empty phase makes the operation hang
	// until its deadline, when it times out. Nil means every operation succeeds.
	Outcome func(site string, op *fleetv1.SiteOperation) (fleetv1.OperationPhase, string)
	// ClusterVersion, when set, is the Kubernetes version the site's cluster reports
	// (status.cluster.kubernetesVersion, written with the final phase) once an apply succeeded,
	// as the global site reconciler's summary does after the nodes moved; "" leaves it as is.
	ClusterVersion func(site string, op *fleetv1.SiteOperation) string
	// Workers write statuses in parallel; default 8.
	Workers int
	// Clock stamps the start and completion times; default the real clock.
	Clock clock.Clock
}

// FakeSiteReconciler is a fake of the global site reconciler, for tests of the campaign logic
// alone: no site control plane, no push. It plays the sites' side of campaigns against a real
// API server, as the site reconciler does: it watches Sites (one informer), and for each new spec.operation writes
// status.lastOperation — Pending is skipped, InProgress (PreCaching for a pre-cache) while the
// work time runs, then the outcome with a completion time, or TimedOut once the deadline passed.
// It also counts every dispatch it sees (each change of spec.operation) per site, for tests
// that check no site is dispatched twice. It never writes a Site's spec.
type FakeSiteReconciler struct {
	opts   FakeSiteReconcilerOptions
	client client.Client
	cache  cache.Cache
	queue  workqueue.TypedDelayingInterface[types.NamespacedName]

	mu         sync.Mutex
	dispatches map[string][]string
	log        []Dispatch
	done       []Completion
}

// Dispatch is one dispatch the simulator saw.
type Dispatch struct {
	// Site and ID of the operation, and the release it moves the site to.
	Site, ID, Release string
	// At is when the simulator saw it (its clock).
	At time.Time
}

// Completion is one final phase the simulator wrote.
type Completion struct {
	// Site and ID of the operation, and the phase written.
	Site, ID string
	Phase    fleetv1.OperationPhase
	// At is when the write returned (its clock).
	At time.Time
}

// NewFakeSiteReconciler creates a simulator of the Sites of opts.Namespace on the API server of cfg.
func NewFakeSiteReconciler(cfg *rest.Config, opts FakeSiteReconcilerOptions) (*FakeSiteReconciler, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the sites are many clients in reality
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c, err := client.New(cfg, client.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("fake site reconciler: client: %w", err)
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: controlplane.Scheme(), DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("fake site reconciler: cache: %w", err)
	}
	return &FakeSiteReconciler{
		opts:       opts,
		client:     c,
		cache:      ca,
		queue:      workqueue.NewTypedDelayingQueue[types.NamespacedName](),
		dispatches: map[string][]string{},
	}, nil
}

// Start runs the simulator until ctx is done; it returns once its cache has synced.
func (s *FakeSiteReconciler) Start(ctx context.Context) error {
	inf, err := s.cache.GetInformer(ctx, &fleetv1.Site{})
	if err != nil {
		return fmt.Errorf("fake site reconciler: informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			site := o.(*fleetv1.Site)
			if site.Spec.Operation != nil {
				s.record(site)
			}
			s.queue.Add(client.ObjectKeyFromObject(site))
		},
		UpdateFunc: func(old, cur any) {
			o, c := old.(*fleetv1.Site), cur.(*fleetv1.Site)
			if c.Spec.Operation != nil && !apiequality.Semantic.DeepEqual(o.Spec.Operation, c.Spec.Operation) {
				s.record(c)
			}
			s.queue.Add(client.ObjectKeyFromObject(c))
		},
	}); err != nil {
		return fmt.Errorf("fake site reconciler: event handler: %w", err)
	}
	go func() {
		if err := s.cache.Start(ctx); err != nil {
			fmt.Println("fake site reconciler: cache:", err)
		}
	}()
	if !s.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("fake site reconciler: cache did not sync")
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for range s.opts.Workers {
		go func() {
			for {
				key, quit := s.queue.Get()
				if quit {
					return
				}
				if err := s.handle(ctx, key); err != nil && ctx.Err() == nil {
					s.queue.AddAfter(key, 50*time.Millisecond)
				}
				s.queue.Done(key)
			}
		}()
	}
	return nil
}

func (s *FakeSiteReconciler) record(site *fleetv1.Site) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatches[site.Name] = append(s.dispatches[site.Name], site.Spec.Operation.ID)
	s.log = append(s.log, Dispatch{Site: site.Name, ID: site.Spec.Operation.ID, Release: site.Spec.Operation.Release, At: s.opts.Clock.Now()})
}

// Log returns every dispatch seen, in the order seen.
func (s *FakeSiteReconciler) Log() []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Completions returns every final phase written, in order.
func (s *FakeSiteReconciler) Completions() []Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.done)
}

// Poke makes the simulator look at a site again (after its Outcome changed).
func (s *FakeSiteReconciler) Poke(site string) {
	s.queue.Add(types.NamespacedName{Namespace: s.opts.Namespace, Name: site})
}

// Dispatches returns, per site, the operation IDs it was dispatched in order.
func (s *FakeSiteReconciler) Dispatches() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.dispatches))
	for k, v := range s.dispatches {
		out[k] = slices.Clone(v)
	}
	return out
}

// DispatchedSites returns the sites dispatched operation id, in name order.
func (s *FakeSiteReconciler) DispatchedSites(id string) []string {
	var out []string
	for site, ids := range s.Dispatches() {
		if slices.Contains(ids, id) {
			out = append(out, site)
		}
	}
	slices.Sort(out)
	return out
}

// handle moves one site's operation on.
func (s *FakeSiteReconciler) handle(ctx context.Context, key types.NamespacedName) error {
	site := &fleetv1.Site{}
	if err := s.cache.Get(ctx, key, site); err != nil {
		return client.IgnoreNotFound(err)
	}
	op, last := site.Spec.Operation, site.Status.LastOperation
	if op == nil {
		return nil
	}
	if last != nil && last.ID == op.ID && simFinal(last.Phase) {
		return nil
	}
	now := s.opts.Clock.Now()
	var work time.Duration
	if s.opts.WorkTime != nil {
		work = s.opts.WorkTime(site.Name, op)
	}
	running := fleetv1.OperationInProgress
	if op.Stage == fleetv1.StagePreCache {
		running = fleetv1.OperationPreCaching
	}
	next := &fleetv1.SiteOperationStatus{ID: op.ID, Campaign: op.Campaign, Action: op.Action, Stage: op.Stage, Release: op.Release, Phase: running, StartTime: &metav1.Time{Time: now}}
	if last != nil && last.ID == op.ID && last.StartTime != nil {
		next.StartTime = last.StartTime
	}
	if rest := next.StartTime.Add(work).Sub(now); rest > 0 {
		if last == nil || last.ID != op.ID {
			if err := s.write(ctx, site, next); err != nil {
				return err
			}
		}
		s.queue.AddAfter(key, rest)
		return nil
	}
	phase, msg := fleetv1.OperationSucceeded, ""
	if s.opts.Outcome != nil {
		phase, msg = s.opts.Outcome(site.Name, op)
	}
	deadlinePassed := op.Deadline != nil && !now.Before(op.Deadline.Time)
	switch {
	case deadlinePassed && (phase == "" || work > 0 && next.StartTime.Add(work).After(op.Deadline.Time)):
		phase, msg = fleetv1.OperationTimedOut, "deadline passed"
	case phase == "":
		// Hangs: written as running, looked at again at the deadline.
		if last == nil || last.ID != op.ID {
			if err := s.write(ctx, site, next); err != nil {
				return err
			}
		}
		if op.Deadline != nil {
			s.queue.AddAfter(key, op.Deadline.Sub(now))
		}
		return nil
	case phase == fleetv1.OperationSucceeded && op.Stage == fleetv1.StagePreCache:
		phase = fleetv1.OperationPreCached
	}
	next.Phase, next.Message, next.CompletionTime = phase, msg, &metav1.Time{Time: now}
	version := ""
	if s.opts.ClusterVersion != nil && phase == fleetv1.OperationSucceeded && op.Stage == fleetv1.StageApply {
		version = s.opts.ClusterVersion(site.Name, op)
	}
	if err := s.writeWith(ctx, site, next, version); err != nil {
		return err
	}
	s.mu.Lock()
	s.done = append(s.done, Completion{Site: site.Name, ID: op.ID, Phase: phase, At: s.opts.Clock.Now()})
	s.mu.Unlock()
	return nil
}

func (s *FakeSiteReconciler) write(ctx context.Context, site *fleetv1.Site, status *fleetv1.SiteOperationStatus) error {
	return s.writeWith(ctx, site, status, "")
}

// writeWith writes status, and version as the cluster's Kubernetes version unless "".
func (s *FakeSiteReconciler) writeWith(ctx context.Context, site *fleetv1.Site, status *fleetv1.SiteOperationStatus, version string) error {
	mod := site.DeepCopy()
	mod.Status.LastOperation = status
	if version != "" {
		if mod.Status.Cluster == nil {
			mod.Status.Cluster = &fleetv1.ClusterSummary{}
		}
		mod.Status.Cluster.KubernetesVersion = version
	}
	if err := s.client.Status().Patch(ctx, mod, client.MergeFrom(site)); err != nil {
		return fmt.Errorf("fake site reconciler: patch status of %s: %w", site.Name, client.IgnoreNotFound(err))
	}
	return nil
}

func simFinal(p fleetv1.OperationPhase) bool {
	return p == fleetv1.OperationSucceeded || p == fleetv1.OperationFailed || p == fleetv1.OperationTimedOut || p == fleetv1.OperationPreCached
}

// CreateFakeSites creates n Sites named prefix-00000… in ns, with spec.cluster set (release
// from) and labels but no kubeconfig, using a few parallel writers, for the campaign tests that
// run with a FakeSiteReconciler (the real one is not running there).
func CreateFakeSites(ctx context.Context, c client.Client, ns, prefix string, n int, from string, labels map[string]string) ([]string, error) {
	names := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
		site := &fleetv1.Site{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i], Labels: maps.Clone(labels)},
			Spec: fleetv1.SiteSpec{
				KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: names[i] + "-kubeconfig"},
				Cluster: &fleetv1.SiteCluster{Release: from, Network: sitev1.ClusterNetwork{
					PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
					ControlPlaneEndpoint: sitev1.APIEndpoint{Host: names[i] + ".example", Port: 6443},
				}},
			},
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.Create(ctx, site); err != nil {
				errs <- fmt.Errorf("create site %s: %w", site.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return names, <-errs
}
