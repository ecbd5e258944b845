// Package election is the controllers' leader election: whether it runs and its timings, as
// command-line flags and as a controller-runtime manager's options. The global controller, the
// local controller and the BPA each hold one lease. A leader that cannot renew its lease within
// the renew deadline stops leading and exits (its replica restarts it), so a machine whose API
// server answers slower than the deadline under load needs longer timings, not a restart loop.
package election

import (
	"flag"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Options are a component's leader election.
type Options struct {
	// Enabled makes only one replica active at a time.
	Enabled bool
	// LeaseDuration is how long a lease holds after its last renewal: the time another replica
	// waits before it takes the lead.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it gives up the lead.
	RenewDeadline time.Duration
	// RetryPeriod is the time between tries to take or renew the lease.
	RetryPeriod time.Duration
}

// Defaults are controller-runtime's (and Kubernetes' own controllers'): a lease of 15 s, renewed
// within 10 s, tried every 2 s.
func Defaults() Options {
	return Options{Enabled: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// AddFlags binds the options to --leader-elect and --leader-elect-*.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "leader-elect", o.Enabled, "Elect a leader so only one replica is active.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a leader's lease holds after its last renewal: another replica takes the lead after that.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader tries to renew its lease before it gives up the lead and exits. Raise it (and --leader-elect-lease-duration) where the API server may answer slower than this under load.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "Time between tries to take or renew the lease.")
}

// Validate names the first timing that cannot work: each must be positive, and the retry period
// shorter than the renew deadline, which is shorter than the lease.
func (o Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	switch {
	case o.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %s", o.RetryPeriod)
	case o.RenewDeadline <= o.RetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than --leader-elect-retry-period (%s): the leader must get to try again before it gives up", o.RenewDeadline, o.RetryPeriod)
	case o.LeaseDuration <= o.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s): another replica could take the lead while the leader still acts on it", o.LeaseDuration, o.RenewDeadline)
	}
	return nil
}

// Apply sets a manager's leader election: lease id in namespace, with these timings. A leader
// that stops gives its lease up (the components exit once their manager has stopped), so its
// successor, a restart or an upgrade's new replica, leads at once instead of waiting for the
// lease to run out; one that is killed leaves its lease to run out.
func (o Options) Apply(mopts *ctrl.Options, id, namespace string) {
	mopts.LeaderElection = o.Enabled
	mopts.LeaderElectionID = id
	mopts.LeaderElectionNamespace = namespace
	mopts.LeaderElectionReleaseOnCancel = true
	lease, renew, retry := o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	mopts.LeaseDuration, mopts.RenewDeadline, mopts.RetryPeriod = &lease, &renew, &retry
}
