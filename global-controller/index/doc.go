// Package index defines the global controller's cache field indexes, registered once on the
// manager and shared by the reconcilers that look objects up through them.
package index
