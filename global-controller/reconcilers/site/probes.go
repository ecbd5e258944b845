package site

import (
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// probeTimes is when a site was last probed and when it last answered, remembered so that a
// probe that finds nothing new need not be written to the Site (holdProbeTimes).
type probeTimes struct {
	checked, answered time.Time
}

// holdProbeTimes keeps the probe times the Site has when they are all this reconcile would
// change and the written lastCheckTime is younger than StatusReportInterval: a heartbeat that
// finds the site as it was costs no write (10,000 sites probed every minute would otherwise
// write 167 Sites a second). Any other change writes the current times with it.
func (r *Reconciler) holdProbeTimes(before, site *fleetv1.Site) {
	written, check, beat := before.Status.LastCheckTime, site.Status.LastCheckTime, site.Status.LastHeartbeatTime
	if written == nil || check == nil || check.Sub(written.Time) >= r.StatusReportInterval {
		return
	}
	site.Status.LastCheckTime, site.Status.LastHeartbeatTime = written, before.Status.LastHeartbeatTime
	if !apiequality.Semantic.DeepEqual(before.Status, site.Status) {
		site.Status.LastCheckTime, site.Status.LastHeartbeatTime = check, beat
	}
}
