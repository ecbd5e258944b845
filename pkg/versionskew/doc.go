// Package versionskew is Kubernetes' version-skew policy for a whole cluster changing version,
// as a decision without I/O: Check tells whether a cluster whose every node runs one version
// may be told to run another. The rules are those of
// https://kubernetes.io/releases/version-skew-policy/ applied to a move of the whole cluster,
// control plane first: the control plane is never downgraded (neither a minor nor a patch
// version: its etcd holds objects the newer API server wrote), and one move goes up at most one
// minor version. The third rule, kubelets never newer than the API servers, follows from those
// two for a move that takes the control plane first and the nodes after it. The same version is
// a move to nowhere, and allowed.
package versionskew
