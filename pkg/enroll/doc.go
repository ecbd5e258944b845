// Package enroll is the site side of zero-touch enrollment, run once at a bootstrap machine's
// first boot (bin/local-controller enroll): with the site cluster's admin credential, which never
// leaves the machine, it applies the access the global controller gets on the site
// (deploy/rbac/site: Role and RoleBinding edgefleet-global, ServiceAccount edgefleet-global),
// mints a token of that ServiceAccount (TokenRequest), and hands a kubeconfig with it to the
// global controller's POST /api/v1/enroll with the enrollment token in the Authorization header,
// over TLS that trusts only the pinned CA. It retries with backoff until done or its deadline;
// once done it records so in ConfigMap edgefleet-system/edgefleet-enrollment, and a later boot
// does nothing.
package enroll
