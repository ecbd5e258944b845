// Package setup wires the local controller: options and flags, the manager on the site's
// local cluster, the site artifact cache (reconciler, HTTP server, periodic verification) and
// the info ConfigMap through which the site tells the global controller its version.
package setup
