// Package cluster brings up an application Kubernetes cluster on provisioned hosts: the
// Binary Provisioning Agent's bootstrap work.
//
// BringUp.Run ensures the cluster's PKI in the secret store (bpa/pki), then installs, over SSH
// (bpa/install), in three phases, each across its hosts in parallel:
//
//  1. etcd on every control-plane host, one etcd cluster (its health check waits for quorum, so
//     the members start together);
//  2. kube-apiserver on every control-plane host, against that etcd cluster;
//  3. the node agent on every host, which registers the host as a Node (kubelet in production,
//     a simulated kubelet in the test beds).
//
// Each host first gets its certificates, keys and the package's environment file
// (/etc/edgefleet/<package>/env) through install.Installer.WriteFile; private keys travel on
// the SSH session's standard input and are written 0600. The admin kubeconfig is saved in the
// secret store as <cluster>-admin-kubeconfig (key "value"); the CA keys and the admin key exist
// only there. Every step is idempotent: Run again after a crash, or on a cluster that is up,
// finishes what is missing and redoes nothing.
package cluster
