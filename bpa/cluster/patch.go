package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/packages"
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
	// NotDrained is true when a package that drains was replaced with the node's pods in
	// place: no other node could take them (a cluster of one node).
	NotDrained bool
	Report     install.Report
}

// PatchStep is where a patch is: which package, on which host (the Index-th of Of, from 1),
// doing what (the Step… constants). BringUp.Progress gets one as each step starts.
type PatchStep struct {
	Package, Version, Host string
	Index, Of              int
	Step                   string
}

// The steps of a patch on one host, in order (the drain and node steps only for a package whose
// manifest says patch.drain).
const (
	StepCheckOthers = "checking that the package is healthy on the other hosts"
	StepDrain       = "cordoned, draining the node"
	StepInstall     = "installing and health-checking"
	StepNodeReady   = "waiting for the node to be Ready"
	StepUncordon    = "uncordoning the node"
)

// PatchResult lists the nodes a patch went through, in order.
type PatchResult struct {
	Nodes []NodePatch
}

// GetNodes is r.Nodes, none when r is nil (a patch that failed before any node).
func (r *PatchResult) GetNodes() []NodePatch {
	if r == nil {
		return nil
	}
	return r.Nodes
}

// Patch rolls package name of spec.Packages (a new version of one the cluster runs) through the
// hosts its manifest selects, one host at a time, control plane first. On each host it first
// checks that the package passes its health check on every other host that runs it (so a patch
// never has two hosts of a package down: an etcd patch keeps quorum); when the manifest says
// patch.drain, it cordons and drains the node; it writes the package's configuration files and
// installs (bpa/install: health-checked, rolled back on failure); then, for a drained node,
// waits for the node to be Ready and uncordons it. When a host fails, it is back on its
// previous version and serving, and Patch stops there with an error naming the host and why;
// the hosts after it are untouched. Hosts at the version already are skipped, so Patch resumes
// after a crash.
func (b *BringUp) Patch(ctx context.Context, spec Spec, name string) (*PatchResult, error) {
	spec, bundle, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(spec.Packages, func(p install.Package) bool { return p.Manifest.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("cluster %s: patch: the cluster's packages have no %s", spec.Name, name)
	}
	pkg := spec.Packages[i]
	m := pkg.Manifest
	var cs kubernetes.Interface
	if m.Patch.Drain {
		if cs, err = adminClient(bundle); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
	}
	var hosts []Host // control plane first
	for _, cp := range []bool{true, false} {
		for _, h := range spec.Hosts {
			if h.ControlPlane == cp && m.Hosts.Selects(h.ControlPlane) {
				hosts = append(hosts, h)
			}
		}
	}
	res := &PatchResult{}
	for i, h := range hosts {
		step := func(s string) {
			if b.Progress != nil {
				b.Progress(PatchStep{Package: m.Name, Version: m.Version, Host: h.Name, Index: i + 1, Of: len(hosts), Step: s})
			}
		}
		fail := func(err error) (*PatchResult, error) {
			return res, fmt.Errorf("cluster %s: patch %s %s stopped at host %s: %w", spec.Name, m.Name, m.Version, h.Name, err)
		}
		files, err := configFiles(spec, bundle, h, m)
		if err != nil {
			return fail(err)
		}
		pkg.ConfigDigest = configDigest(files)
		st, err := b.installer.Installed(ctx, h.SSH, m.Name)
		if err != nil {
			return fail(err)
		}
		np := NodePatch{Host: h.Name, From: st.Current, To: m.Version}
		if st.Current == m.Version && st.Active == m.Version && st.Config == pkg.ConfigDigest && (cs == nil || !cordonedByBPA(ctx, cs, h.Name)) {
			np.Skipped = true
			res.Nodes = append(res.Nodes, np)
			continue
		}
		step(StepCheckOthers)
		if err := b.othersHealthy(ctx, hosts, h, m); err != nil {
			return fail(err)
		}
		err = b.patchHost(ctx, cs, h, pkg, files, &np, step)
		res.Nodes = append(res.Nodes, np)
		if err != nil {
			return fail(err)
		}
	}
	return res, nil
}

// patchHost patches one host; cs is nil unless the package drains nodes; step reports each
// step as it starts. See Patch.
func (b *BringUp) patchHost(ctx context.Context, cs kubernetes.Interface, h Host, pkg install.Package, files []file, np *NodePatch, step func(string)) error {
	m := pkg.Manifest
	if cs != nil {
		step(StepDrain)
		if err := cordon(ctx, cs, h.Name, m.Name+"-"+m.Version); err != nil {
			return err
		}
		others, err := otherSchedulableNodes(ctx, cs, h.Name)
		if err != nil {
			return err
		}
		// With no other node to go to, evicting the pods would only stop them (and a
		// disruption budget would hold the drain for good): they stay, their containers
		// running on while the package is replaced.
		np.NotDrained = others == 0
		if others > 0 {
			if err := (drainer{cs: cs, timeout: drainTimeout, poll: time.Second}).drain(ctx, h.Name); err != nil {
				return err
			}
		}
	}
	step(StepInstall)
	for _, f := range files {
		if _, err := b.installer.WriteFile(ctx, h.SSH, f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	rep, err := b.installer.Install(ctx, h.SSH, pkg)
	np.Report = rep
	if err != nil {
		var herr *install.HealthError
		if cs != nil && errors.As(err, &herr) && herr.RollbackErr == nil && herr.RolledBackTo != "" {
			np.To = herr.RolledBackTo
			// Back on the version it had, the node serves again.
			if uerr := uncordon(ctx, cs, h.Name); uerr != nil {
				return errors.Join(err, uerr)
			}
		}
		return err
	}
	if cs == nil {
		return nil
	}
	step(StepNodeReady)
	if err := waitNodeReady(ctx, cs, h.Name); err != nil {
		return err
	}
	step(StepUncordon)
	return uncordon(ctx, cs, h.Name)
}

// othersHealthy waits until package m passes its health check on every host of hosts but h, so
// that a patch never has two hosts of a package down. A check that does not pass on a running
// package (install.ErrUnhealthy: a restart nearby, a node briefly NotReady) is asked again every
// health-check period, for up to the health check's timeout; any other state (not installed,
// failed when last started) stops the patch at once.
func (b *BringUp) othersHealthy(ctx context.Context, hosts []Host, h Host, m *packages.Manifest) error {
	start := time.Now()
	deadline := start.Add(time.Duration(m.HealthCheck.Timeout()) * time.Second)
	for _, o := range hosts {
		if o.Name == h.Name {
			continue
		}
		for {
			err := b.installer.Healthy(ctx, o.SSH, m.Name)
			if err == nil {
				break
			}
			if !errors.Is(err, install.ErrUnhealthy) || !time.Now().Before(deadline) {
				return fmt.Errorf("not starting while %s is unhealthy on %s (a patch takes down one host of a package at a time; waited %s): %w",
					m.Name, o.Name, time.Since(start).Round(time.Second), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(m.HealthCheck.Period()) * time.Second):
			}
		}
	}
	return nil
}

// adminConfig is the client config of the cluster's API server as its admin.
func adminConfig(bundle *pki.Bundle) (*rest.Config, error) {
	kc, err := bundle.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.Timeout = adminRequestTimeout
	return cfg, nil
}

// adminRequestTimeout bounds each of the BPA's requests to a cluster's API server.
const adminRequestTimeout = 30 * time.Second

// adminClient is a client of the cluster's API server as its admin.
func adminClient(bundle *pki.Bundle) (kubernetes.Interface, error) {
	cfg, err := adminConfig(bundle)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// adminMetadataClient is a metadata-only client of the cluster's API server as its admin.
func adminMetadataClient(bundle *pki.Bundle) (metadata.Interface, error) {
	cfg, err := adminConfig(bundle)
	if err != nil {
		return nil, err
	}
	return metadata.NewForConfig(cfg)
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
