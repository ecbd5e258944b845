// Package site reconciles Site objects: it loads each site's kubeconfig from its Secret (as
// untrusted input), keeps a client per site, probes the site's API server on a heartbeat with
// backoff while it is unreachable, counts the site's hosts, and reports all of it as the
// KubeconfigValid, Reachable and Ready conditions, with an event on every condition change.
package site
