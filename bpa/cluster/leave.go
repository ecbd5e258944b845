package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/edgefleet/edgefleet/pkg/sshexec"
)

// Leave takes host h out of the cluster of spec once its node is drained: the packages of
// spec.Packages its manifest selects for h are deactivated (their units stopped and disabled,
// bpa/install.Installer.Deactivate) in the reverse of the install order, so that nothing on the
// host runs for the cluster any more — a kubelet left running would register its node again on a
// host kept as it is. Their files stay. Each step is skipped when done already, so Leave resumes
// after a crash. The error names the host and the package.
func (b *BringUp) Leave(ctx context.Context, spec Spec, h Host) ([]sshexec.Result, error) {
	levels, err := Levels(spec.Packages)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	var done []sshexec.Result
	for _, level := range slices.Backward(levels) {
		for _, pkg := range level {
			if !pkg.Manifest.Hosts.Selects(h.ControlPlane) {
				continue
			}
			res, err := b.installer.Deactivate(ctx, h.SSH, pkg.Manifest.Name)
			done = append(done, res)
			if err != nil {
				return done, fmt.Errorf("cluster %s: host %s leaving: %w", spec.Name, h.Name, err)
			}
		}
	}
	return done, nil
}
