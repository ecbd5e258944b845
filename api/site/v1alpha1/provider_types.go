package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The local controller is the Cluster-API infrastructure provider (EdgeCluster, EdgeMachine,
// EdgeMachineTemplate: a machine is a Metal3 BareMetalHost) and bootstrap provider
// (EdgeBootstrapConfig, EdgeBootstrapConfigTemplate) of its site, following Cluster-API's v1beta2
// contracts. Their CRDs carry the label cluster.x-k8s.io/v1beta2=v1alpha1 through which
// Cluster-API finds the version that speaks the contract.

// EdgeMachineFinalizer lets the provider release or deprovision the machine's host first.
const EdgeMachineFinalizer = "site.edgefleet.io/edgemachine"

// Labels and annotations the providers put on objects.
const (
	// ClusterNameLabel names the ApplicationCluster a BareMetalHost belongs to.
	ClusterNameLabel = "site.edgefleet.io/cluster"
	// ClusterNamespaceLabel is the namespace of that ApplicationCluster: BareMetalHosts live
	// apart from it, in HostsNamespace.
	ClusterNamespaceLabel = "site.edgefleet.io/cluster-namespace"
	// HostRoleLabel is the role of a BareMetalHost in its cluster (HostRole).
	HostRoleLabel = "site.edgefleet.io/role"
	// HostNameLabel is the name of the cluster host a BareMetalHost or Machine stands for.
	HostNameLabel = "site.edgefleet.io/host"
)

// EdgeMachine conditions.
const (
	// EdgeMachineReadyCondition is True once the machine's host is provisioned.
	EdgeMachineReadyCondition = "Ready"
	// ReasonWaitingForBootstrapData means the Machine has no bootstrap data yet.
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// ReasonNoHost means no free BareMetalHost matches the host selector.
	ReasonNoHost = "NoMatchingHost"
	// ReasonHostProvisioning means the bound host is being provisioned; the message has its state.
	ReasonHostProvisioning = "HostProvisioning"
	// ReasonHostError means Metal3 reported an error on the bound host; the message has it.
	ReasonHostError = "HostError"
	// ReasonHostProvisioned means the bound host is provisioned.
	ReasonHostProvisioned = "HostProvisioned"
	// ReasonHostReleasing means the machine is being deleted and its host is being
	// deprovisioned or released; the message has the host's state.
	ReasonHostReleasing = "HostReleasing"
)

// EdgeCluster conditions.
const (
	// EdgeClusterReadyCondition is True once the cluster's infrastructure is provisioned.
	EdgeClusterReadyCondition = "Ready"
	// ReasonWaitingForOwner means Cluster-API has not set the owner (Cluster of an EdgeCluster,
	// Machine of an EdgeMachine) yet, or the owner does not exist.
	ReasonWaitingForOwner = "WaitingForOwner"
	// ReasonNoControlPlaneEndpoint means spec.controlPlaneEndpoint.host is empty.
	ReasonNoControlPlaneEndpoint = "NoControlPlaneEndpoint"
	// ReasonInfrastructureProvisioned means the cluster's infrastructure is provisioned.
	ReasonInfrastructureProvisioned = "InfrastructureProvisioned"
)

// MachineAddress is an address of a machine, as Cluster-API reads it.
type MachineAddress struct {
	// Type: Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
	// +required
	// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
	Type string `json:"type"`
	// Address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// HostSelector picks the BareMetalHost of a machine: by exact boot MAC, or by labels among the
// free hosts. Never by a part of a name or MAC.
// +kubebuilder:validation:XValidation:rule="has(self.bootMACAddress) || (has(self.matchLabels) && size(self.matchLabels) > 0)",message="give bootMACAddress or matchLabels"
type HostSelector struct {
	// BootMACAddress binds the machine to the host with exactly this boot MAC.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	BootMACAddress string `json:"bootMACAddress,omitempty"`
	// MatchLabels binds the machine to a free host carrying all these labels.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// MachineImage is what Metal3 writes to the host.
type MachineImage struct {
	// URL of the image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// SHA256 of the image, checked by Ironic.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256"`
	// Format: raw, qcow2 or live-iso; empty lets Ironic detect it.
	// +optional
	// +kubebuilder:validation:Enum=raw;qcow2;live-iso
	Format string `json:"format,omitempty"`
}

// EdgeMachineSpec is the desired machine.
type EdgeMachineSpec struct {
	// ProviderID is "metal3://<namespace>/<host>", set once the machine is bound.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
	// HostSelector picks the machine's BareMetalHost.
	// +required
	HostSelector HostSelector `json:"hostSelector"`
	// Image written to the host.
	// +required
	Image MachineImage `json:"image"`
	// RemovalPolicy says what happens to the host when the machine is deleted: Deprovision
	// (default) wipes it, Keep leaves it provisioned and only releases it.
	// +optional
	// +kubebuilder:default=Deprovision
	RemovalPolicy HostRemovalPolicy `json:"removalPolicy,omitempty"`
}

// Initialization is the v1beta2 contract's readiness flag of an infrastructure object.
type Initialization struct {
	// Provisioned is true once the infrastructure is ready.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// EdgeMachineStatus is what the provider saw.
type EdgeMachineStatus struct {
	// Initialization.provisioned is true once the host is provisioned.
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
	// Host is the name of the bound BareMetalHost.
	// +optional
	Host string `json:"host,omitempty"`
	// ProvisioningState is Metal3's state of the bound host.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// Addresses of the machine.
	// +optional
	// +listType=atomic
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// Conditions: Ready, and Paused (True while the object or its Cluster is paused, as
	// Cluster-API's v1beta2 contract asks of providers).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EdgeMachine is a Cluster-API infrastructure machine backed by one Metal3 BareMetalHost.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.host`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.provisioningState`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EdgeMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EdgeMachineSpec   `json:"spec"`
	Status EdgeMachineStatus `json:"status,omitempty"`
}

// EdgeMachineList is a list of EdgeMachines.
//
// +kubebuilder:object:root=true
type EdgeMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgeMachine `json:"items"`
}

// EdgeMachineTemplateSpec holds the template of the machines of a MachineDeployment.
type EdgeMachineTemplateSpec struct {
	// Template of the machines.
	// +required
	Template EdgeMachineTemplateResource `json:"template"`
}

// EdgeMachineTemplateResource is the template proper.
type EdgeMachineTemplateResource struct {
	// Spec of the machines.
	// +required
	Spec EdgeMachineSpec `json:"spec"`
}

// EdgeMachineTemplate is the template of EdgeMachines that a MachineDeployment clones.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type EdgeMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EdgeMachineTemplateSpec `json:"spec"`
}

// EdgeMachineTemplateList is a list of EdgeMachineTemplates.
//
// +kubebuilder:object:root=true
type EdgeMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgeMachineTemplate `json:"items"`
}

// EdgeClusterSpec is the desired infrastructure of a cluster.
type EdgeClusterSpec struct {
	// ControlPlaneEndpoint is where the cluster's API server is reached.
	// +required
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint"`
}

// EdgeClusterStatus is what the provider saw.
type EdgeClusterStatus struct {
	// Initialization.provisioned is true once the cluster infrastructure is ready.
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
	// Conditions: Ready, and Paused (True while the object or its Cluster is paused, as
	// Cluster-API's v1beta2 contract asks of providers).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EdgeCluster is the Cluster-API infrastructure cluster of a site's application cluster: bare
// metal needs no cluster-wide infrastructure beyond the control-plane endpoint.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type EdgeCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EdgeClusterSpec   `json:"spec"`
	Status EdgeClusterStatus `json:"status,omitempty"`
}

// EdgeClusterList is a list of EdgeClusters.
//
// +kubebuilder:object:root=true
type EdgeClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgeCluster `json:"items"`
}

// EdgeBootstrapConfigSpec is the desired bootstrap of one machine. It is empty for now: what a
// host gets comes from its ApplicationCluster (packages, version); the BPA adds its settings.
type EdgeBootstrapConfigSpec struct{}

// BootstrapInitialization is the v1beta2 contract's readiness flag of a bootstrap config.
type BootstrapInitialization struct {
	// DataSecretCreated is true once the Secret named by dataSecretName holds the first-boot data.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// EdgeBootstrapConfigStatus is what the bootstrap provider did.
type EdgeBootstrapConfigStatus struct {
	// Initialization.dataSecretCreated is true once the first-boot data is ready.
	// +optional
	Initialization BootstrapInitialization `json:"initialization,omitempty"`
	// DataSecretName is the Secret (key "value") with the host's first-boot data (cloud-init
	// user data), which Metal3 hands to the host.
	// +optional
	DataSecretName *string `json:"dataSecretName,omitempty"`
	// Joined is true once the host runs the node software and its node registered.
	// +optional
	Joined bool `json:"joined,omitempty"`
	// Conditions: Ready, and Paused (True while the object or its Cluster is paused, as
	// Cluster-API's v1beta2 contract asks of providers).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EdgeBootstrapConfig is the Cluster-API bootstrap config of one machine.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Data",type=string,JSONPath=`.status.dataSecretName`
// +kubebuilder:printcolumn:name="Joined",type=boolean,JSONPath=`.status.joined`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EdgeBootstrapConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec   EdgeBootstrapConfigSpec   `json:"spec,omitempty"`
	Status EdgeBootstrapConfigStatus `json:"status,omitempty"`
}

// EdgeBootstrapConfigList is a list of EdgeBootstrapConfigs.
//
// +kubebuilder:object:root=true
type EdgeBootstrapConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgeBootstrapConfig `json:"items"`
}

// EdgeBootstrapConfigTemplateSpec holds the template of the bootstrap configs of a
// MachineDeployment.
type EdgeBootstrapConfigTemplateSpec struct {
	// Template of the configs.
	// +required
	Template EdgeBootstrapConfigTemplateResource `json:"template"`
}

// EdgeBootstrapConfigTemplateResource is the template proper.
type EdgeBootstrapConfigTemplateResource struct {
	// Spec of the configs.
	// +optional
	Spec EdgeBootstrapConfigSpec `json:"spec,omitempty"`
}

// EdgeBootstrapConfigTemplate is the template of EdgeBootstrapConfigs that a MachineDeployment
// clones.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type EdgeBootstrapConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EdgeBootstrapConfigTemplateSpec `json:"spec"`
}

// EdgeBootstrapConfigTemplateList is a list of EdgeBootstrapConfigTemplates.
//
// +kubebuilder:object:root=true
type EdgeBootstrapConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgeBootstrapConfigTemplate `json:"items"`
}
