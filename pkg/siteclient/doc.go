// Package siteclient connects the global controller to edge sites. A site's kubeconfig is
// untrusted input: Load accepts only inline credentials (certificates, tokens, basic auth) and
// refuses exec and auth-provider plugins and paths to local files, which would run code or read
// files on the global controller. Cache keeps one client per site and rebuilds it when the
// kubeconfig Secret changes; Probe asks a site for its version and its local controller's, and
// Client gives the controller-runtime client through which the global controller pushes objects
// to the site.
package siteclient
