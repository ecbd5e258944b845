package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the site kinds.
var GroupVersion = schema.GroupVersion{Group: "site.edgefleet.io", Version: "v1alpha1"}

// AddToScheme adds the site kinds to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ArtifactSet{}, &ArtifactSetList{},
		&ApplicationCluster{}, &ApplicationClusterList{},
		&ClusterCredentialRequest{}, &ClusterCredentialRequestList{},
		&EdgeCluster{}, &EdgeClusterList{},
		&LogRequest{}, &LogRequestList{},
		&EdgeMachine{}, &EdgeMachineList{},
		&EdgeMachineTemplate{}, &EdgeMachineTemplateList{},
		&EdgeBootstrapConfig{}, &EdgeBootstrapConfigList{},
		&EdgeBootstrapConfigTemplate{}, &EdgeBootstrapConfigTemplateList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
