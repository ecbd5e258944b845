// Package enrollment issues single-site, single-use, expiring enrollment tokens and enrolls a
// site's bootstrap machine with them: the machine presents its token over TLS and hands over a
// least-privilege kubeconfig of its own cluster, which the global controller checks and stores
// in the Secret its Site references — the same Secret an operator writes by hand.
//
// A token is "<id>.<secret>". The global cluster keeps, per token, a Secret in the Site's
// namespace (token.go, store.go) with the site, the expiry, a SHA-256 hash of the secret part,
// whether it was revoked and, once used, the fingerprint of the site cluster that used it (the
// SHA-256 of its CA certificate): the secret itself is kept nowhere. The decisions — is this
// token usable by this machine for this site now, is this credential least-privilege — are pure
// functions (token.go, credential.go); server.go does the I/O around them.
//
// Enrolling is idempotent: the token is marked used (bound to the cluster's fingerprint, with an
// optimistic lock, so two machines racing cannot both win) before the kubeconfig is written, so
// a machine that retries after any crash finishes, and another cluster is refused.
//
// A token's holder names the server the global controller connects to, so that connection is
// guarded (siteclient.AddressPolicy, which guards the site clients after enrollment too): the
// server's host is resolved and refused when any of its addresses is loopback, link-local,
// unspecified or multicast outside the policy's allowed networks, the addresses checked are the
// ones dialed, a failure is answered with one generic reason, and every attempt
// that does not enroll counts in the token's record, which ends the token after
// Server.MaxFailures of them.
package enrollment
