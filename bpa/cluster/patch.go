package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
)

// CordonedAnnotation marks a node the BPA cordoned for a patch (so it uncordons only those, and
// a patch resumed after a crash knows).
const CordonedAnnotation = "bpa.edgefleet.io/cordoned-for"

// NodePatch is what a patch did on one node.
type NodePatch struct {
	Host string
	// From is the version the node had, To the one it has now.
	From, To string
	// Skipped is true when the node had the version already.
	Skipped bool
	Report  install.Report
}

// PatchResult lists the nodes a patch went through, in order.
type PatchResult struct {
	Nodes []NodePatch
}

// Patch installs pkg in place on the hosts of the cluster that run it (etcd and kube-apiserver
// on the control plane, anything else on every host), one node at a time, control plane first:
// it cordons the node, drains it, installs (bpa/install: health-checked, rolled back on
// failure), waits for the node to be Ready and uncordons it. A control-plane node is only
// started on while every etcd member is healthy, so quorum holds. When a node fails, the node
// is back on its previous version and serving, and Patch stops there with an error naming the
// node and why; the nodes after it are untouched. Nodes at the version already are skipped, so
// Patch resumes after a crash.
func (b *BringUp) Patch(ctx context.Context, spec Spec, pkg install.Package) (*PatchResult, error) {
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	if pkg.Manifest == nil {
		return nil, fmt.Errorf("cluster %s: patch: a package without a manifest", spec.Name)
	}
	spec = spec.withDefaults()
	bundle, err := pki.Ensure(ctx, b.secrets, PKISecret(spec.Name), spec.PKISpec())
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	kc, err := bundle.AdminKubeconfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: admin kubeconfig: %w", spec.Name, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	etcd, err := newEtcdChecker(bundle, spec)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}

	hosts := spec.controlPlane()
	if name := pkg.Manifest.Name; name != Etcd && name != APIServer {
		for _, h := range spec.Hosts {
			if !h.ControlPlane {
				hosts = append(hosts, h)
			}
		}
	}
	res := &PatchResult{}
	m := pkg.Manifest
	for _, h := range hosts {
		np := NodePatch{Host: h.Name, To: m.Version}
		st, err := b.installer.Installed(ctx, h.SSH, m.Name)
		if err != nil {
			return res, fmt.Errorf("cluster %s: patch %s %s: node %s: %w", spec.Name, m.Name, m.Version, h.Name, err)
		}
		np.From = st.Current
		if st.Current == m.Version && st.Active == m.Version && !cordonedByBPA(ctx, cs, h.Name) {
			np.Skipped = true
			res.Nodes = append(res.Nodes, np)
			continue
		}
		err = b.patchNode(ctx, cs, etcd, h, pkg, &np)
		res.Nodes = append(res.Nodes, np)
		if err != nil {
			return res, fmt.Errorf("cluster %s: patch %s %s stopped at node %s: %w", spec.Name, m.Name, m.Version, h.Name, err)
		}
	}
	return res, nil
}

// patchNode patches one node; see Patch.
func (b *BringUp) patchNode(ctx context.Context, cs kubernetes.Interface, etcd *etcdChecker, h Host, pkg install.Package, np *NodePatch) error {
	m := pkg.Manifest
	if h.ControlPlane {
		if err := etcd.allHealthy(ctx); err != nil {
			return fmt.Errorf("not starting: etcd would lose quorum: %w", err)
		}
	}
	mark := m.Name + "-" + m.Version
	if err := cordon(ctx, cs, h.Name, mark); err != nil {
		return err
	}
	if err := drain(ctx, cs, h.Name); err != nil {
		return err
	}
	rep, err := b.installer.Install(ctx, h.SSH, pkg)
	np.Report = rep
	if err != nil {
		var herr *install.HealthError
		if errors.As(err, &herr) && herr.RollbackErr == nil && herr.RolledBackTo != "" {
			np.To = herr.RolledBackTo
			// Back on the version it had, the node serves again.
			if uerr := uncordon(ctx, cs, h.Name); uerr != nil {
				return errors.Join(err, uerr)
			}
		}
		return err
	}
	if err := waitNodeReady(ctx, cs, h.Name); err != nil {
		return err
	}
	return uncordon(ctx, cs, h.Name)
}

// cordonedByBPA tells whether the BPA cordoned node for a patch and has not uncordoned it yet
// (a patch interrupted after installing).
func cordonedByBPA(ctx context.Context, cs kubernetes.Interface, node string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	return err == nil && n.Annotations[CordonedAnnotation] != ""
}

// cordon marks node unschedulable and notes that the BPA did it, for mark (package-version).
func cordon(ctx context.Context, cs kubernetes.Interface, node, mark string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cordon: %w", err)
	}
	if n.Spec.Unschedulable && n.Annotations[CordonedAnnotation] == "" {
		return nil // cordoned by someone else: theirs to uncordon
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"unschedulable":true}}`, CordonedAnnotation, mark)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon: %w", err)
	}
	return nil
}

// uncordon makes node schedulable again if the BPA cordoned it.
func uncordon(ctx context.Context, cs kubernetes.Interface, node string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("uncordon: %w", err)
	}
	if n.Annotations[CordonedAnnotation] == "" {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"unschedulable":null}}`, CordonedAnnotation)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("uncordon: %w", err)
	}
	return nil
}

// drainTimeout bounds waiting for a node's pods to go.
const drainTimeout = 5 * time.Minute

// drain evicts the pods of node (not DaemonSet pods, not mirror pods, as kubectl drain) and
// waits until they are gone.
func drain(ctx context.Context, cs kubernetes.Interface, node string) error {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	evictable := func() ([]corev1.Pod, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("drain: list pods: %w", err)
		}
		var out []corev1.Pod
		for _, p := range pods.Items {
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
				continue
			}
			if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
				continue
			}
			out = append(out, p)
		}
		return out, nil
	}
	pods, err := evictable()
	if err != nil {
		return err
	}
	for _, p := range pods {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("drain: evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, drainTimeout, true, func(context.Context) (bool, error) {
		left, err := evictable()
		return len(left) == 0, err
	})
	if err != nil {
		return fmt.Errorf("drain: pods still on node %s after %s: %w", node, drainTimeout, err)
	}
	return nil
}

// waitNodeReady waits for node to report Ready.
func waitNodeReady(ctx context.Context, cs kubernetes.Interface, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, retryable(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = string(c.Status) + ": " + c.Message
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w", node, last, err)
	}
	return nil
}

// retryable returns nil for errors worth polling through (an API server restarting, a timeout),
// err for the others.
func retryable(err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
		return err
	}
	return nil
}

// etcdChecker asks every etcd member of a cluster for its health, as the API server does (with
// its etcd client certificate).
type etcdChecker struct {
	client  *http.Client
	members []Host
}

func newEtcdChecker(bundle *pki.Bundle, spec Spec) (*etcdChecker, error) {
	cp := spec.controlPlane()
	files, err := bundle.ControlPlaneFiles(cp[0].Name)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(files["pki/apiserver-etcd-client.crt"], files["pki/apiserver-etcd-client.key"])
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(files["pki/etcd/ca.crt"]) {
		return nil, errors.New("etcd CA certificate: no certificate in it")
	}
	return &etcdChecker{
		client:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}},
		members: cp,
	}, nil
}

// allHealthy returns an error naming the members that are not healthy.
func (e *etcdChecker) allHealthy(ctx context.Context) error {
	var errs []error
	for _, m := range e.members {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+hostPort(m.IP, 2379)+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := e.client.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", m.Name, err))
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			errs = append(errs, fmt.Errorf("member %s: %s %s", m.Name, resp.Status, strings.TrimSpace(string(body))))
		}
	}
	return errors.Join(errs...)
}
