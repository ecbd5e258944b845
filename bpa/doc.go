// Package bpa is the Binary Provisioning Agent: it installs binary packages on provisioned hosts
// over SSH, brings up, joins, patches and upgrades the application cluster's nodes, stores the
// application kubeconfig, and installs the release's Helm charts (KPM). Its parts live in the
// packages below: packages (the package format), install (atomic installs on a host).
package bpa
