// Package bpa is the Binary Provisioning Agent: it installs binary packages on provisioned hosts
// over SSH, brings up, joins, patches and upgrades the application cluster's nodes, stores the
// application kubeconfig, and installs the release's Helm charts (KPM). Its parts live in the
// packages below: install (atomic package installs on a host), pki (the cluster's certificates,
// kept in the secret store), cluster (bring-up of etcd, kube-apiserver and node agents on the
// hosts), nodeagent (the test beds' simulated kubelet); the package format itself is
// pkg/packages, shared with the CLI and the test beds.
package bpa
