// Package bpa will be the Binary Provisioning Agent: it installs binary packages on provisioned
// hosts over SSH, brings up, joins, patches and upgrades the application cluster's nodes, stores
// the application kubeconfig, and installs the release's Helm charts (KPM). Filled by the BPA work.
package bpa
