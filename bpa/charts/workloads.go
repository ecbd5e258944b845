package charts

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// Pods counts the pods a deployed release's workloads want and have ready: what says the
// chart runs, where "deployed" only says its objects were accepted.
type Pods struct {
	// Ready and Desired sum over the release's Deployments, StatefulSets (replicas) and
	// DaemonSets (scheduled pods).
	Ready, Desired int32
	// NotReady names the workloads short of pods, as "Deployment ns/name: 1 of 3 ready" (at
	// most MaxNotReady; a workload missing from the cluster counts as none ready).
	NotReady []string
}

// MaxNotReady bounds Pods.NotReady.
const MaxNotReady = 5

// workload is an apps/v1 object a release manifest holds.
type workload struct {
	kind, namespace, name string
}

// workloadsOf lists the Deployments, StatefulSets and DaemonSets of rel's manifest, sorted;
// those without a namespace are in the release's.
func workloadsOf(rel *release.Release) ([]workload, error) {
	var out []workload
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("read the manifest of revision %d: %w", rel.Version, err)
		}
		if head.APIVersion != "apps/v1" || !slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet"}, head.Kind) {
			continue
		}
		ns := head.Metadata.Namespace
		if ns == "" {
			ns = rel.Namespace
		}
		out = append(out, workload{head.Kind, ns, head.Metadata.Name})
	}
	slices.SortFunc(out, func(a, b workload) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	return out, nil
}

// pods counts the ready and desired pods of the workloads of rel (the deployed revision).
func (i *Installer) pods(ctx context.Context, rel *release.Release) (Pods, error) {
	ws, err := workloadsOf(rel)
	if err != nil {
		return Pods{}, err
	}
	var p Pods
	for _, w := range ws {
		ready, desired, err := i.count(ctx, w)
		if apierrors.IsNotFound(err) {
			ready, desired, err = 0, 1, nil // it should exist; nothing of it runs
		}
		if err != nil {
			return Pods{}, fmt.Errorf("%s %s/%s: %w", w.kind, w.namespace, w.name, err)
		}
		p.Ready, p.Desired = p.Ready+min(ready, desired), p.Desired+desired
		if ready < desired && len(p.NotReady) < MaxNotReady {
			p.NotReady = append(p.NotReady, fmt.Sprintf("%s %s/%s: %d of %d ready", w.kind, w.namespace, w.name, ready, desired))
		}
	}
	return p, nil
}

// count reads a workload's ready and desired pods.
func (i *Installer) count(ctx context.Context, w workload) (ready, desired int32, err error) {
	apps := i.clientset.AppsV1()
	switch w.kind {
	case "Deployment":
		d, err := apps.Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		return d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1), nil
	case "StatefulSet":
		s, err := apps.StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		return s.Status.ReadyReplicas, ptr.Deref(s.Spec.Replicas, 1), nil
	}
	ds, err := apps.DaemonSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	return ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, nil
}
