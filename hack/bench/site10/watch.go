package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
)

// Milestones of the site's install, in the order they are expected.
const (
	msPushed      = "cluster pushed to the site (ApplicationCluster)"
	msCached      = "artifacts cached at the site (ArtifactSet Ready)"
	msFirstBooted = "first host booted"
	msProvisioned = "all hosts provisioned (Metal3)"
	msBooted      = "all hosts booted"
	msSSH         = "all hosts answer SSH"
	msInstalling  = "BPA installing"
	msCharts      = "BPA installing charts: every host's packages installed"
	msFirstReady  = "first node Ready"
	msNodesReady  = "all nodes Ready"
	msInstalled   = "BPA reports Installed on every host, every chart's pods ready"
	msServing     = "application serving"
	msSiteReports = "global Site reports every node Ready"
)

// sitePoll is how often the watcher looks.
const sitePoll = 250 * time.Millisecond

// siteReportGrace is how long the watcher waits, after the end, for the global Site to report
// the cluster (its heartbeat is 10 s).
const siteReportGrace = time.Minute

// watcher follows the site's install from t0 and records its milestones in res.
type watcher struct {
	fleet *testfleet.Fleet
	// site is a client of the site cluster.
	site  client.Client
	hosts *testhosts.HostNet
	// adminKubeconfig reads the application cluster's admin kubeconfig where the BPA keeps it,
	// from the start of its install.
	adminKubeconfig func(context.Context) ([]byte, error)
	res             *siteResult
	t0              time.Time

	seen map[string]bool
	// sshUp receives, from a goroutine per booted host, when the host answered SSH.
	sshUp chan sshAnswer
	// app is a client of the application cluster, once its admin kubeconfig exists.
	app kubernetes.Interface
	// pending says, per milestone not reached, what was last seen instead.
	pending map[string]string
}

// follow polls until every node is Ready and the application serves (then gives the global Site
// siteReportGrace to report it), or until timeout, when the error names what did not come up.
func (w *watcher) follow(ctx context.Context, timeout time.Duration) error {
	w.seen = map[string]bool{}
	w.res.booted, w.res.ssh, w.res.ready = map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	w.sshUp = make(chan sshAnswer, len(w.hosts.Hosts))
	ctx, cancel := context.WithDeadline(ctx, w.t0.Add(timeout))
	defer cancel()
	for {
		if err := w.observe(ctx); err != nil {
			return err
		}
		if w.res.total == 0 && w.seen[msNodesReady] && w.seen[msServing] {
			w.res.total = time.Since(w.t0)
			logf("done: %d nodes Ready and the application serving %s after spec.cluster was set", controlPlanes+workers, w.res.total.Round(time.Millisecond))
			if err := w.measureHosts(); err != nil {
				return err
			}
		}
		if w.res.total > 0 && (w.seen[msSiteReports] || time.Since(w.t0) > w.res.total+siteReportGrace) {
			return nil
		}
		select {
		case <-ctx.Done():
			if w.res.total > 0 {
				return nil // only the Site's report is missing
			}
			return fmt.Errorf("site %s: not every node Ready and the application serving %s after spec.cluster was set (%w); not reached: %s",
				siteName, time.Since(w.t0).Round(time.Second), ctx.Err(), w.notReached())
		case <-time.After(sitePoll):
		}
	}
}

// measureHosts reads each host's memory and the CPU time it used since it booted.
func (w *watcher) measureHosts() error {
	for i, h := range w.hosts.Hosts {
		usage, rss, err := h.Memory()
		if err != nil {
			return err
		}
		cpu, err := h.CPU()
		if err != nil {
			return err
		}
		w.res.hosts = append(w.res.hosts, hostUsage{name: h.Name, controlPlane: i < controlPlanes, usage: usage, resident: rss, cpu: cpu})
	}
	return nil
}

// notReached lists the milestones not reached, each with what was last seen.
func (w *watcher) notReached() string {
	var out []string
	for _, m := range []string{msPushed, msCached, msProvisioned, msBooted, msSSH, msInstalling, msCharts, msNodesReady, msInstalled, msServing} {
		if !w.seen[m] {
			out = append(out, fmt.Sprintf("%s (%s)", m, w.pending[m]))
		}
	}
	return strings.Join(out, "; ")
}

func (w *watcher) mark(name string) {
	if w.seen[name] {
		return
	}
	w.seen[name] = true
	at := time.Since(w.t0)
	w.res.milestones = append(w.res.milestones, milestone{name: name, at: at})
	logf("%8s  %s", at.Round(100*time.Millisecond), name)
}

// observe looks once at the site, the hosts, the application cluster and the global Site. Errors
// reading them are what is pending, not failures: the application cluster's API server comes up
// during the install. Only the context's end stops it.
func (w *watcher) observe(ctx context.Context) error {
	w.pending = map[string]string{}
	key := client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: siteName}

	ac := &sitev1.ApplicationCluster{}
	if err := w.site.Get(ctx, key, ac); err != nil {
		w.pending[msPushed] = err.Error()
	} else {
		w.mark(msPushed)
		w.observeCluster(ac)
	}
	set := &sitev1.ArtifactSet{}
	if err := w.site.Get(ctx, key, set); err != nil {
		w.pending[msCached] = err.Error()
	} else if c := meta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
		w.mark(msCached)
	} else if c != nil {
		w.pending[msCached] = c.Reason + ": " + c.Message
	}
	w.observeHosts(ctx)
	w.observeApplication(ctx)

	s := &fleetv1.Site{}
	if err := w.fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: siteNamespace, Name: siteName}, s); err == nil && s.Status.Cluster != nil {
		c := s.Status.Cluster
		if c.ControlPlane == (sitev1.NodeCounts{Ready: controlPlanes, Total: controlPlanes}) && c.Workers == (sitev1.NodeCounts{Ready: workers, Total: workers}) {
			w.mark(msSiteReports)
		}
	}
	return ctx.Err()
}

// observeCluster reads the ApplicationCluster's status: the BPA's phase.
func (w *watcher) observeCluster(ac *sitev1.ApplicationCluster) {
	b := ac.Status.Bootstrap
	if b == nil {
		w.pending[msInstalling] = "no report from the BPA yet"
		w.pending[msCharts], w.pending[msInstalled] = w.pending[msInstalling], w.pending[msInstalling]
		return
	}
	switch b.Phase {
	case sitev1.BootstrapInstalling, sitev1.BootstrapInstalled:
		w.mark(msInstalling)
	default:
		w.pending[msInstalling] = fmt.Sprintf("BPA %s: %s", b.Phase, b.Message)
	}
	// The BPA's progress message once a pass has installed the packages on every host it took
	// ("installing N charts", bpa/reconcilers/applicationcluster).
	if b.Phase == sitev1.BootstrapInstalling && strings.HasPrefix(b.Message, "installing ") && strings.HasSuffix(b.Message, " charts") {
		w.mark(msCharts)
	} else {
		w.pending[msCharts] = fmt.Sprintf("BPA %s: %s", b.Phase, b.Message)
	}
	chartsReady := !slices.ContainsFunc(b.Charts, func(c sitev1.ChartRelease) bool { return c.PodsReady < c.PodsDesired })
	if b.Phase == sitev1.BootstrapInstalled && b.Nodes == controlPlanes+workers && chartsReady {
		w.mark(msInstalled)
	} else {
		w.pending[msInstalled] = fmt.Sprintf("BPA %s: %s", b.Phase, b.Message)
	}
}

// sshAnswer is when a host answered SSH after it booted, or why it did not.
type sshAnswer struct {
	host string
	at   time.Duration
	err  error
}

// observeHosts reads the BareMetalHosts' states, which hosts run and which answer SSH.
func (w *watcher) observeHosts(ctx context.Context) {
	for drained := false; !drained; {
		select {
		case a := <-w.sshUp:
			if a.err != nil {
				logf("%s", a.err)
				continue
			}
			w.res.ssh[a.host] = a.at
		default:
			drained = true
		}
	}
	var notProvisioned, off, silent []string
	for _, h := range w.hosts.Hosts {
		bmh := &metal3api.BareMetalHost{}
		if err := w.site.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: h.Name}, bmh); err != nil {
			notProvisioned = append(notProvisioned, h.Name+": "+err.Error())
		} else if st := bmh.Status.Provisioning.State; st != metal3api.StateProvisioned {
			notProvisioned = append(notProvisioned, fmt.Sprintf("%s: %s", h.Name, cmp.Or(string(st), "no state")))
		}
		if _, ok := w.res.ssh[h.Name]; !ok {
			silent = append(silent, h.Name)
		}
		if !h.Running() {
			off = append(off, h.Name)
			continue
		}
		if _, ok := w.res.booted[h.Name]; !ok {
			w.res.booted[h.Name] = time.Since(w.t0)
			w.mark(msFirstBooted)
			go func() {
				_, err := h.WaitSSH(ctx)
				w.sshUp <- sshAnswer{host: h.Name, at: time.Since(w.t0), err: err}
			}()
		}
	}
	if len(silent) == 0 {
		w.mark(msSSH)
	} else {
		w.pending[msSSH] = "no SSH banner yet: " + strings.Join(silent, ", ")
	}
	if len(notProvisioned) == 0 {
		w.mark(msProvisioned)
	} else {
		w.pending[msProvisioned] = "BareMetalHosts " + strings.Join(notProvisioned, ", ")
	}
	if len(off) == 0 {
		w.mark(msBooted)
	} else {
		w.pending[msBooted] = "not booted: " + strings.Join(off, ", ")
	}
}

// observeApplication reads the application cluster's nodes and whether the test application
// serves.
func (w *watcher) observeApplication(ctx context.Context) {
	w.pending[msNodesReady] = "no application cluster yet (no admin kubeconfig in the secret store)"
	w.pending[msServing] = w.pending[msNodesReady]
	if w.app == nil {
		kc, err := w.adminKubeconfig(ctx)
		if err != nil {
			return
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			w.pending[msNodesReady] = err.Error()
			return
		}
		cfg.Timeout = 5 * time.Second
		if w.app, err = kubernetes.NewForConfig(cfg); err != nil {
			w.pending[msNodesReady] = err.Error()
			return
		}
	}
	nodes, err := w.app.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		w.pending[msNodesReady] = "list nodes: " + err.Error()
	} else {
		for _, n := range nodes.Items {
			if _, ok := w.res.ready[n.Name]; !ok && nodeReady(&n) {
				w.res.ready[n.Name] = time.Since(w.t0)
				w.mark(msFirstReady)
			}
		}
		var notReady []string
		for _, h := range w.hosts.Hosts {
			if _, ok := w.res.ready[h.Name]; !ok {
				notReady = append(notReady, h.Name)
			}
		}
		if len(notReady) == 0 {
			w.mark(msNodesReady)
		} else {
			w.pending[msNodesReady] = fmt.Sprintf("%d of %d nodes registered; never Ready yet: %s", len(nodes.Items), len(w.hosts.Hosts), strings.Join(notReady, ", "))
		}
	}
	if !w.seen[msServing] {
		w.pending[msServing] = w.serving(ctx)
	}
}

// serving checks the test application: every Deployment of its namespace has all its replicas
// ready, and each of its ClusterIP Services answers HTTP from a host, a worker (the hosts reach
// ClusterIPs through their kube-proxy). It marks msServing and returns "" when so, else what is
// missing.
func (w *watcher) serving(ctx context.Context) string {
	ns := appChart
	deps, err := w.app.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	switch {
	case err != nil:
		return "list deployments: " + err.Error()
	case len(deps.Items) == 0:
		return "no Deployment in namespace " + ns + " yet"
	}
	for _, d := range deps.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ReadyReplicas < want {
			return fmt.Sprintf("Deployment %s/%s: %d of %d replicas ready", ns, d.Name, d.Status.ReadyReplicas, want)
		}
	}
	svcs, err := w.app.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "list services: " + err.Error()
	}
	var answers []string
	for _, s := range svcs.Items {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		url := fmt.Sprintf("http://%s:%d/", s.Spec.ClusterIP, s.Spec.Ports[0].Port)
		host := w.hosts.Hosts[len(w.hosts.Hosts)-1]
		out, err := host.Exec(ctx, "curl", "-fsS", "--max-time", "2", url)
		if err != nil {
			return fmt.Sprintf("Service %s/%s (%s) from %s: %v", ns, s.Name, url, host.Name, err)
		}
		answers = append(answers, fmt.Sprintf("%s from %s: %s", url, host.Name, strings.TrimSpace(string(out))))
	}
	if len(answers) == 0 {
		return "no Service in namespace " + ns + " yet"
	}
	w.res.serving = strings.Join(answers, "; ")
	w.mark(msServing)
	return ""
}

func nodeReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}
