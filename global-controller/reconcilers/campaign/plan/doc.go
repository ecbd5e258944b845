// Package plan is the campaign's decision logic, without I/O: it classifies each target Site
// from its spec.operation and status.lastOperation (Classify), resolves the strategy's counts
// and percentages (Resolve), cuts the ordered targets into waves (Waves), tells which sites to
// dispatch now, whether the failure budget tripped and whether the campaign is done (Decide),
// and whether a maintenance window is open (Windows). The reconciler feeds it what it read from
// the informer cache and the time from its clock, and writes what it decides; the same inputs
// always give the same decision, which is what makes a restarted controller carry on exactly
// where the last one stopped.
package plan
