// Package kubeconfigapi serves POST /api/v1/namespaces/{namespace}/sites/{site}/kubeconfig:
// a cluster user granted create on sites/kubeconfig (RBAC of the global cluster, checked with a
// fresh SubjectAccessReview on every request) sends a CSR for a key they keep and gets a
// short-lived client certificate of the site's application cluster, signed by the site's BPA
// through a ClusterCredentialRequest, for their own identity prefixed with "edgefleet:".
package kubeconfigapi
