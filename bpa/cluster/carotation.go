package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/edgefleet/edgefleet/bpa/pki"
)

// CARestartAnnotation is set on the pod template of each workload the BPA restarts during a CA
// roll-over, to the new cluster CA's fingerprint: the restart is asked once per roll-over, also
// across BPA restarts.
const CARestartAnnotation = "bpa.edgefleet.io/restarted-for-ca"

// rootCAConfigMap is the ConfigMap kube-controller-manager publishes the cluster CAs in, in
// every namespace; pods read it as ca.crt of their API access volume.
const rootCAConfigMap = "kube-root-ca.crt"

// CAStep is where a run left the roll-over of the cluster's CAs (Result.CAs).
type CAStep struct {
	pki.CARotation
	// Waiting says why the roll-over did not go on after the run; "" when it did or none runs.
	Waiting string
	// Until is when the wait ends, when it waits for time to pass (cluster users' kubeconfigs
	// expiring): no run before it can move the roll-over on. Zero otherwise.
	Until time.Time
	// Restarted are the workloads ("<kind> <namespace>/<name>") the run asked to restart, so
	// that their pods read the new cluster CA.
	Restarted []string
}

// advanceCARotation takes a roll-over of the cluster's CAs one phase on, now that the run gave
// every host the trust bundles and leaves of the phase (a run does not start while a
// control-plane host does not answer, and a worker left out holds the roll-over). Before the
// API servers present certificates of the new CA (AddNew → UseNew), the pods must trust it too:
// kube-controller-manager has put it in every namespace's kube-root-ca.crt, and the workloads
// whose pods reach the API server were restarted (their clients read ca.crt when they start)
// and have rolled out.
func (b *BringUp) advanceCARotation(ctx context.Context, res *Result, spec Spec, bundle *pki.Bundle, now time.Time) error {
	res.CAs = CAStep{CARotation: bundle.CARotation()}
	if res.CAs.Phase == "" || !runsAPIServer(spec) {
		return nil
	}
	if len(res.LeftOut) > 0 {
		var names []string
		for _, h := range res.LeftOut {
			names = append(names, h.Host)
		}
		res.CAs.Waiting = fmt.Sprintf("worker hosts %s did not answer: every host must have the CAs of phase %s before the roll-over goes on", strings.Join(names, ", "), res.CAs.Phase)
		return nil
	}
	if res.CAs.Phase == pki.RotationAddNew {
		cs, err := adminClient(bundle)
		if err != nil {
			return err
		}
		if err := podsTrustNewCA(ctx, cs, bundle.NewClusterCA(), &res.CAs); err != nil || res.CAs.Waiting != "" {
			return err
		}
	}
	if waiting, until := usersKeepWorking(res.CAs.CARotation, spec.ClientCertificateMaxTTL, now); waiting != "" {
		res.CAs.Waiting, res.CAs.Until = waiting, until
		return nil
	}
	st, err := pki.AdvanceCARotation(ctx, b.secrets, PKISecret(spec.Name), now)
	res.CAs.CARotation = st
	return err
}

// usersKeepWorking says what a phase of a roll-over waits for so that the kubeconfigs of cluster
// users (each valid for at most maxTTL) keep working to their end, and until when; "" when
// nothing. A kubeconfig
// issued before AddNew trusts the old cluster CA only: the API servers present certificates of
// the new one (UseNew) once every such kubeconfig has expired. A client certificate the old CA
// signed (until UseNew began) is trusted until every such certificate has expired (DropOld).
func usersKeepWorking(st pki.CARotation, maxTTL time.Duration, now time.Time) (string, time.Time) {
	until := st.Since.Add(maxTTL)
	if maxTTL <= 0 || !now.Before(until) {
		return "", time.Time{}
	}
	switch st.Phase {
	case pki.RotationAddNew:
		return fmt.Sprintf("cluster users' kubeconfigs issued before the roll-over began (%s) trust the old cluster CA only and may be valid until %s: the API servers present certificates of the new CA after that, so that they keep working (--max-credential-ttl bounds the wait)",
			st.Since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)), until
	case pki.RotationUseNew:
		return fmt.Sprintf("cluster users' certificates the old cluster CA signed (until %s) may be valid until %s: the old CAs stay trusted until then, so that they keep working (--max-credential-ttl bounds the wait)",
			st.Since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)), until
	}
	return "", time.Time{}
}

// podsTrustNewCA checks that pods can trust the API servers once they present certificates of
// newCA: every kube-root-ca.crt holds it, and every workload whose pods mount the API access
// was restarted since and has rolled out. It asks for the restarts (once) and says in
// step.Waiting what it still waits for.
func podsTrustNewCA(ctx context.Context, cs kubernetes.Interface, newCA []byte, step *CAStep) error {
	var stale []string
	if err := eachItem(ctx, cs.CoreV1().ConfigMaps("").List, metav1.ListOptions{FieldSelector: "metadata.name=" + rootCAConfigMap}, func(cm *corev1.ConfigMap) {
		if !strings.Contains(cm.Data["ca.crt"], strings.TrimSpace(string(newCA))) {
			stale = append(stale, cm.Namespace)
		}
	}); err != nil {
		return fmt.Errorf("list the %s ConfigMaps: %w", rootCAConfigMap, err)
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		step.Waiting = fmt.Sprintf("ConfigMap %s of namespaces %s does not hold the new cluster CA yet (kube-controller-manager publishes it from its --root-ca-file)", rootCAConfigMap, strings.Join(stale, ", "))
		return nil
	}
	stamp := caStamp(newCA)
	workloads, err := apiClients(ctx, cs)
	if err != nil {
		return err
	}
	var rolling []string
	for _, w := range workloads {
		if w.template.Annotations[CARestartAnnotation] != stamp {
			patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, CARestartAnnotation, stamp)
			if err := w.restart(ctx, types.StrategicMergePatchType, []byte(patch)); err != nil {
				return fmt.Errorf("restart %s for the new cluster CA: %w", w.name, err)
			}
			step.Restarted = append(step.Restarted, w.name)
			rolling = append(rolling, w.name)
			continue
		}
		if !w.rolledOut {
			rolling = append(rolling, w.name)
		}
	}
	if len(rolling) > 0 {
		step.Waiting = fmt.Sprintf("restarting %s so that their pods read the new cluster CA (%d of %d rolled out)", strings.Join(rolling, ", "), len(workloads)-len(rolling), len(workloads))
	}
	return nil
}

// caStamp is the value of CARestartAnnotation for a new cluster CA: its fingerprint.
func caStamp(newCA []byte) string {
	sum := sha256.Sum256(newCA)
	return hex.EncodeToString(sum[:8])
}

// workload is a Deployment, DaemonSet or StatefulSet whose pods mount the API access volume.
type workload struct {
	name      string // "<kind> <namespace>/<name>"
	template  corev1.PodTemplateSpec
	rolledOut bool
	restart   func(ctx context.Context, pt types.PatchType, patch []byte) error
}

// apiClients lists the workloads whose pods get the API access volume (automounted token and
// ca.crt) and roll out by themselves when their template changes: a DaemonSet or StatefulSet
// updated OnDelete is left to its owner.
func apiClients(ctx context.Context, cs kubernetes.Interface) ([]workload, error) {
	var out []workload
	mounts := func(t corev1.PodTemplateSpec) bool {
		return t.Spec.AutomountServiceAccountToken == nil || *t.Spec.AutomountServiceAccountToken
	}
	if err := eachItem(ctx, cs.AppsV1().Deployments("").List, metav1.ListOptions{}, func(d *appsv1.Deployment) {
		if mounts(d.Spec.Template) {
			ns, name := d.Namespace, d.Name
			out = append(out, workload{"Deployment " + ns + "/" + name, d.Spec.Template, deploymentRolledOut(d),
				func(ctx context.Context, pt types.PatchType, p []byte) error {
					_, err := cs.AppsV1().Deployments(ns).Patch(ctx, name, pt, p, metav1.PatchOptions{})
					return err
				}})
		}
	}); err != nil {
		return nil, fmt.Errorf("list Deployments: %w", err)
	}
	if err := eachItem(ctx, cs.AppsV1().DaemonSets("").List, metav1.ListOptions{}, func(d *appsv1.DaemonSet) {
		if mounts(d.Spec.Template) && d.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			ns, name := d.Namespace, d.Name
			rolledOut := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedNumberScheduled >= d.Status.DesiredNumberScheduled && d.Status.NumberAvailable >= d.Status.DesiredNumberScheduled
			out = append(out, workload{"DaemonSet " + ns + "/" + name, d.Spec.Template, rolledOut,
				func(ctx context.Context, pt types.PatchType, p []byte) error {
					_, err := cs.AppsV1().DaemonSets(ns).Patch(ctx, name, pt, p, metav1.PatchOptions{})
					return err
				}})
		}
	}); err != nil {
		return nil, fmt.Errorf("list DaemonSets: %w", err)
	}
	if err := eachItem(ctx, cs.AppsV1().StatefulSets("").List, metav1.ListOptions{}, func(s *appsv1.StatefulSet) {
		if mounts(s.Spec.Template) && s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			ns, name := s.Namespace, s.Name
			replicas := int32(1)
			if s.Spec.Replicas != nil {
				replicas = *s.Spec.Replicas
			}
			rolledOut := s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision == s.Status.CurrentRevision && s.Status.ReadyReplicas >= replicas
			out = append(out, workload{"StatefulSet " + ns + "/" + name, s.Spec.Template, rolledOut,
				func(ctx context.Context, pt types.PatchType, p []byte) error {
					_, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, name, pt, p, metav1.PatchOptions{})
					return err
				}})
		}
	}); err != nil {
		return nil, fmt.Errorf("list StatefulSets: %w", err)
	}
	return out, nil
}

// deploymentRolledOut tells whether d runs its template's pods only, all available (kubectl
// rollout status' test).
func deploymentRolledOut(d *appsv1.Deployment) bool {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas >= replicas && st.Replicas <= st.UpdatedReplicas && st.AvailableReplicas >= st.UpdatedReplicas
}

// eachItem calls fn with each object list returns, a page of 500 at a time (client-go's pager:
// a cluster with many workloads is never listed in one response).
func eachItem[T any, L runtime.Object](ctx context.Context, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions, fn func(*T)) error {
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }))
	return p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		item, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("listed a %T, want a %T", obj, item)
		}
		fn(item)
		return nil
	})
}
