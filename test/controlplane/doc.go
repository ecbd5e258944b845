// Package controlplane starts real Kubernetes control planes — kube-apiserver and etcd built
// from source by hack/tools.sh into bin/ — for tests, the demo and benchmarks, through
// controller-runtime's envtest. One ControlPlane stands for the global cluster; more can be
// started to stand for sites or application clusters. Every control plane is stopped by Stop
// (StartT registers it as a test cleanup; Run and RunWithManager are the TestMain of a package
// sharing one), and a guard process kills it if the test binary dies without stopping it (a
// panic or a timeout), so no apiserver or etcd outlives its test.
//
// Options install edgefleet's CRDs, and Metal3's, Cluster-API's and Istio's, read from the
// module cache at the versions go.mod selects; ApplyManifest creates a repository manifest as
// shipped; SiteKubeconfig prepares a control plane to stand for a site. Update and UpdateStatus
// change an object as a person or its controller would, retrying conflicts.
//
// A control plane can encrypt Secrets at rest (Options.Encryption, SetEncryption): with the
// secretbox fallback, or through a KMS v2 plugin (test/testvault's StartKMSPlugin); Stored reads
// what etcd holds and EtcdFilesContaining searches etcd's files, so tests check what is really
// on disk. It can trust an OIDC issuer (StartOIDCIssuer, Options.JWTAuthenticators), and hands
// out ServiceAccount tokens (ServiceAccountToken, ServiceAccountTokenFile).
package controlplane
