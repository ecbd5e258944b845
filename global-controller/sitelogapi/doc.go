// Package sitelogapi serves GET /api/v1/namespaces/{namespace}/sites/{site}/log, the log
// viewer's global side: a user granted get on sites/log (RBAC of the global cluster, checked
// with a fresh SubjectAccessReview on every request) gets the recent log lines of one of the
// site's components (local controller or BPA). The only channel to a site is its API server, so
// the question is a LogRequest created on the site, answered by the component from the lines it
// keeps in memory (pkg/sitelogs), and always deleted (siteclient.Ask). The web UI and
// `edgefleet site logs` use it.
package sitelogapi
