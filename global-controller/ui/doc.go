// Package ui is the global controller's web UI: server-rendered pages (html/template, a little
// vanilla JavaScript, both embedded in the binary) served by gin under /ui/, next to the
// artifact API and with the same TLS.
//
// Users sign in with a bearer token the global cluster's API server accepts; the token is kept
// in an HttpOnly, Secure, SameSite=Strict cookie and checked on every request with a
// TokenReview. Every page and every action is authorized as the user's own request would be:
// a SubjectAccessReview of the verb on the real resource (list sites in a namespace, get one
// campaign, patch it to pause it), so the ClusterRoles edgefleet-fleet-viewer and
// edgefleet-fleet-admin (deploy/rbac/global-controller/roles.yaml) decide what is shown. Posts
// must come from the UI's own pages (Origin check). The pause, resume and abort buttons appear
// only to users who may patch the campaign, and the controller writes the patch with its own
// identity after that check, recording the user in an event on the campaign.
//
// Pages read the manager's informer cache, never the API server (but for a site's Events,
// which are not cached): the site list filters, sorts and pages 10,000 sites on the server in
// milliseconds. Each page's live part is kept current by a server-sent event stream from the
// same URL: Hub.Watch publishes the informers' events, each stream re-renders its fragment
// (at most every Limits.UpdateInterval, holding at most one pending notification), and every
// stream has a lifetime, a keep-alive, a write deadline, and a place among Limits.MaxStreams.
package ui
