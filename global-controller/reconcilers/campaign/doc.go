// Package campaign reconciles Campaign objects: it rolls a Release out to many Sites, canaries
// first, then wave after wave in a sliding window that grows as waves succeed, and stops
// dispatching when a canary fails, the failure budget is exceeded or the operator aborts.
//
// The dispatch to a site is one merge patch of the Site (spec.operation and
// spec.cluster.release) with the resourceVersion the cache saw as precondition; the site
// reconciler reports on it in the Site's status.lastOperation, which the campaign only reads.
// Every decision is made again from those two fields on every reconcile (package plan), so a
// controller killed at any point carries on where it stopped: a site whose spec.operation.id is
// the campaign's was dispatched and is never dispatched again. Dispatches written but not yet
// seen in the informer cache are remembered in memory (expectations.go) so that the window holds
// between a dispatch and its watch event.
//
// The campaign's status holds counts, the current wave and at most 50 failed sites, whatever
// the number of targets; per-site results stay on the Sites. Phases live in
// campaign_phases.go, the patches in dispatch.go.
package campaign
