package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the fleet kinds.
var GroupVersion = schema.GroupVersion{Group: "fleet.edgefleet.io", Version: "v1alpha1"}

// AddToScheme adds the fleet kinds to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Site{}, &SiteList{}, &Host{}, &HostList{}, &Release{}, &ReleaseList{}, &Campaign{}, &CampaignList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
