// Package realhosts holds edgefleet's end-to-end suites on real test hosts (network namespaces,
// systemd, real kubelets and containerd; needs root): the BPA building, upgrading and changing a
// site's application cluster, and campaigns over sites. The heaviest suite of `make test`, it
// runs beside the other packages (see the Makefile).
package realhosts
