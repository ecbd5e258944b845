package applicationcluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

// ChartInstaller installs charts into one application cluster (a *charts.Installer).
type ChartInstaller interface {
	Apply(ctx context.Context, r charts.Release) (charts.Status, error)
}

// Charts makes the ChartInstaller of the application cluster cfg reaches.
type Charts func(cfg *rest.Config) (ChartInstaller, error)

// ValuesConfigMap is the optional ConfigMap, beside the ApplicationCluster, holding the site's
// values of its charts: one key per chart name, a YAML document each.
func ValuesConfigMap(cluster string) string { return cluster + "-chart-values" }

// charts installs or upgrades each of spec.charts as a release named after the chart, in the
// namespace its edgefleet.io/namespace annotation names (else the chart's name), with the
// site's values and the facts of the cluster (global.edgefleet.cluster, over the site's), and
// reports each release. Every chart is tried; the first error is returned.
func (w *work) charts(ctx context.Context, cfg *rest.Config, spec cluster.Spec) error {
	if len(w.ac.Spec.Charts) == 0 {
		w.st.Charts = nil
		return nil
	}
	values, err := w.values(ctx)
	if err != nil {
		return err
	}
	facts, err := spec.ClusterValues()
	if err != nil {
		return fmt.Errorf("charts of cluster %s: %w", w.ac.Name, err)
	}
	inst, err := w.r.Charts(cfg)
	if err != nil {
		return fmt.Errorf("charts of cluster %s: %w", w.ac.Name, err)
	}
	w.progress(ctx, sitev1.BootstrapInstalling, fmt.Sprintf("installing %d charts", len(w.ac.Spec.Charts)))
	var reports []sitev1.ChartRelease
	var first error
	for _, ref := range w.ac.Spec.Charts {
		report, err := w.chart(ctx, inst, ref, values, facts)
		reports = append(reports, report)
		if err != nil && first == nil {
			first = err
		}
	}
	slices.SortFunc(reports, func(a, b sitev1.ChartRelease) int { return cmp.Compare(a.Name, b.Name) })
	w.st.Charts = reports
	return first
}

// chart installs one chart.
func (w *work) chart(ctx context.Context, inst ChartInstaller, ref sitev1.ArtifactRef, values map[string]map[string]any, facts packages.ClusterValues) (sitev1.ChartRelease, error) {
	report := sitev1.ChartRelease{Name: ref.SHA256[:12], State: string(charts.StateAbsent)}
	url := w.cachedURL(ref.SHA256)
	if url == "" {
		report.Message = "not cached at the site yet"
		return report, fmt.Errorf("chart %s (%s) is not cached at the site yet", ref.SHA256, ref.Name)
	}
	archive, err := w.r.cache.chart(ctx, url, ref.SHA256)
	if err != nil {
		report.Message = err.Error()
		return report, err
	}
	meta, err := charts.Describe(archive)
	if err != nil {
		report.Message = err.Error()
		return report, fmt.Errorf("chart %s: %w", ref.SHA256, err)
	}
	report.Name, report.Namespace = meta.Name, meta.Namespace
	st, err := inst.Apply(ctx, charts.Release{Name: meta.Name, Namespace: meta.Namespace, Chart: archive, Values: charts.WithCluster(values[meta.Name], facts)})
	report.Version, report.Revision, report.State, report.Message = st.Version, int32(st.Revision), string(st.State), st.Message
	report.PodsReady, report.PodsDesired = st.Pods.Ready, st.Pods.Desired
	if err != nil {
		report.Message = err.Error()
		return report, err
	}
	if len(st.Pods.NotReady) > 0 {
		report.Message += "; not ready: " + strings.Join(st.Pods.NotReady, ", ")
	}
	return report, nil
}

// values reads the site's chart values, by chart name.
func (w *work) values(ctx context.Context) (map[string]map[string]any, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: w.ac.Namespace, Name: ValuesConfigMap(w.ac.Name)}
	if err := w.r.Client.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("chart values in ConfigMap %s: %w", key, err)
	}
	out := map[string]map[string]any{}
	for chart, doc := range cm.Data {
		v := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return nil, fmt.Errorf("ConfigMap %s, key %s: the values are not a YAML map: %w", key, chart, err)
		}
		out[chart] = v
	}
	return out, nil
}
