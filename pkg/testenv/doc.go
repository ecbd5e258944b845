// Package testenv starts real Kubernetes control planes — kube-apiserver and etcd built from
// source by hack/tools.sh into bin/ — for tests, the demo and benchmarks, through
// controller-runtime's envtest. One ControlPlane stands for the global cluster; more can be
// started to stand for sites. Every control plane is stopped by Stop (StartT registers it as a
// test cleanup), and a guard process kills it if the test binary dies without stopping it
// (a panic or a timeout), so no apiserver or etcd outlives its test.
//
// A site's control plane can also run Metal3: StartMetal3 installs the baremetal-operator's
// CRDs and runs the operator (bin/bmo, also built by hack/tools.sh) in its fixture test mode,
// so BareMetalHosts go through the operator's real state machine up to provisioned. Options
// can install Cluster-API's core CRDs for reconcilers that run in-process. Third-party CRDs are
// read from the module cache at the versions go.mod selects.
//
// The BPA's targets are real hosts (NewHosts, StartHosts; needs root): the Debian root filesystem
// built by hack/rootfs.sh (bin/rootfs) on an overlayfs per host, booted with systemd as PID 1 in
// new PID, mount, UTS, IPC, network and cgroup namespaces, running OpenSSH, on a bridge of a
// network namespace of their own that the test reaches through a veth link. Hosts can be
// provisioned (hostname, authorized keys), booted, cut off the network, restored and stopped;
// everything goes with the processes, which the guard kills if the test binary dies. See
// docs/test-hosts.md.
//
// The test beds' artifacts are built from the recipes under hack/: binary packages
// (BuildPackage, hack/packages), Helm charts (BuildChart, hack/charts) and container images
// (BuildImage, hack/images: OCI archives made with go-containerregistry, no registry), each the
// same bytes for the same inputs; the *In forms serve programs that are not tests (the demo).
//
// StartVault runs a Vault dev server (bin/vault) with a root token made at random for the test
// and kept out of the server's log, for pkg/secrets and the KMS plugin's transit key.
//
// A control plane can encrypt Secrets at rest (Options.Encryption, SetEncryption): with the
// secretbox fallback, or through bin/edgefleet-kms (StartKMSPlugin) and a Vault transit key;
// Stored reads what etcd holds and EtcdFilesContaining searches etcd's files, so tests check
// what is really on disk.
package testenv
