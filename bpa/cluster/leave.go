package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// LeaveResult is what Leave did.
type LeaveResult struct {
	// Steps ran in order: leave hooks on the hosts that stay, then the leaving host's
	// deactivations.
	Steps []sshexec.Result
	// Unreachable says why the leaving host's packages were not stopped: it does not answer
	// (a dead host being replaced). Its groups were left all the same.
	Unreachable error
}

// Leave takes host h out of the cluster of spec once its node is drained; spec.Hosts are the
// hosts that stay. First, for each package of spec.Packages its manifest selects for h that has
// a leave hook (packages.Hooks.Leave: etcd's removes h's member), in the reverse of the install
// order, the hook runs on one host that stays and runs the package — the next one when a host
// does not answer —, whether h answers or not: a dead host's member must go too, or etcd counts
// it in its quorum. Then the packages are deactivated on h (bpa/install.Installer.Deactivate),
// in the same order, so that nothing on h runs for the cluster any more — a kubelet left running
// would register its node again on a host kept as it is; their files stay. Each step is
// idempotent, so Leave resumes after a crash. spec.Packages are all the cluster's, those its
// requirements leave out too (spec.KMS need not be set): deactivating a package never installed
// changes nothing. The error names the host and the package.
func (b *BringUp) Leave(ctx context.Context, spec Spec, h Host) (LeaveResult, error) {
	var res LeaveResult
	levels, err := Levels(spec.Packages)
	if err != nil {
		return res, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	var order []string // the packages h runs, in the reverse of the install order
	for _, level := range slices.Backward(levels) {
		for _, pkg := range level {
			m := pkg.Manifest
			if !m.Hosts.Selects(h.ControlPlane) {
				continue
			}
			order = append(order, m.Name)
			if m.Hooks.Leave == "" {
				continue
			}
			if err := b.leaveGroup(ctx, &res, spec, h, m.Name, m.Hosts.Selects); err != nil {
				return res, fmt.Errorf("cluster %s: host %s leaving: %w", spec.Name, h.Name, err)
			}
		}
	}
	if err := b.installer.Reachable(ctx, h.SSH); err != nil {
		if unreachable := (*sshexec.UnreachableError)(nil); errors.As(err, &unreachable) {
			res.Unreachable = err
			return res, nil
		}
		return res, fmt.Errorf("cluster %s: host %s leaving: %w", spec.Name, h.Name, err)
	}
	for _, name := range order {
		r, err := b.installer.Deactivate(ctx, h.SSH, name)
		res.Steps = append(res.Steps, r)
		if err != nil {
			return res, fmt.Errorf("cluster %s: host %s leaving: %w", spec.Name, h.Name, err)
		}
	}
	return res, nil
}

// leaveGroup runs the leave hook of package name for h on the first host that stays, is
// selected (selects) and takes it; hosts that do not answer are passed over. With no such
// host at all, h was the group's last member: there is nothing to leave.
func (b *BringUp) leaveGroup(ctx context.Context, res *LeaveResult, spec Spec, h Host, name string, selects func(controlPlane bool) bool) error {
	var errs []error
	for _, o := range spec.Hosts {
		if o.Name == h.Name || !selects(o.ControlPlane) {
			continue
		}
		r, err := b.installer.Leave(ctx, o.SSH, name, h.Name, h.IP.String())
		res.Steps = append(res.Steps, r)
		if err == nil {
			return nil
		}
		if unreachable := (*sshexec.UnreachableError)(nil); !errors.As(err, &unreachable) {
			return err
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("package %s: no host that stays answers to take it out: %w", name, errors.Join(errs...))
	}
	return nil
}
