package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// CampaignFinalizer is set on every Campaign so the global controller can drop its metrics and
// in-memory dispatch records before the object goes away.
const CampaignFinalizer = "fleet.edgefleet.io/campaign"

// Operation ID suffixes: a campaign's apply dispatch has the campaign's UID as its ID, the
// pre-cache and rollback dispatches the UID with these suffixes.
const (
	// PreCacheIDSuffix ends the ID of a campaign's pre-cache dispatch.
	PreCacheIDSuffix = "-precache"
	// RollbackIDSuffix ends the ID of a campaign's rollback dispatch.
	RollbackIDSuffix = "-rollback"
	// StepIDSuffix, then the step's number (from 1), ends the ID of a step of a site's move
	// through intermediate releases, one Kubernetes minor version at a time; the last step, to
	// the campaign's release, is the apply.
	StepIDSuffix = "-step-"
)

// Campaign conditions.
const (
	// CampaignProgressingCondition is True while the campaign may dispatch work to sites (or
	// waits for in-flight work to finish), False while it waits for something outside itself
	// (release, blocking campaigns, pause) or has finished. The reason says which.
	CampaignProgressingCondition = "Progressing"
	// CampaignCompleteCondition is True once the campaign reached a final phase (Succeeded,
	// PartiallySucceeded, Failed or Aborted); the reason says which, the message gives the
	// counts.
	CampaignCompleteCondition = "Complete"
)

// Reasons used by the Campaign conditions.
const (
	// ReasonReleaseNotReady means the campaign's release does not exist or is not Ready.
	ReasonReleaseNotReady = "ReleaseNotReady"
	// ReasonReleaseInvalid means the campaign's release will never be Ready (ReleaseNeverReady):
	// the campaign ended Failed before its first dispatch.
	ReasonReleaseInvalid = "ReleaseInvalid"
	// ReasonBlocked means a campaign in spec.blockedBy has not succeeded yet; the message names it.
	ReasonBlocked = "Blocked"
	// ReasonDryRun means spec.dryRun is set: status.plan holds the waves, no site is touched.
	ReasonDryRun = "DryRun"
	// ReasonPreCaching means the release's artifacts are being cached at every target before the
	// first apply.
	ReasonPreCaching = "PreCaching"
	// ReasonRollingOut means sites are being dispatched wave by wave.
	ReasonRollingOut = "RollingOut"
	// ReasonWaitingForCanaries means the canaries are running: the rest waits for all of them to succeed.
	ReasonWaitingForCanaries = "WaitingForCanaries"
	// ReasonPaused means spec.paused is set: nothing new is dispatched, in-flight sites finish.
	ReasonPaused = "Paused"
	// ReasonOutsideMaintenanceWindow means no site that is left may start now: neither the
	// campaign's windows nor theirs are open. The message says when the next one opens.
	ReasonOutsideMaintenanceWindow = "OutsideMaintenanceWindow"
	// ReasonSitesBusy means no site that is left may start now: another campaign's operation
	// runs on each of them. The message names the first and the operation.
	ReasonSitesBusy = "SitesBusy"
	// ReasonFailureBudgetExceeded means more sites failed than strategy.failureBudget allows:
	// nothing new is dispatched. The message gives the counts.
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	// ReasonCanaryFailed means a canary failed or timed out: nothing else is dispatched.
	ReasonCanaryFailed = "CanaryFailed"
	// ReasonAbortRequested means spec.abort is set: nothing new is dispatched. A campaign that
	// had not dispatched any site (waiting for its release or a blocker) ends Aborted at once.
	ReasonAbortRequested = "AbortRequested"
	// ReasonCampaignSucceeded means every target succeeded or already ran the release.
	ReasonCampaignSucceeded = "Succeeded"
	// ReasonSitesNotSucceeded means the campaign ran to its end within its failure budget but
	// not every target succeeded: some failed, timed out or were skipped (status.failedSites
	// names them).
	ReasonSitesNotSucceeded = "SitesNotSucceeded"
	// ReasonNoSiteSucceeded means the campaign ran to its end and no target succeeded, or
	// spec.targets matched no Site.
	ReasonNoSiteSucceeded = "NoSiteSucceeded"
	// ReasonInvalidSpec means the spec cannot be used as written (e.g. a bad cron expression);
	// the message names the field. A campaign that has not dispatched any site ends Failed with
	// it; a started one dispatches nothing new until the field is fixed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSpecChanged means the spec's action, release or dryRun differs from what the
	// campaign dispatched to its sites (the API server refuses such a change; this catches one
	// made past it): the campaign ends Failed, nothing more is dispatched, the sites dispatched
	// keep their operation. The message names both releases (or actions).
	ReasonSpecChanged = "SpecChanged"
)

// CampaignPhase is where a campaign stands.
// +kubebuilder:validation:Enum=Pending;Blocked;DryRun;PreCaching;Running;Paused;Aborting;Succeeded;PartiallySucceeded;Failed;Aborted
type CampaignPhase string

// Campaign phases. Succeeded, PartiallySucceeded, Failed and Aborted are final.
const (
	// CampaignPending waits for its release to be Ready (or has not been reconciled yet).
	CampaignPending CampaignPhase = "Pending"
	// CampaignBlocked waits for the campaigns of spec.blockedBy to succeed.
	CampaignBlocked CampaignPhase = "Blocked"
	// CampaignDryRun has written its plan to status.plan and touches no site.
	CampaignDryRun CampaignPhase = "DryRun"
	// CampaignPreCaching caches the release's artifacts at every target.
	CampaignPreCaching CampaignPhase = "PreCaching"
	// CampaignRunning dispatches sites.
	CampaignRunning CampaignPhase = "Running"
	// CampaignPaused dispatches nothing new while spec.paused is set.
	CampaignPaused CampaignPhase = "Paused"
	// CampaignAborting dispatches nothing new (abort requested, canary failed, or failure budget
	// exceeded) and waits for the sites in flight and the rollbacks.
	CampaignAborting CampaignPhase = "Aborting"
	// CampaignSucceeded finished with every target succeeded (or already at the release). It
	// is the only phase that lets the campaigns blocked by this one start.
	CampaignSucceeded CampaignPhase = "Succeeded"
	// CampaignPartiallySucceeded ran to its end within the failure budget, but some targets
	// failed, timed out or were skipped; status.failedSites names them.
	CampaignPartiallySucceeded CampaignPhase = "PartiallySucceeded"
	// CampaignFailed stopped because a canary failed or the failure budget was exceeded, or
	// ran to its end with no target succeeded, or was refused before its first dispatch for an
	// invalid spec (InvalidSpec) or a release that will never be Ready (ReleaseInvalid), or
	// found its spec different from what it had dispatched (SpecChanged).
	CampaignFailed CampaignPhase = "Failed"
	// CampaignAborted stopped because spec.abort was set.
	CampaignAborted CampaignPhase = "Aborted"
)

// Final reports whether the phase is one a campaign ends in.
func (p CampaignPhase) Final() bool {
	return p == CampaignSucceeded || p == CampaignPartiallySucceeded || p == CampaignFailed || p == CampaignAborted
}

// CampaignSpec says what to roll out, where, and how.
//
// Action, release and targets are fixed when the campaign is created: the rules hold whatever
// the status says (a status field can be rewritten by anyone who may update campaigns/status).
// The one exception is a dry run, which touches no site: while spec.dryRun is set they may
// change, and clearing dryRun (in the same update or later) fixes them. A campaign created
// without dryRun can never be made one.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.abort) || !oldSelf.abort || (has(self.abort) && self.abort)",message="abort cannot be undone"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.dryRun) && oldSelf.dryRun) || self.action == oldSelf.action",fieldPath=".action",message="cannot change once the campaign is created (only while spec.dryRun is set): delete the campaign and create it again with the new action"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.dryRun) && oldSelf.dryRun) || self.release == oldSelf.release",fieldPath=".release",message="cannot change once the campaign is created (only while spec.dryRun is set): delete the campaign and create it again with the new release"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.dryRun) && oldSelf.dryRun) || self.targets == oldSelf.targets",fieldPath=".targets",message="cannot change once the campaign is created (only while spec.dryRun is set): delete the campaign and create it again with the new targets"
// +kubebuilder:validation:XValidation:rule="!has(self.dryRun) || !self.dryRun || (has(oldSelf.dryRun) && oldSelf.dryRun)",fieldPath=".dryRun",message="cannot be set on a campaign created without it (the campaign may have dispatched sites): create a new campaign with dryRun set"
type CampaignSpec struct {
	// Action run on every target site. Fixed at creation (while dryRun is set it may change).
	// +required
	Action OperationAction `json:"action"`

	// Release, in the Campaign's namespace, that the targets go to. It must be Ready. Fixed at
	// creation (while dryRun is set it may change).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Release string `json:"release"`

	// Targets are the Sites, in the Campaign's namespace, the campaign runs on. Fixed at
	// creation (while dryRun is set they may change).
	// +required
	Targets CampaignTargets `json:"targets"`

	// Strategy says how fast the campaign goes and when it stops.
	// +optional
	Strategy CampaignStrategy `json:"strategy,omitempty"`

	// BlockedBy names campaigns, in the same namespace, that must have Succeeded before this one
	// starts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	BlockedBy []string `json:"blockedBy,omitempty"`

	// Paused stops new dispatches while set; sites in flight finish. Clear it to resume.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Abort stops the campaign for good: nothing new is dispatched, sites in flight finish (and
	// are rolled back if they fail and strategy.rollbackOnFailure is set). It cannot be undone.
	// +optional
	Abort bool `json:"abort,omitempty"`

	// DryRun writes the wave plan to status.plan without touching any site; while it is set,
	// action, release and targets may still change. Clear it to run the campaign as planned
	// (that fixes them). It cannot be set on a campaign created without it.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// CampaignTargets select Sites: the listed names first, in their order, then the sites the
// selector matches, by name; the excluded names are left out.
// +kubebuilder:validation:XValidation:rule="has(self.selector) || (has(self.names) && size(self.names) > 0)",message="give a selector or names"
type CampaignTargets struct {
	// Selector matches Sites by label. An empty selector matches every Site of the namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Names of Sites, dispatched first and in this order (the first ones are the canaries).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`

	// Exclude names Sites never dispatched, even when selected.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=253
	Exclude []string `json:"exclude,omitempty"`
}

// CampaignStrategy is the pace and the brakes of a campaign. Counts given as "N%" are a share
// of the target sites that are not skipped, rounded up.
type CampaignStrategy struct {
	// Canaries is how many sites (or what share, "1%") go first, all at once. The rest waits
	// until every canary succeeded; a canary that fails or times out fails the campaign.
	// Default 0: no canaries.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) <= 100",message="must be a count >= 0 or a percentage such as \"5%\""
	Canaries *intstr.IntOrString `json:"canaries,omitempty"`

	// MaxConcurrency caps how many sites are in flight at once (a sliding window: a site starts
	// as soon as another finishes, there is no barrier between waves). Default 10.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) >= 1 && int(self.replace('%', '')) <= 100",message="must be a count >= 1 or a percentage between 1% and 100%"
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// InitialConcurrency is the window of the first wave after the canaries; each wave whose
	// sites all succeeded multiplies it by RampFactor, up to MaxConcurrency. Default:
	// MaxConcurrency (no ramp).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) >= 1 && int(self.replace('%', '')) <= 100",message="must be a count >= 1 or a percentage between 1% and 100%"
	InitialConcurrency *intstr.IntOrString `json:"initialConcurrency,omitempty"`

	// RampFactor multiplies the window after each wave that succeeded. Default 1: no ramp.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	RampFactor int32 `json:"rampFactor,omitempty"`

	// FailureBudget stops new dispatches once too many sites failed or timed out. Default: no
	// failure tolerated (the first site that fails or times out stops new dispatches); set
	// maxFailures (e.g. "2%") to let a large campaign ride out isolated failures.
	// +optional
	FailureBudget *FailureBudget `json:"failureBudget,omitempty"`

	// SiteTimeout bounds each site's operation from its dispatch; past it the site counts as
	// timed out. Default 2h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('168h')",message="must be a duration between 0s (exclusive) and 168h"
	SiteTimeout *metav1.Duration `json:"siteTimeout,omitempty"`

	// Soak is how long a site must stay Succeeded before it counts as succeeded (and frees its
	// place in the window). Default 0.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be a duration between 0s and 24h"
	Soak *metav1.Duration `json:"soak,omitempty"`

	// MaintenanceWindows are when the campaign may dispatch (empty: any time). Patch and
	// upgrade dispatches also wait for one of the site's own spec.maintenanceWindows.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`

	// PreCache caches the release's artifacts at every target before the first site is
	// dispatched. A site whose pre-cache fails counts as failed and is not dispatched.
	// +optional
	PreCache bool `json:"preCache,omitempty"`

	// RollbackOnFailure dispatches, to every site that failed or timed out, a patch back to the
	// release it ran before (when it had one).
	// +optional
	RollbackOnFailure bool `json:"rollbackOnFailure,omitempty"`
}

// FailureBudget is how many failed sites a campaign tolerates.
type FailureBudget struct {
	// MaxFailures is the count of failed sites (or their share of the finished sites, "2%")
	// above which new dispatches stop.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,3}%$') && int(self.replace('%', '')) <= 100",message="must be a count >= 0 or a percentage such as \"2%\""
	MaxFailures intstr.IntOrString `json:"maxFailures"`

	// MinFinished is how many sites must have finished (succeeded, failed or timed out) before
	// the budget can trip. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinFinished int32 `json:"minFinished,omitempty"`
}

// CampaignStatus is how far the campaign went. Per-site results live on each Site
// (status.lastOperation); this status stays small whatever the number of sites.
type CampaignStatus struct {
	// Phase in one word.
	// +optional
	Phase CampaignPhase `json:"phase,omitempty"`

	// Conditions: Progressing, Complete.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Total is the number of target sites, skipped ones included.
	// +optional
	Total int32 `json:"total,omitempty"`

	// Progress is "done/total" (done: succeeded, failed, timed out or skipped).
	// +optional
	Progress string `json:"progress,omitempty"`

	// Failed is how many sites failed or timed out (counts.failed + counts.timedOut).
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// Counts of the target sites by state.
	// +optional
	Counts CampaignCounts `json:"counts,omitempty"`

	// CurrentWave is the highest wave with a dispatched site (0: the canaries).
	// +optional
	CurrentWave int32 `json:"currentWave,omitempty"`

	// Waves is how many waves the plan has, the canaries' included.
	// +optional
	Waves int32 `json:"waves,omitempty"`

	// FinishedWaves is how many waves, from the first, have every site finished.
	// +optional
	FinishedWaves int32 `json:"finishedWaves,omitempty"`

	// Window is how many sites may be in flight now.
	// +optional
	Window int32 `json:"window,omitempty"`

	// StartTime is when the first site was dispatched.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// PreCacheCompletionTime is when every target finished pre-caching.
	// +optional
	PreCacheCompletionTime *metav1.Time `json:"preCacheCompletionTime,omitempty"`

	// CompletionTime is when the campaign reached a final phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// FailedSites names sites that failed, timed out or were skipped, with why (at most 50;
	// the counts are complete). Each Site's status.lastOperation has the details.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	FailedSites []CampaignSiteResult `json:"failedSites,omitempty"`

	// Plan is the wave plan, written while spec.dryRun is set.
	// +optional
	Plan *CampaignPlan `json:"plan,omitempty"`
}

// CampaignCounts counts target sites by state; a count left out is zero.
type CampaignCounts struct {
	// Pending sites are not dispatched yet.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// PreCaching sites are caching the release's artifacts (or have, and wait for their turn).
	// +optional
	PreCaching int32 `json:"preCaching,omitempty"`
	// InProgress sites were dispatched and have not finished (soaking ones included).
	// +optional
	InProgress int32 `json:"inProgress,omitempty"`
	// Succeeded sites run the release (and soaked).
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed sites were reported failed by the site (pre-cache failures included).
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// TimedOut sites did not finish before their deadline.
	// +optional
	TimedOut int32 `json:"timedOut,omitempty"`
	// Skipped sites were not dispatched: no spec.cluster, already at the release, or not found.
	// +optional
	Skipped int32 `json:"skipped,omitempty"`
	// RollingBack sites are being patched back to their previous release (counted as failed too).
	// +optional
	RollingBack int32 `json:"rollingBack,omitempty"`
	// RolledBack sites are back at their previous release (counted as failed too).
	// +optional
	RolledBack int32 `json:"rolledBack,omitempty"`
}

// CampaignSiteResult says why a site did not succeed.
type CampaignSiteResult struct {
	// Name of the Site.
	// +required
	Name string `json:"name"`
	// State of the site in the campaign: Failed, TimedOut or Skipped.
	// +required
	State string `json:"state"`
	// Reason, from the site's last operation or the campaign.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// CampaignPlan is the dry-run plan: which sites go in which wave.
type CampaignPlan struct {
	// Waves in order; the first is the canaries' when there are canaries.
	// +optional
	// +listType=atomic
	Waves []CampaignWave `json:"waves,omitempty"`
	// Skipped sites, with why (at most 100 listed).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Skipped []CampaignSiteResult `json:"skipped,omitempty"`
	// Steps lists the sites the campaign moves more than one Kubernetes minor version, through
	// a release of each minor version between (at most 100 listed).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Steps []CampaignSiteSteps `json:"steps,omitempty"`
	// Truncated is set when some site names were left out to keep the status small; the
	// sizes are complete.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// CampaignSiteSteps is a site's move through intermediate releases: the version-skew policy
// moves a cluster one Kubernetes minor version per step.
type CampaignSiteSteps struct {
	// Name of the Site.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Releases the site goes to, one step each, in order; the campaign's release last.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Releases []string `json:"releases"`
}

// CampaignWave is one wave of the plan.
type CampaignWave struct {
	// Index of the wave, from 0.
	// +required
	Index int32 `json:"index"`
	// Canary is set on the canaries' wave.
	// +optional
	Canary bool `json:"canary,omitempty"`
	// Size is how many sites the wave has.
	// +required
	Size int32 `json:"size"`
	// Window is how many sites may be in flight while the wave runs.
	// +required
	Window int32 `json:"window"`
	// Sites of the wave, in dispatch order (may be cut short, see plan.truncated).
	// +optional
	// +listType=atomic
	Sites []string `json:"sites,omitempty"`
}

// Campaign rolls a Release out to many Sites: canaries first, then waves in a sliding window
// that grows as waves succeed, stopping when too many fail.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.release`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Done/Total",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.currentWave`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Campaign struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   CampaignSpec   `json:"spec"`
	Status CampaignStatus `json:"status,omitempty"`
}

// CampaignList is a list of Campaigns.
//
// +kubebuilder:object:root=true
type CampaignList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Campaign `json:"items"`
}
