// Package setup turns the global controller's flags into a running controller-runtime manager:
// scheme, cache indexes, reconcilers, metrics, health probes and leader election.
package setup
