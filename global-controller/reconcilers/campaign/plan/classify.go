package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/versionskew"
)

// State is where a target site stands in one campaign.
type State int

// Site states. Succeeded, Failed, TimedOut and Skipped are final.
const (
	// Pending: not dispatched yet.
	Pending State = iota
	// PreCaching: the pre-cache was dispatched and has not finished.
	PreCaching
	// PreCached: the release's artifacts are cached at the site; the apply is not dispatched yet.
	PreCached
	// InProgress: the apply was dispatched and has not finished, or succeeded and is soaking.
	InProgress
	// Succeeded: the site runs the release (and soaked).
	Succeeded
	// Failed: the site reported its pre-cache or apply failed.
	Failed
	// TimedOut: the pre-cache or apply passed its deadline.
	TimedOut
	// Skipped: never dispatched (no spec.cluster, already at the release, not found, or the
	// release's Kubernetes version is one the site's cluster may not move to).
	Skipped
)

var stateNames = [...]string{"Pending", "PreCaching", "PreCached", "InProgress", "Succeeded", "Failed", "TimedOut", "Skipped"}

func (s State) String() string { return stateNames[s] }

// Final reports whether the site is done with the campaign.
func (s State) Final() bool { return s >= Succeeded }

// failed reports whether the state counts against the failure budget.
func (s State) failed() bool { return s == Failed || s == TimedOut }

// applyDispatched reports whether the apply went out (or the site finished without it).
func (s State) applyDispatched() bool { return s >= InProgress }

// Rollback is where a failed site's rollback stands.
type Rollback int

// Rollback states.
const (
	// NoRollback: none dispatched.
	NoRollback Rollback = iota
	// RollingBack: dispatched, not finished.
	RollingBack
	// RolledBack: the site is back at its previous release.
	RolledBack
	// RollbackFailed: the rollback failed or timed out.
	RollbackFailed
)

// Site is what the planner needs to know of one target.
type Site struct {
	// Name of the Site.
	Name string
	// State in this campaign.
	State State
	// Reason says why the site failed, timed out or was skipped.
	Reason string
	// UpToDate is set on a site skipped because it already runs the release: it counts as
	// succeeded in the campaign's verdict.
	UpToDate bool
	// Busy is set while another campaign's operation runs on the site: nothing is dispatched
	// to it until that one finishes.
	Busy bool
	// OutsideWindow is set while the site may not start disruptive work (its own or the
	// campaign's maintenance windows are closed).
	OutsideWindow bool
	// PreviousRelease is the release the site ran before the apply ("" when unknown or none).
	PreviousRelease string
	// NoRollback says why a failed site is not rolled back to PreviousRelease although the
	// strategy asks for it ("" when it may be).
	NoRollback string
	// Rollback of a failed site.
	Rollback Rollback
	// DispatchTime of the apply, and CompletionTime of a finished apply (zero when unknown),
	// for the wave latency.
	DispatchTime, CompletionTime time.Time
	// Steps are the releases a site the campaign moves more than one Kubernetes minor version
	// goes through, in order, the campaign's release last (see Steps): set while the site is
	// Pending, or InProgress between two steps; nil when one apply takes it there.
	Steps []string
	// Step numbers the next dispatch among the site's steps, from 1, when Steps is set: the
	// campaign's release is the last step, dispatched as the apply.
	Step int
}

// NextStep says whether the site is between two steps: its last step succeeded and the next
// one (Steps[0]) is due. A site between steps is InProgress.
func (s Site) NextStep() bool { return s.State == InProgress && len(s.Steps) > 0 }

// Campaign is what Classify needs to know of the campaign.
type Campaign struct {
	// ID of the apply dispatch: the campaign's UID.
	ID string
	// Release the campaign rolls out.
	Release string
	// Soak a site must stay Succeeded before it counts.
	Soak time.Duration
	// Versions maps the name of a Release of the campaign's namespace to its Kubernetes
	// version: the campaign's release, to check each site's move against the version-skew
	// policy, and the releases failed sites ran before, to check their rollback. A release
	// missing from it is not checked (it does not exist: the campaign waits for its release,
	// and a rollback to a missing release fails at the site).
	Versions map[string]string
}

// PreCacheID is the ID of the campaign's pre-cache dispatch.
func (c Campaign) PreCacheID() string { return c.ID + fleetv1.PreCacheIDSuffix }

// RollbackID is the ID of the campaign's rollback dispatch.
func (c Campaign) RollbackID() string { return c.ID + fleetv1.RollbackIDSuffix }

// StepID is the ID of step n (from 1) of a site's move through intermediate releases; the
// last step, to the campaign's release, is the apply (ID).
func (c Campaign) StepID(n int) string { return c.ID + fleetv1.StepIDSuffix + strconv.Itoa(n) }

// StepOf is the step number of a dispatch ID of the campaign; 0 when id is no step's.
func (c Campaign) StepOf(id string) int {
	rest, ok := strings.CutPrefix(id, c.ID+fleetv1.StepIDSuffix)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// Reasons Classify gives.
const (
	ReasonNoCluster        = "site has no spec.cluster"
	ReasonAlreadyAtRelease = "already at release"
	ReasonNotFound         = "site not found"
	ReasonDeadlinePassed   = "deadline passed"
	// ReasonVersionSkew starts the reason of a site skipped because the release's Kubernetes
	// version is one its cluster may not move to; the rest says which rule and what to do.
	ReasonVersionSkew = "Kubernetes version-skew policy"
)

// Classify tells where site stands in campaign c at now, from the operation the campaign wrote
// on it (spec.operation) and what the site reports (status.lastOperation). recheck is when the
// answer changes by itself (a deadline passes, a soak ends); zero when it does not.
func Classify(site *fleetv1.Site, c Campaign, now time.Time) (s Site, recheck time.Time) {
	s = Site{Name: site.Name}
	op, last := site.Spec.Operation, site.Status.LastOperation
	report := func(id string) *fleetv1.SiteOperationStatus {
		if last != nil && last.ID == id {
			return last
		}
		return nil
	}
	switch {
	case op != nil && op.ID == c.RollbackID():
		// Only a failed site is rolled back; the rollback took the place of the apply's report.
		s.State, s.Reason = Failed, "failed, rolled back"
		s.Rollback = RollingBack
		r := report(op.ID)
		switch {
		case r != nil && r.Phase == fleetv1.OperationSucceeded:
			s.Rollback = RolledBack
		case r != nil && (r.Phase == fleetv1.OperationFailed || r.Phase == fleetv1.OperationTimedOut):
			s.Rollback, s.Reason = RollbackFailed, "failed, rollback failed: "+r.Message
		case passed(op.Deadline, now):
			s.Rollback, s.Reason = RollbackFailed, "failed, rollback "+ReasonDeadlinePassed
		default:
			recheck = deadline(op.Deadline)
		}
	case op != nil && c.StepOf(op.ID) > 0:
		s, recheck = c.classifyStep(site, op, report(op.ID), now)
	case op != nil && op.ID == c.ID:
		s.PreviousRelease, s.DispatchTime = op.PreviousRelease, op.DispatchTime.Time
		r := report(op.ID)
		if r != nil && r.CompletionTime != nil {
			s.CompletionTime = r.CompletionTime.Time
		}
		phase := fleetv1.OperationPending
		if r != nil {
			phase = r.Phase
		}
		switch phase {
		case fleetv1.OperationSucceeded:
			if end := completion(r).Add(c.Soak); c.Soak > 0 && now.Before(end) {
				s.State, recheck = InProgress, end
			} else {
				s.State = Succeeded
			}
		case fleetv1.OperationFailed:
			s.State, s.Reason = Failed, r.Message
		case fleetv1.OperationTimedOut:
			s.State, s.Reason = TimedOut, r.Message
		default:
			if passed(op.Deadline, now) {
				s.State, s.Reason = TimedOut, ReasonDeadlinePassed
			} else {
				s.State, recheck = InProgress, deadline(op.Deadline)
			}
		}
		if s.Reason == "" && s.State.failed() {
			s.Reason = s.State.String()
		}
		if s.State.failed() && s.PreviousRelease != "" {
			if err := c.checkMove(site, s.PreviousRelease); err != nil {
				s.NoRollback = "not rolled back to " + s.PreviousRelease + ": " + err.Error()
			}
		}
	case op != nil && op.ID == c.PreCacheID():
		r := report(op.ID)
		switch {
		case r != nil && (r.Phase == fleetv1.OperationPreCached || r.Phase == fleetv1.OperationSucceeded):
			s.State = PreCached
		case r != nil && r.Phase == fleetv1.OperationFailed:
			s.State, s.Reason = Failed, "pre-cache failed: "+r.Message
		case r != nil && r.Phase == fleetv1.OperationTimedOut:
			s.State, s.Reason = TimedOut, "pre-cache timed out: "+r.Message
		case passed(op.Deadline, now):
			s.State, s.Reason = TimedOut, "pre-cache "+ReasonDeadlinePassed
		default:
			s.State, recheck = PreCaching, deadline(op.Deadline)
		}
	case site.Spec.Cluster == nil:
		s.State, s.Reason = Skipped, ReasonNoCluster
	case site.Spec.Cluster.Release == c.Release && last != nil && last.Release == c.Release && last.Phase == fleetv1.OperationSucceeded:
		s.State, s.Reason, s.UpToDate = Skipped, ReasonAlreadyAtRelease, true
	default:
		s.State = Pending
		// Another campaign's operation that has not finished holds the site.
		if op != nil && !passed(op.Deadline, now) {
			r := report(op.ID)
			s.Busy = r == nil || !finalPhase(r.Phase)
			if s.Busy {
				recheck = deadline(op.Deadline)
			}
		}
		// A site another operation holds is judged once it is free: that operation may move
		// the cluster's version.
		if !s.Busy {
			running, _ := ControlPlaneVersion(site)
			switch steps, err := Steps(running, c.Release, c.Versions); {
			case err != nil:
				s.State, s.Reason = Skipped, ReasonVersionSkew+": "+err.Error()
			case len(steps) > 1:
				s.Steps, s.Step = steps, 1
			}
		}
	}
	return s, recheck
}

// classifyStep tells where a site stands whose last dispatch is step n of its move through
// intermediate releases (op, and r its report if any). Once the step succeeded, the site must
// report its control plane at the step's version before the next step goes (each step is
// checked like the first); until the step's deadline it is waited for, then the site fails.
func (c Campaign) classifyStep(site *fleetv1.Site, op *fleetv1.SiteOperation, r *fleetv1.SiteOperationStatus, now time.Time) (s Site, recheck time.Time) {
	n := c.StepOf(op.ID)
	s = Site{Name: site.Name, State: InProgress, PreviousRelease: op.PreviousRelease, DispatchTime: op.DispatchTime.Time}
	step := fmt.Sprintf("step %d (release %s)", n, op.Release)
	phase := fleetv1.OperationPending
	if r != nil {
		phase = r.Phase
	}
	switch phase {
	case fleetv1.OperationSucceeded:
		running, _ := ControlPlaneVersion(site)
		steps, err := Steps(running, c.Release, c.Versions)
		switch {
		case err != nil:
			s.State, s.Reason = Failed, fmt.Sprintf("after %s: %s: %v", step, ReasonVersionSkew, err)
		case running == "" || steps[0] == op.Release:
			// The site does not report the step's version yet.
			if passed(op.Deadline, now) {
				s.State, s.Reason = Failed, fmt.Sprintf("%s succeeded, but by its deadline the site reported its control plane at %q, not at the step's version %s: the next step was not dispatched; see the Site's status.cluster",
					step, running, c.Versions[op.Release])
			} else {
				recheck = deadline(op.Deadline)
			}
		default:
			s.Steps, s.Step = steps, n+1
		}
	case fleetv1.OperationFailed:
		s.State, s.Reason = Failed, step+": "+r.Message
	case fleetv1.OperationTimedOut:
		s.State, s.Reason = TimedOut, step+": "+r.Message
	default:
		if passed(op.Deadline, now) {
			s.State, s.Reason = TimedOut, step+": "+ReasonDeadlinePassed
		} else {
			recheck = deadline(op.Deadline)
		}
	}
	if s.State.failed() && s.PreviousRelease != "" {
		if err := c.checkMove(site, s.PreviousRelease); err != nil {
			s.NoRollback = "not rolled back to " + s.PreviousRelease + ": " + err.Error()
		}
	}
	return s, recheck
}

// checkMove tells whether the version-skew policy lets site's cluster move to release: nil
// when it does, or when the version the cluster's control plane runs or the release's is not
// known (see ControlPlaneVersion).
func (c Campaign) checkMove(site *fleetv1.Site, release string) error {
	target := c.Versions[release]
	running, _ := ControlPlaneVersion(site)
	if target == "" || running == "" {
		return nil
	}
	return versionskew.Check(running, target)
}

// Where ControlPlaneVersion found the version.
const (
	SourceAPIServerPackage = "status.cluster.bootstrap.packages[kube-apiserver]"
	SourceNodes            = "status.cluster.kubernetesVersion"
)

// ControlPlaneVersion is the Kubernetes version the control plane of site's application
// cluster runs, for the version-skew policy, and the status field it comes from; "" when not
// known.
//
// A cluster the BPA builds reports the kube-apiserver package it rolled out to every
// control-plane node: that is the control plane's version. It moves first in an upgrade, so it
// can be newer than the kubelets' (an upgrade that failed at the first kubelet leaves the API
// servers on the new version and every kubelet on the old). Otherwise it is
// status.cluster.kubernetesVersion, the version every node reports (status.kubernetesVersion
// is the site's own local cluster, not the one that moves). Neither is known before the first
// install, which may go to any version, nor, without a BPA report, while nodes run different
// versions.
//
// That decides a campaign's rollback. The package's version changes only once it is on every
// control-plane node, so while the control plane never finished moving it names the version
// the cluster ran before, and returning to the release of that version is a return, not a
// downgrade: allowed. Once the control plane finished moving (even if no kubelet did), its etcd
// holds what the new API servers wrote, and going back is a downgrade Kubernetes does not
// support: the campaign does not dispatch that rollback and says why (Site.NoRollback), and the
// Site webhook, which applies the same rule, would refuse it.
func ControlPlaneVersion(site *fleetv1.Site) (version, source string) {
	sum := site.Status.Cluster
	if sum == nil {
		return "", ""
	}
	if b := sum.Bootstrap; b != nil {
		for _, p := range b.Packages {
			// A package's version may carry a packaging revision ("1.36.3-1"): the first
			// three numbers are Kubernetes'.
			if v, err := utilversion.ParseGeneric(p.Version); p.Name == "kube-apiserver" && err == nil {
				return fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch()), SourceAPIServerPackage
			}
		}
	}
	if sum.KubernetesVersion != "" {
		return sum.KubernetesVersion, SourceNodes
	}
	return "", ""
}

func finalPhase(p fleetv1.OperationPhase) bool {
	return p == fleetv1.OperationSucceeded || p == fleetv1.OperationFailed || p == fleetv1.OperationTimedOut
}

func passed(d *metav1.Time, now time.Time) bool { return d != nil && !now.Before(d.Time) }

func deadline(d *metav1.Time) time.Time {
	if d == nil {
		return time.Time{}
	}
	return d.Time
}

func completion(r *fleetv1.SiteOperationStatus) time.Time {
	if r.CompletionTime != nil {
		return r.CompletionTime.Time
	}
	if r.StartTime != nil {
		return r.StartTime.Time
	}
	return time.Time{}
}
