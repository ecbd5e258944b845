// Package testenv starts real Kubernetes control planes — kube-apiserver and etcd built from
// source by hack/tools.sh into bin/ — for tests, the demo and benchmarks, through
// controller-runtime's envtest. One ControlPlane stands for the global cluster; more can be
// started to stand for sites. Every control plane is stopped by Stop (StartT registers it as a
// test cleanup), and a guard process kills it if the test binary dies without stopping it
// (a panic or a timeout), so no apiserver or etcd outlives its test.
package testenv
