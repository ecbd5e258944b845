package charts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/kube"
	releasecommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// State is a release's state: helm's status of its last revision, or StateAbsent.
type State string

// States. The pending ones are an operation in progress or, found by Apply, one a stopped
// process left behind.
const (
	StateAbsent          State = "absent"
	StateDeployed        State = State(releasecommon.StatusDeployed)
	StateFailed          State = State(releasecommon.StatusFailed)
	StatePendingInstall  State = State(releasecommon.StatusPendingInstall)
	StatePendingUpgrade  State = State(releasecommon.StatusPendingUpgrade)
	StatePendingRollback State = State(releasecommon.StatusPendingRollback)
	StateSuperseded      State = State(releasecommon.StatusSuperseded)
	StateUninstalling    State = State(releasecommon.StatusUninstalling)
	StateUninstalled     State = State(releasecommon.StatusUninstalled)
	StateUnknown         State = State(releasecommon.StatusUnknown)
)

// MaxMessage is the most bytes of helm's description Status.Message holds.
const MaxMessage = 1024

// Release is a chart to install into the application cluster, under a release name.
type Release struct {
	// Name of the release: a helm release name (DNS-1123 label characters, at most 53).
	Name string
	// Namespace of the release's objects and of its helm storage; created when missing.
	Namespace string
	// Chart is a chart archive (.tgz).
	Chart []byte
	// Values override the chart's values.yaml; nil keeps its defaults. They must be JSON.
	Values map[string]any
	// Wait, when positive, makes Apply wait up to that long for the release's objects to be
	// ready (Deployments available, Jobs complete, ...); zero does not wait.
	Wait time.Duration
}

func (r Release) String() string { return r.Namespace + "/" + r.Name }

// Status is what helm's storage says of a release: its last revision.
type Status struct {
	Name, Namespace string
	// Chart and Version of the last revision's chart (empty when absent).
	Chart, Version string
	// Revision is the last revision's number, 0 when absent.
	Revision int
	// DeployedRevision is the revision deployed, 0 when none is (absent, or every revision
	// failed). It differs from Revision after an upgrade that failed.
	DeployedRevision int
	State            State
	// Message is helm's description of the last revision ("Install complete", "Upgrade
	// complete", the error of a failed one), at most MaxMessage bytes.
	Message string
	// Updated is when the last revision was deployed or tried.
	Updated time.Time
	// Fingerprint is the last revision's FingerprintLabel, empty when it was not made by an
	// Installer.
	Fingerprint string
	// Pods of the deployed revision's workloads: how many are ready of how many wanted.
	Pods Pods
}

// Options configure an Installer.
type Options struct {
	// Log receives helm's log (its debug messages at V(4), as logr.ToSlogHandler maps them) and
	// the recoveries of interrupted revisions. The zero Logger discards.
	Log logr.Logger
	// HookTimeout bounds the wait for each of a chart's hooks (and, with no Release.Wait, is
	// helm's operation timeout); 5 minutes when zero.
	HookTimeout time.Duration
	// MaxHistory is how many revisions of a release helm keeps; 10 when zero.
	MaxHistory int
}

// Installer installs and upgrades releases in one application cluster.
type Installer struct {
	config      *rest.Config
	clientset   kubernetes.Interface
	log         logr.Logger
	hookTimeout time.Duration
	maxHistory  int

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by namespace/name
}

// New returns an Installer for the application cluster config reaches. The config is copied;
// a config without a rate limit gets QPS 50, burst 100.
func New(config *rest.Config, opts Options) (*Installer, error) {
	if config == nil {
		return nil, errors.New("charts: no rest config")
	}
	cfg := rest.CopyConfig(config)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cfg.WarningHandler = warningLogger{opts.Log}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("charts: client of %s: %w", cfg.Host, err)
	}
	i := &Installer{config: cfg, clientset: cs, log: opts.Log, hookTimeout: opts.HookTimeout,
		maxHistory: opts.MaxHistory, locks: map[string]*sync.Mutex{}}
	if i.hookTimeout <= 0 {
		i.hookTimeout = 5 * time.Minute
	}
	if i.maxHistory <= 0 {
		i.maxHistory = 10
	}
	return i, nil
}

// Apply installs or upgrades the release so its last revision is deployed from r's chart and
// values, or does nothing when it already is; see the package documentation. The Status
// returned is read back from helm's storage, also with an error when it can be.
func (i *Installer) Apply(ctx context.Context, r Release) (Status, error) {
	if err := r.validate(); err != nil {
		return Status{}, fmt.Errorf("chart release %s: %w", r, err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(r.Chart))
	if err != nil {
		sum := sha256.Sum256(r.Chart)
		return Status{}, fmt.Errorf("chart release %s: the archive (sha256 %s, %d bytes) is not a chart: %w",
			r, hex.EncodeToString(sum[:]), len(r.Chart), err)
	}
	chartName := ch.Name() + "-" + ch.Metadata.Version
	fail := func(err error) error { return fmt.Errorf("chart release %s (chart %s): %w", r, chartName, err) }
	canonical, err := canonicalValues(r.Values)
	if err != nil {
		return Status{}, fail(err)
	}
	fp := fingerprint(r.Chart, canonical)

	unlock := i.lock(r.String())
	defer unlock()
	if err := ctx.Err(); err != nil {
		return Status{}, fail(err)
	}
	cfg, err := i.configuration(r.Namespace)
	if err != nil {
		return Status{}, fail(err)
	}
	history, err := readHistory(cfg, r.Name)
	if err != nil {
		return Status{}, fail(err)
	}
	last := history.last()
	switch {
	case last != nil && last.Info.Status == releasecommon.StatusDeployed && last.Labels[FingerprintLabel] == fp:
		st, err := i.withPods(ctx, history, r.Name, r.Namespace)
		if err != nil {
			return st, fail(err)
		}
		return st, nil
	case last != nil && interrupted(last.Info.Status):
		if err := i.markInterrupted(cfg, last); err != nil {
			return history.status(r.Name, r.Namespace), fail(err)
		}
	}
	// Values are the canonical JSON's: helm gets a map of its own, as it will store it.
	values, err := decodeValues(canonical)
	if err != nil {
		return Status{}, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return Status{}, fail(err)
	}
	if last == nil || last.Info.Status == releasecommon.StatusUninstalled {
		err = i.install(ctx, cfg, r, ch, values, fp, last != nil)
	} else {
		err = i.upgrade(cfg, r, ch, values, fp)
	}
	st, stErr := i.status(ctx, r.Name, r.Namespace)
	if err != nil {
		return st, fail(err)
	}
	if stErr != nil {
		return st, fail(stErr)
	}
	return st, nil
}

// Status reads the release's status from helm's storage; a release without revisions is
// StateAbsent.
func (i *Installer) Status(ctx context.Context, name, namespace string) (Status, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, fmt.Errorf("chart release %s/%s: %w", namespace, name, err)
	}
	return i.status(ctx, name, namespace)
}

func (i *Installer) status(ctx context.Context, name, namespace string) (Status, error) {
	cfg, err := i.configuration(namespace)
	if err != nil {
		return Status{}, fmt.Errorf("chart release %s/%s: %w", namespace, name, err)
	}
	h, err := readHistory(cfg, name)
	if err != nil {
		return Status{}, fmt.Errorf("chart release %s/%s: %w", namespace, name, err)
	}
	st, err := i.withPods(ctx, h, name, namespace)
	if err != nil {
		return st, fmt.Errorf("chart release %s/%s: %w", namespace, name, err)
	}
	return st, nil
}

// withPods is the status of history h with the pods of its deployed revision counted.
func (i *Installer) withPods(ctx context.Context, h history, name, namespace string) (Status, error) {
	st := h.status(name, namespace)
	for _, rel := range h {
		if rel.Version == st.DeployedRevision {
			pods, err := i.pods(ctx, rel)
			if err != nil {
				return st, fmt.Errorf("pods: %w", err)
			}
			st.Pods = pods
		}
	}
	return st, nil
}

func (r Release) validate() error {
	if err := chartutil.ValidateReleaseName(r.Name); err != nil {
		return fmt.Errorf("name %q: %w", r.Name, err)
	}
	if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", r.Namespace, errs[0])
	}
	if len(r.Chart) == 0 {
		return errors.New("no chart archive")
	}
	if r.Wait < 0 {
		return fmt.Errorf("wait %v is negative", r.Wait)
	}
	return nil
}

// lock serializes Apply calls for one release within the Installer.
func (i *Installer) lock(key string) func() {
	i.mu.Lock()
	l, ok := i.locks[key]
	if !ok {
		l = &sync.Mutex{}
		i.locks[key] = l
	}
	i.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// configuration is helm's action configuration for releases of namespace: its Secret storage
// there, its kube client over a getter of our own.
func (i *Installer) configuration(namespace string) (*action.Configuration, error) {
	getter, err := newRESTClientGetter(i.config, namespace)
	if err != nil {
		return nil, err
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(i.slogHandler()))
	if err := cfg.Init(getter, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		kc.Namespace = namespace
	}
	return cfg, nil
}

func (i *Installer) slogHandler() slog.Handler {
	if i.log.GetSink() == nil {
		return slog.DiscardHandler
	}
	return logr.ToSlogHandler(i.log)
}

func (i *Installer) waitOptions(r Release) (kube.WaitStrategy, time.Duration, bool) {
	if r.Wait > 0 {
		return kube.StatusWatcherStrategy, r.Wait, true
	}
	return kube.HookOnlyStrategy, i.hookTimeout, false
}

func (i *Installer) install(ctx context.Context, cfg *action.Configuration, r Release, ch *chart.Chart, values map[string]any, fp string, replace bool) error {
	create, err := i.namespaceMissing(ctx, r.Namespace)
	if err != nil {
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = r.Name
	in.Namespace = r.Namespace
	// Helm creates the namespace after rendering and building the objects, so a chart that does
	// not render leaves none behind; an existing namespace is left alone (helm would apply its
	// own label to it).
	in.CreateNamespace = create
	in.Replace = replace // over an uninstalled release whose history was kept
	in.Labels = map[string]string{FingerprintLabel: fp}
	in.WaitStrategy, in.Timeout, in.WaitForJobs = i.waitOptions(r)
	// Not RunWithContext: when its context ends helm returns but goes on installing in the
	// background, with the release pending.
	if _, err := in.Run(ch, values); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

func (i *Installer) upgrade(cfg *action.Configuration, r Release, ch *chart.Chart, values map[string]any, fp string) error {
	up := action.NewUpgrade(cfg)
	up.Namespace = r.Namespace
	up.ResetValues = true // the values given, never an earlier revision's
	up.MaxHistory = i.maxHistory
	up.Labels = map[string]string{FingerprintLabel: fp}
	up.WaitStrategy, up.Timeout, up.WaitForJobs = i.waitOptions(r)
	if _, err := up.Run(r.Name, ch, values); err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	return nil
}

func (i *Installer) namespaceMissing(ctx context.Context, namespace string) (bool, error) {
	_, err := i.clientset.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	return false, nil
}

// interrupted says whether a last revision in state s is one a stopped process left: an
// operation that never ended. Deployed, failed, superseded and uninstalled revisions ended.
func interrupted(s releasecommon.Status) bool {
	switch s {
	case releasecommon.StatusDeployed, releasecommon.StatusFailed, releasecommon.StatusSuperseded, releasecommon.StatusUninstalled:
		return false
	}
	return true
}

// markInterrupted records the interrupted revision as failed, which lets helm upgrade over it.
func (i *Installer) markInterrupted(cfg *action.Configuration, rel *release.Release) error {
	was := rel.Info.Status
	rel.SetStatus(releasecommon.StatusFailed, fmt.Sprintf(
		"interrupted: revision %d was left %s by a process that stopped before finishing it; marked failed by the BPA, which applies the release again",
		rel.Version, was))
	if err := cfg.Releases.Update(rel); err != nil {
		return fmt.Errorf("mark revision %d (%s, interrupted) failed: %w", rel.Version, was, err)
	}
	i.log.Info("chart release interrupted, marked failed", "release", rel.Namespace+"/"+rel.Name, "revision", rel.Version, "was", was)
	return nil
}

// history is a release's revisions in helm's storage, in any order.
type history []*release.Release

func readHistory(cfg *action.Configuration, name string) (history, error) {
	revs, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read helm history: %w", err)
	}
	h := make(history, 0, len(revs))
	for _, rv := range revs {
		rel, ok := rv.(*release.Release)
		if !ok {
			return nil, fmt.Errorf("read helm history: a revision of type %T", rv)
		}
		if rel.Info == nil {
			return nil, fmt.Errorf("read helm history: revision %d has no info", rel.Version)
		}
		h = append(h, rel)
	}
	return h, nil
}

func (h history) last() *release.Release {
	var last *release.Release
	for _, r := range h {
		if last == nil || r.Version > last.Version {
			last = r
		}
	}
	return last
}

func (h history) status(name, namespace string) Status {
	st := Status{Name: name, Namespace: namespace, State: StateAbsent}
	for _, r := range h {
		if r.Info.Status == releasecommon.StatusDeployed && r.Version > st.DeployedRevision {
			st.DeployedRevision = r.Version
		}
	}
	last := h.last()
	if last == nil {
		return st
	}
	st.Revision = last.Version
	st.State = State(last.Info.Status)
	st.Message = truncate(last.Info.Description, MaxMessage)
	st.Updated = last.Info.LastDeployed
	st.Fingerprint = last.Labels[FingerprintLabel]
	if last.Chart != nil && last.Chart.Metadata != nil {
		st.Chart, st.Version = last.Chart.Metadata.Name, last.Chart.Metadata.Version
	}
	return st
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// warningLogger passes the API server's warnings (deprecated APIs, unknown fields) to the log.
type warningLogger struct{ log logr.Logger }

func (w warningLogger) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		w.log.Info("warning from the application cluster's API server", "warning", text)
	}
}
