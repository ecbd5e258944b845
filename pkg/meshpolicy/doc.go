// Package meshpolicy keeps a component's Istio policies current where Istio's CRDs are
// installed: a PeerAuthentication that makes its pods accept mutual TLS only, and an
// AuthorizationPolicy that lets only the named callers reach each port it serves (the artifact
// API, the web UI, the webhooks, the site cache). The builders are pure functions of a
// Component; the Reconciler creates the two objects, repairs them when they are edited or
// deleted, and Uninstall removes them. Setup turns all of it off where the CRDs are absent.
// The objects are istio.io/client-go's typed objects with istio.io/api's specs.
package meshpolicy
