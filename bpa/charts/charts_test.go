package charts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// cp is the application cluster: a real kube-apiserver and etcd, without scheduler or kubelets.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(applyInChild())
	}
	os.Exit(run(m))
}

// decoyKubeconfig points at no API server, in a namespace no test uses: were the installer to
// load a kubeconfig from $KUBECONFIG instead of using its rest.Config, the tests would fail.
const decoyKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: decoy, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: decoy, user: {token: decoy}}]
contexts: [{name: decoy, context: {cluster: decoy, user: decoy, namespace: decoy}}]
current-context: decoy
`

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "charts-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	decoy := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(decoy, []byte(decoyKubeconfig), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Setenv("KUBECONFIG", decoy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return controlplane.Run(m, controlplane.Options{Name: "application-cluster"}, func(_ context.Context, c *controlplane.ControlPlane) error {
		cp = c
		return nil
	})
}

func newInstaller(t *testing.T) *charts.Installer {
	t.Helper()
	i, err := charts.New(cp.Config, charts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// missingNamespace is a namespace name that does not exist yet; it is deleted after the test
// if something made it.
func missingNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("kpm-%08x", rand.Uint32())
	t.Cleanup(func() {
		obj := &corev1.Namespace{}
		obj.Name = ns
		if err := cp.Client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return ns
}

func namespaceExists(t *testing.T, ns string) bool {
	t.Helper()
	err := cp.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// revisions reads helm's storage on the API server: the state (status label) of each revision
// of the release, by revision.
func revisions(t *testing.T, ns, name string) map[int]string {
	t.Helper()
	var list corev1.SecretList
	if err := cp.Client.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	revs := map[int]string{}
	for _, s := range list.Items {
		if s.Type != "helm.sh/release.v1" {
			t.Errorf("secret %s has type %s, want helm.sh/release.v1", s.Name, s.Type)
		}
		v, err := strconv.Atoi(s.Labels["version"])
		if err != nil {
			t.Fatalf("secret %s: version label %q", s.Name, s.Labels["version"])
		}
		if want := fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, v); s.Name != want {
			t.Errorf("secret %s, want %s", s.Name, want)
		}
		revs[v] = s.Labels["status"]
	}
	return revs
}

// hello is what the hello chart made in the cluster.
type hello struct {
	greeting, chartLabel string
	replicas             int32
	serviceAccount       bool
}

func readHello(t *testing.T, ns, release string) (hello, bool) {
	t.Helper()
	name := release + "-hello"
	var h hello
	var cm corev1.ConfigMap
	err := cp.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
	if apierrors.IsNotFound(err) {
		return h, false
	}
	if err != nil {
		t.Fatal(err)
	}
	h.greeting, h.chartLabel = cm.Data["greeting"], cm.Labels["helm.sh/chart"]
	if cm.Annotations["meta.helm.sh/release-name"] != release || cm.Annotations["meta.helm.sh/release-namespace"] != ns {
		t.Errorf("ConfigMap %s/%s has release annotations %v", ns, name, cm.Annotations)
	}
	var d appsv1.Deployment
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatalf("Deployment %s/%s: %v", ns, name, err)
	}
	if d.Spec.Replicas != nil {
		h.replicas = *d.Spec.Replicas
	}
	if got := d.Spec.Template.Spec.ServiceAccountName; got != name {
		t.Errorf("Deployment %s/%s runs as %q, want %q", ns, name, got, name)
	}
	err = cp.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ServiceAccount{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	h.serviceAccount = err == nil
	return h, true
}

// brokenYAML adds a template that renders, but not to YAML.
func brokenYAML(t *testing.T) func(dir string) {
	return func(dir string) {
		writeTemplate(t, dir, "broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata: [not closed\n")
	}
}

func writeTemplate(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("Apply succeeded, want an error with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// TestApplyLifecycle takes one release through install, no-op applies, upgrades by values and
// by chart version, a chart that does not render, values the API server refuses, and repairs.
// Each step starts from the one before.
func TestApplyLifecycle(t *testing.T) {
	inst := newInstaller(t)
	ns := missingNamespace(t)
	const name = "web"
	v010 := builders.BuildChart(t, "hello", "", nil)
	v020 := builders.BuildChart(t, "hello", "0.2.0", nil)
	broken := builders.BuildChart(t, "hello", "0.3.0", brokenYAML(t))
	bonjour := map[string]any{"greeting": "bonjour", "replicas": 2}

	steps := []struct {
		name     string
		chart    builders.BuiltChart
		values   map[string]any
		wantErr  []string
		wantRev  int    // last revision
		wantDep  int    // deployed revision
		want     string // state of the last revision
		wantMsg  string
		wantObjs hello
	}{
		{name: "install into a missing namespace", chart: v010,
			wantRev: 1, wantDep: 1, want: "deployed", wantMsg: "Install complete",
			wantObjs: hello{greeting: "hello", chartLabel: "hello-0.1.0", replicas: 1, serviceAccount: true}},
		{name: "same chart and values do nothing", chart: v010,
			wantRev: 1, wantDep: 1, want: "deployed", wantMsg: "Install complete",
			wantObjs: hello{greeting: "hello", chartLabel: "hello-0.1.0", replicas: 1, serviceAccount: true}},
		{name: "rebuilt archive and empty values do nothing", chart: builders.BuildChart(t, "hello", "", nil), values: map[string]any{},
			wantRev: 1, wantDep: 1, want: "deployed", wantMsg: "Install complete",
			wantObjs: hello{greeting: "hello", chartLabel: "hello-0.1.0", replicas: 1, serviceAccount: true}},
		{name: "other values upgrade", chart: v010, values: bonjour,
			wantRev: 2, wantDep: 2, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.1.0", replicas: 2, serviceAccount: true}},
		{name: "the same values in other Go types do nothing", chart: v010, values: map[string]any{"replicas": 2.0, "greeting": "bonjour"},
			wantRev: 2, wantDep: 2, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.1.0", replicas: 2, serviceAccount: true}},
		{name: "a new chart version upgrades", chart: v020, values: bonjour,
			wantRev: 3, wantDep: 3, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.2.0", replicas: 2, serviceAccount: true}},
		{name: "a chart that does not render changes nothing", chart: broken, values: map[string]any{"greeting": "never"},
			wantErr: []string{ns + "/" + name, "hello-0.3.0", "YAML parse error on hello/templates/broken.yaml"},
			wantRev: 3, wantDep: 3, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.2.0", replicas: 2, serviceAccount: true}},
		{name: "values the API server refuses fail the new revision", chart: v020, values: map[string]any{"greeting": "bonjour", "replicas": -1},
			wantErr: []string{ns + "/" + name, "hello-0.2.0", "spec.replicas", "must be greater than or equal to 0"},
			wantRev: 4, wantDep: 3, want: "failed", wantMsg: "spec.replicas",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.2.0", replicas: 2, serviceAccount: true}},
		{name: "good values after the failure upgrade again", chart: v020, values: bonjour,
			wantRev: 5, wantDep: 5, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "bonjour", chartLabel: "hello-0.2.0", replicas: 2, serviceAccount: true}},
		{name: "no values are the chart's defaults, not the last revision's", chart: v020,
			wantRev: 6, wantDep: 6, want: "deployed", wantMsg: "Upgrade complete",
			wantObjs: hello{greeting: "hello", chartLabel: "hello-0.2.0", replicas: 1, serviceAccount: true}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			r := charts.Release{Name: name, Namespace: ns, Chart: s.chart.Archive, Values: s.values}
			st, err := inst.Apply(t.Context(), r)
			checkErr(t, err, s.wantErr)
			got, err := inst.Status(t.Context(), name, ns)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st, got) {
				t.Errorf("Apply returned %+v, Status reads %+v", st, got)
			}
			if got.Revision != s.wantRev || got.DeployedRevision != s.wantDep || string(got.State) != s.want {
				t.Errorf("status revision %d (deployed %d) %s, want %d (deployed %d) %s: %s",
					got.Revision, got.DeployedRevision, got.State, s.wantRev, s.wantDep, s.want, got.Message)
			}
			if !strings.Contains(got.Message, s.wantMsg) {
				t.Errorf("status message %q lacks %q", got.Message, s.wantMsg)
			}
			if got.Name != name || got.Namespace != ns || got.Chart != "hello" || got.Updated.IsZero() {
				t.Errorf("status %+v", got)
			}
			revs := revisions(t, ns, name)
			if len(revs) != s.wantRev || revs[s.wantRev] != s.want || revs[s.wantDep] != "deployed" {
				t.Errorf("helm storage holds revisions %v, want 1..%d, %d %s, %d deployed", revs, s.wantRev, s.wantRev, s.want, s.wantDep)
			}
			objs, ok := readHello(t, ns, name)
			if !ok || objs != s.wantObjs {
				t.Errorf("the chart's objects: %+v (there: %v), want %+v", objs, ok, s.wantObjs)
			}
		}) {
			t.FailNow() // the next steps start from this one
		}
	}

	// The deployed revision's fingerprint is its chart's and values'.
	st, err := inst.Status(t.Context(), name, ns)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := charts.Fingerprint(v020.Archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fingerprint != fp || st.Version != "0.2.0" {
		t.Errorf("status fingerprint %q version %q, want %q 0.2.0", st.Fingerprint, st.Version, fp)
	}
}

// TestBadInputChangesNothing: archives that are not charts and charts that do not render give an
// error naming the release, and leave no namespace, no revision and no object behind.
func TestBadInputChangesNothing(t *testing.T) {
	tests := []struct {
		name    string
		archive func(t *testing.T) []byte
		wantErr []string
	}{
		{"not gzip", func(*testing.T) []byte { return []byte("this is not a chart") }, []string{"is not a chart"}},
		{"a tarball without Chart.yaml", func(t *testing.T) []byte { return tarball(t, map[string]string{"hello/values.yaml": "a: 1\n"}) },
			[]string{"is not a chart", "Chart.yaml"}},
		{"a chart with invalid YAML", func(t *testing.T) []byte { return builders.BuildChart(t, "hello", "", brokenYAML(t)).Archive },
			[]string{"hello-0.1.0", "YAML parse error on hello/templates/broken.yaml"}},
		{"a template that does not parse", func(t *testing.T) []byte {
			return builders.BuildChart(t, "hello", "", func(dir string) { writeTemplate(t, dir, "bad.yaml", "{{ .Values.greeting \n") }).Archive
		}, []string{"hello-0.1.0", "parse error", "bad.yaml"}},
		{"an object of a kind the cluster does not have", func(t *testing.T) []byte {
			return builders.BuildChart(t, "hello", "", func(dir string) {
				writeTemplate(t, dir, "widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
			}).Archive
		}, []string{"hello-0.1.0", "Widget"}},
	}
	inst := newInstaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := missingNamespace(t)
			const name = "bad"
			_, err := inst.Apply(t.Context(), charts.Release{Name: name, Namespace: ns, Chart: tt.archive(t)})
			checkErr(t, err, append(tt.wantErr, ns+"/"+name))
			if namespaceExists(t, ns) {
				t.Errorf("namespace %s was created", ns)
			}
			st, err := inst.Status(t.Context(), name, ns)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != charts.StateAbsent || st.Revision != 0 {
				t.Errorf("status %+v, want absent", st)
			}
		})
	}
}

// TestFailedFirstInstall: a first install the API server refuses leaves revision 1 failed with
// the reason; the next Apply with good values deploys.
func TestFailedFirstInstall(t *testing.T) {
	inst := newInstaller(t)
	ns := missingNamespace(t)
	const name = "first"
	chart := builders.BuildChart(t, "hello", "", nil)

	st, err := inst.Apply(t.Context(), charts.Release{Name: name, Namespace: ns, Chart: chart.Archive, Values: map[string]any{"replicas": -1}})
	checkErr(t, err, []string{ns + "/" + name, "hello-0.1.0", "spec.replicas"})
	if st.State != charts.StateFailed || st.Revision != 1 || st.DeployedRevision != 0 || !strings.Contains(st.Message, "must be greater than or equal to 0") {
		t.Errorf("status %+v, want revision 1 failed with the API server's reason", st)
	}
	if revs := revisions(t, ns, name); len(revs) != 1 || revs[1] != "failed" {
		t.Errorf("helm storage holds %v, want revision 1 failed", revs)
	}

	st, err = inst.Apply(t.Context(), charts.Release{Name: name, Namespace: ns, Chart: chart.Archive, Values: map[string]any{"greeting": "again"}})
	checkErr(t, err, nil)
	if st.State != charts.StateDeployed || st.Revision != 2 || st.DeployedRevision != 2 {
		t.Errorf("status %+v, want revision 2 deployed", st)
	}
	// Helm's upgrade over a release that never deployed supersedes the failed revision.
	if revs := revisions(t, ns, name); len(revs) != 2 || revs[1] != "superseded" || revs[2] != "deployed" {
		t.Errorf("helm storage holds %v, want 1 superseded, 2 deployed", revs)
	}
	want := hello{greeting: "again", chartLabel: "hello-0.1.0", replicas: 1, serviceAccount: true}
	if objs, ok := readHello(t, ns, name); !ok || objs != want {
		t.Errorf("the chart's objects: %+v (there: %v), want %+v", objs, ok, want)
	}
}

func TestApplyRefusesBadReleases(t *testing.T) {
	chart := builders.BuildChart(t, "hello", "", nil).Archive
	tests := []struct {
		name    string
		r       charts.Release
		wantErr string
	}{
		{"no name", charts.Release{Namespace: "kpm-x", Chart: chart}, `name ""`},
		{"name with capitals", charts.Release{Name: "Web", Namespace: "kpm-x", Chart: chart}, `name "Web"`},
		{"name too long", charts.Release{Name: strings.Repeat("a", 54), Namespace: "kpm-x", Chart: chart}, "name"},
		{"no namespace", charts.Release{Name: "web", Chart: chart}, `namespace ""`},
		{"bad namespace", charts.Release{Name: "web", Namespace: "kpm_x", Chart: chart}, `namespace "kpm_x"`},
		{"no chart", charts.Release{Name: "web", Namespace: "kpm-x"}, "no chart archive"},
		{"values not JSON", charts.Release{Name: "web", Namespace: "kpm-x", Chart: chart, Values: map[string]any{"f": func() {}}}, "values are not JSON"},
		{"negative wait", charts.Release{Name: "web", Namespace: "kpm-x", Chart: chart, Wait: -1}, "wait"},
	}
	inst := newInstaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := inst.Apply(t.Context(), tt.r)
			checkErr(t, err, []string{"chart release " + tt.r.Namespace + "/" + tt.r.Name, tt.wantErr})
			if namespaceExists(t, "kpm-x") {
				t.Error("namespace kpm-x was created")
			}
		})
	}
}

// TestExistingNamespaceUntouched: installing into a namespace that exists does not change it
// (helm's own namespace creation would apply a label to it).
func TestExistingNamespaceUntouched(t *testing.T) {
	inst := newInstaller(t)
	ns := cp.Namespace(t)
	var before corev1.Namespace
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &before); err != nil {
		t.Fatal(err)
	}
	chart := builders.BuildChart(t, "hello", "", nil)
	if _, err := inst.Apply(t.Context(), charts.Release{Name: "web", Namespace: ns, Chart: chart.Archive}); err != nil {
		t.Fatal(err)
	}
	if _, ok := readHello(t, ns, "web"); !ok {
		t.Fatal("the chart's ConfigMap is not there")
	}
	var after corev1.Namespace
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("namespace %s changed: labels %v, managed fields %v", ns, after.Labels, after.ManagedFields)
	}
}

// TestWait: with Release.Wait, Apply waits for the objects to be ready, which a Deployment never
// is in a cluster without controllers and kubelets: the revision fails once Wait is over. Without
// Wait, the same release deploys at once.
func TestWait(t *testing.T) {
	inst := newInstaller(t)
	chart := builders.BuildChart(t, "hello", "", nil)
	tests := []struct {
		name      string
		wait      time.Duration
		wantErr   []string
		wantState charts.State
	}{
		{"no wait", 0, nil, charts.StateDeployed},
		{"wait", 2 * time.Second, []string{"/web", "hello-0.1.0", "web-hello not ready", "context deadline exceeded"}, charts.StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			start := time.Now()
			st, err := inst.Apply(t.Context(), charts.Release{Name: "web", Namespace: ns, Chart: chart.Archive, Wait: tt.wait})
			took := time.Since(start)
			checkErr(t, err, tt.wantErr)
			if st.State != tt.wantState || st.Revision != 1 {
				t.Errorf("status %+v, want revision 1 %s", st, tt.wantState)
			}
			if took < tt.wait {
				t.Errorf("Apply took %v, less than the wait %v", took, tt.wait)
			}
			t.Logf("Apply took %v: %s", took, st.Message)
		})
	}
}

// TestStatusCountsPods: a deployed release reports its workloads' pods, not only that helm
// deployed it — none ready in a cluster without kubelets, all once the Deployment says so.
func TestStatusCountsPods(t *testing.T) {
	inst := newInstaller(t)
	ns := missingNamespace(t)
	st, err := inst.Apply(t.Context(), charts.Release{Name: "pods", Namespace: ns, Chart: builders.BuildChart(t, "hello", "", nil).Archive, Values: map[string]any{"replicas": 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := charts.Pods{Ready: 0, Desired: 3, NotReady: []string{"Deployment " + ns + "/pods-hello: 0 of 3 ready"}}
	if st.State != charts.StateDeployed || !reflect.DeepEqual(st.Pods, want) {
		t.Fatalf("status %s, pods %+v; want deployed, pods %+v", st.State, st.Pods, want)
	}
	d := &appsv1.Deployment{}
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "pods-hello"}, d); err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas, d.Status.ReadyReplicas = 3, 3 // as its controller and kubelets would
	if err := cp.Client.Status().Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	st, err = inst.Status(t.Context(), "pods", ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := (charts.Pods{Ready: 3, Desired: 3}); !reflect.DeepEqual(st.Pods, want) {
		t.Errorf("pods %+v, want %+v", st.Pods, want)
	}
	// The steady state (an Apply with nothing to do) reports them too.
	st, err = inst.Apply(t.Context(), charts.Release{Name: "pods", Namespace: ns, Chart: builders.BuildChart(t, "hello", "", nil).Archive, Values: map[string]any{"replicas": 3}})
	if err != nil || st.Pods.Ready != 3 {
		t.Errorf("apply again: pods %+v (%v), want 3 ready", st.Pods, err)
	}
}
