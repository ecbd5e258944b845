package siteinit

import "slices"

// The site stack's long-running services that read files site-init writes.
const (
	apiServerUnit         = "kube-apiserver.service"
	controllerManagerUnit = "kube-controller-manager.service"
	localControllerUnit   = "edgefleet-local-controller.service"
	bpaUnit               = "edgefleet-bpa.service"
	bareMetalOperatorUnit = "baremetal-operator.service"
)

// RestartUnits returns the services of the site stack that must be restarted to take up the
// files of a run (Result.Changed), in the stack's start order: a component whose client
// certificate or kubeconfig changed (it reads them at start), the API server for a new
// service-account key or encryption configuration, every service for a new CA or address. A
// renewed serving certificate of the API server or of the site cache needs none: both are
// served from their files as they change.
func RestartUnits(changed []string) []string {
	all := []string{apiServerUnit, controllerManagerUnit, localControllerUnit, bpaUnit, bareMetalOperatorUnit}
	want := map[string]bool{}
	for _, f := range changed {
		switch f {
		case "pki/ca.crt", "stack.env":
			for _, u := range all {
				want[u] = true
			}
		case "pki/sa.key":
			want[apiServerUnit], want[controllerManagerUnit] = true, true
		case "encryption-config.yaml":
			want[apiServerUnit] = true
		case "pki/controller-manager.crt", "kubeconfig/controller-manager.kubeconfig":
			want[controllerManagerUnit] = true
		case "pki/local-controller.crt", "kubeconfig/local-controller.kubeconfig":
			want[localControllerUnit] = true
		case "pki/bpa.crt", "kubeconfig/bpa.kubeconfig":
			want[bpaUnit] = true
		case "pki/baremetal-operator.crt", "kubeconfig/baremetal-operator.kubeconfig":
			want[bareMetalOperatorUnit] = true
		}
	}
	return slices.DeleteFunc(all, func(u string) bool { return !want[u] })
}
