// Package kubeauth authenticates and authorizes callers of edgefleet's REST APIs the Kubernetes
// way, against the global cluster's API server, so that no user database of edgefleet's own is
// needed:
//
//   - a caller presents a bearer token ("Authorization: Bearer <token>") that the API server
//     accepts — a ServiceAccount token, an OIDC token, whatever authenticator the cluster has —
//     and Reviewer.Authenticate checks it with a TokenReview; or, where the server asks for
//     them, a client certificate of the API server's client CA (the site cache's readers);
//   - what the caller may do is RBAC on a virtual resource (for example "artifacts" in API group
//     "fleet.edgefleet.io"), which needs no CRD: Reviewer.Authorize asks a SubjectAccessReview.
//     The virtual resource is cluster-scoped, so only ClusterRoleBindings grant it;
//   - what the caller may do with real resources (a web UI acting for its user: list the sites of
//     a namespace, patch a campaign) is Reviewer.AuthorizeAccess, any verb on any resource in
//     any namespace.
//
// Reviewer.Middleware authenticates every request and puts the User into the request's context
// (UserFrom); each handler then calls Authorize with the verb of its route.
//
// The identity the Reviewer uses needs permission to create tokenreviews and
// subjectaccessreviews, which the built-in ClusterRole system:auth-delegator grants. Answers are
// cached for a short time (Config.CacheTTL), tokens by their SHA-256 digest only.
package kubeauth
