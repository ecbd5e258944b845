// Package v1alpha1 contains the fleet.edgefleet.io/v1alpha1 kinds that live on the global
// cluster: Site (an edge site and how to reach its local controller) and Host (a bare-metal
// machine of a site).
//
// +kubebuilder:object:generate=true
// +groupName=fleet.edgefleet.io
package v1alpha1
