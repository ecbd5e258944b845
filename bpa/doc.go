// Package main is the Binary Provisioning Agent (BPA) of a site: a controller-runtime manager on
// the site's local cluster that turns the hosts Metal3 provisioned into the site's application
// Kubernetes cluster, patches them in place, stores the application kubeconfig and installs the
// release's Helm charts (KPM). main.go only parses flags and hands over to setup. Its parts live
// in the packages below: install (atomic package installs on a host), pki (the cluster's
// certificates, kept in the secret store), cluster (bring-up of whatever packages a Release lists —
// the node stack: etcd, kube-apiserver, api-proxy, kube-controller-manager, kube-scheduler,
// containerd, kubelet, kube-proxy — level by level, and patches), charts (Helm releases),
// reconcilers/applicationcluster (what drives them from the ApplicationCluster); the package
// format itself is pkg/packages, shared with the CLI and the test beds.
package main
