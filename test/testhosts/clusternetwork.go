package testhosts

import (
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// ClusterNetwork is the network of a cluster on the hosts: pod CIDR 10.244.0.0/16, service CIDR
// 10.96.0.0/12, the first host's address as the API endpoint.
func (hn *HostNet) ClusterNetwork() sitev1.ClusterNetwork {
	return sitev1.ClusterNetwork{
		PodCIDRs:             []string{"10.244.0.0/16"},
		ServiceCIDRs:         []string{"10.96.0.0/12"},
		ControlPlaneEndpoint: sitev1.APIEndpoint{Host: hn.Hosts[0].IP.String()},
	}
}
