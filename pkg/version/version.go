// Package version reports the version edgefleet's binaries were built as.
package version

// Version is stamped at link time by the Makefile (-X .../pkg/version.Version=...) and never
// written at run time; an unstamped build reports "dev".
var Version = "dev"
