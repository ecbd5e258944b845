// Package clustercredential answers ClusterCredentialRequests on the BPA's side: it signs a
// cluster user's client certificate with the application cluster's CA (bpa/pki) for exactly the
// identity and expiry the request's spec names, never what the CSR would say otherwise, and
// writes it, with the cluster's server and CA, into the request's status — or why not.
package clustercredential
